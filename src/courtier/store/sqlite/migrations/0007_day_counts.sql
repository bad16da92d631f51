-- courtier SQLite schema, migration 7: daily page budgets survive a restart.
-- One row per budget: key '*' is the crawl-wide --daily-budget, any other key is a
-- host_key with a max-pages-per-day policy. Written before the counted fetches start.
CREATE TABLE day_counts (
    budget_key TEXT PRIMARY KEY,
    day_start  REAL NOT NULL,
    used       INTEGER NOT NULL
) WITHOUT ROWID;
