-- courtier SQLite schema, migration 17: the near-duplicate index's start-up read served
-- by an index. load_simhashes asks each shard for its most recently fetched
-- fingerprints (`simhash IS NOT NULL ORDER BY last_fetch_at DESC, url_key LIMIT n`);
-- without an index on that order it read every row of the shard and sorted the
-- fingerprinted ones, so a worker's start grew with the known URLs. This partial index
-- holds only rows with a fingerprint, in that order (and the fingerprint, so the read
-- stays in the index): each shard's read is one range of at most n entries.
CREATE INDEX urls_recent_simhash ON urls (shard, last_fetch_at DESC, url_key, simhash)
    WHERE simhash IS NOT NULL;
