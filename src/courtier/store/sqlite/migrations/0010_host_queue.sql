-- courtier SQLite schema, migration 10: the refill reads hosts first (DESIGN.md §5).
-- host_queue holds, per (shard, host) with QUEUED rows, the earliest next_fetch_at and
-- the best priority of those rows, kept exact by the store in the same transaction:
-- rows entering QUEUED (intake, release, reset, a commit of a SCHEDULED row) lower
-- next_due_at / raise best_priority; when rows leave QUEUED or change while QUEUED
-- (load_due, a commit of a QUEUED row) the host is recomputed from urls_queued.
CREATE TABLE host_queue (
    shard         INTEGER NOT NULL,
    host_key      TEXT    NOT NULL,
    next_due_at   REAL    NOT NULL,
    best_priority INTEGER NOT NULL,
    PRIMARY KEY (shard, host_key)
) WITHOUT ROWID;

-- Ready hosts of one priority level, earliest first (all-shard refills) ...
CREATE INDEX host_queue_ready ON host_queue (best_priority, next_due_at, host_key);
-- ... and the same inside one shard (refills of a few shards).
CREATE INDEX host_queue_shard_ready ON host_queue (shard, best_priority, next_due_at, host_key);

-- The per-host probe: one range per (host, priority level), in row order.
CREATE INDEX urls_queued ON urls (shard, host_key, priority, next_fetch_at, depth)
    WHERE state = 0;

INSERT INTO host_queue (shard, host_key, next_due_at, best_priority)
    SELECT shard, host_key, MIN(next_fetch_at), MAX(priority) FROM urls
    WHERE state = 0 AND next_fetch_at IS NOT NULL GROUP BY shard, host_key;
