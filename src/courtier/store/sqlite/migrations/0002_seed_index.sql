-- courtier SQLite schema, migration 2: a partial index over the seeds (depth 0),
-- so that seed_urls() on resume reads only the seeds, not every known URL.
CREATE INDEX urls_seeds ON urls (discovered_at) WHERE depth = 0;
