-- courtier SQLite schema, migration 14: the refill probes only a host's due priority levels.
-- host_levels holds, per (shard, host, priority) with QUEUED rows, the earliest
-- next_fetch_at of those rows, kept exact in the same transaction as host_queue
-- (courtier.store.sqlite._refill): rows entering QUEUED lower it, rows leaving or
-- changing while QUEUED make the store recompute that level from urls_queued (one
-- index seek). A refill reads a host's levels with next_due_at <= now and probes one
-- index range per such level, instead of a skip scan over every level the host has.
CREATE TABLE host_levels (
    shard       INTEGER NOT NULL,
    host_key    TEXT    NOT NULL,
    priority    INTEGER NOT NULL,
    next_due_at REAL    NOT NULL,
    PRIMARY KEY (shard, host_key, priority)
) WITHOUT ROWID;

INSERT INTO host_levels (shard, host_key, priority, next_due_at)
    SELECT shard, host_key, priority, MIN(next_fetch_at) FROM urls
    WHERE state = 0 AND next_fetch_at IS NOT NULL GROUP BY shard, host_key, priority;

