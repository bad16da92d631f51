-- courtier PostgreSQL schema, migration 19: the near-duplicate index's start-up read
-- served by an index.
--
-- load_simhashes (a worker's start and every shard it gains) asks each shard for its
-- most recently fetched fingerprints (`simhash IS NOT NULL ORDER BY last_fetch_at DESC,
-- url_key LIMIT n`). Without an index on that order it read every row of the shard
-- and sorted the fingerprinted ones: a worker taking all 1024 shards of a 10 M-URL
-- store spent minutes in it before its first refill, and the time grew with the known
-- URLs. This partial index holds only fetched rows with a fingerprint, in the order
-- the read wants, so each shard's read is one range of at most n entries. Rows enter
-- it at the commit that fingerprints them (intake never does: new rows have none).
CREATE INDEX urls_recent_simhash ON urls (shard, last_fetch_at DESC NULLS LAST, url_key)
    INCLUDE (simhash) WHERE simhash IS NOT NULL;
