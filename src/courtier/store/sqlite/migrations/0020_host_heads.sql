-- courtier SQLite schema: each host's head level in its host-queue row (PostgreSQL has the
-- same columns; docs/scale-out.md, "The refill").
--   best_due_at  the earliest next_fetch_at of the host's QUEUED rows of its best level;
--   rest_due_at  the earliest next_fetch_at of its QUEUED rows of every other level
--                (+infinity when it has none).
-- A ready host whose rest_due_at is after now has one due level, its best, and the
-- refill reads its rows as one urls_queued range without reading host_levels. Kept
-- exact by courtier.store.sqlite._refill (enter_queue, refresh_levels). The ready-host
-- indexes carry rest_due_at, so the host range still reads only the index.
ALTER TABLE host_queue ADD COLUMN best_due_at REAL NOT NULL DEFAULT 9e999;
ALTER TABLE host_queue ADD COLUMN rest_due_at REAL NOT NULL DEFAULT 9e999;

UPDATE host_queue SET
    best_due_at = coalesce((SELECT l.next_due_at FROM host_levels AS l
                            WHERE l.shard = host_queue.shard
                              AND l.host_key = host_queue.host_key
                              AND l.priority = host_queue.best_priority), next_due_at),
    rest_due_at = coalesce((SELECT MIN(l.next_due_at) FROM host_levels AS l
                            WHERE l.shard = host_queue.shard
                              AND l.host_key = host_queue.host_key
                              AND l.priority < host_queue.best_priority), 9e999);

DROP INDEX host_queue_ready;
DROP INDEX host_queue_shard_ready;
CREATE INDEX host_queue_ready ON host_queue (best_priority, next_due_at, host_key, rest_due_at);
CREATE INDEX host_queue_shard_ready
    ON host_queue (shard, best_priority, next_due_at, host_key, rest_due_at);
