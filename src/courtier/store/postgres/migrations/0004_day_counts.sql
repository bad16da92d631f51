-- courtier PostgreSQL schema, migration 4: daily page budgets survive a restart.
-- One row per budget: key '*' is the crawl-wide --daily-budget, any other key is a
-- host_key with a max-pages-per-day policy. Written before the counted fetches start.
CREATE TABLE day_counts (
    budget_key TEXT PRIMARY KEY,
    day_start  DOUBLE PRECISION NOT NULL,
    used       BIGINT NOT NULL
);
