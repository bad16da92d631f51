-- courtier PostgreSQL schema, migration 9: the refresh plan (docs/freshness.md).
-- urls.value: the URL's value (given from outside, or derived at its first fetch);
-- urls.tier: the refresh tier its last plan used. host_tiers: per-host overrides
-- (policy set HOST --tier / --min-interval / --max-interval / --value).
ALTER TABLE urls ADD COLUMN value double precision;
ALTER TABLE urls ADD COLUMN tier text;
CREATE TABLE host_tiers (
    host_key     text PRIMARY KEY,
    tier         text,
    min_interval double precision,
    max_interval double precision,
    value_factor double precision,
    updated_at   double precision NOT NULL
);
