-- courtier SQLite schema, migration 4: change history for recrawl scheduling and the
-- near-duplicate group of each page.
ALTER TABLE urls ADD COLUMN change_stats TEXT;
ALTER TABLE urls ADD COLUMN near_dup_of TEXT;
