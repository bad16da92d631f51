-- courtier SQLite schema, migration 13: the refresh plan (docs/freshness.md).
-- urls.value: the URL's value (given from outside, or derived at its first fetch);
-- urls.tier: the refresh tier its last plan used. host_tiers: per-host overrides
-- (policy set HOST --tier / --min-interval / --max-interval / --value).
ALTER TABLE urls ADD COLUMN value REAL;
ALTER TABLE urls ADD COLUMN tier TEXT;
CREATE TABLE host_tiers (
    host_key     TEXT PRIMARY KEY,
    tier         TEXT,
    min_interval REAL,
    max_interval REAL,
    value_factor REAL,
    updated_at   REAL NOT NULL
);
