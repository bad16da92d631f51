-- courtier SQLite schema: each host's levels in its host-queue row (PostgreSQL migration
-- 23 has the same as two arrays; docs/scale-out.md, "The refill that writes nothing").
-- host_queue.levels is the host's host_levels rows as a JSON array of [priority,
-- next_due_at] pairs, best level first, kept exact by courtier.store.sqlite._refill
-- (enter_queue, refresh_levels) wherever next_due_at and best_priority are. The ready-host
-- indexes carry it, so the host range gives each host's due levels from the index alone
-- and the refill reads no host_levels row.
ALTER TABLE host_queue ADD COLUMN levels TEXT NOT NULL DEFAULT '[]';

-- (17 significant digits: json_array would round a due time to 15)
UPDATE host_queue SET levels = (
    SELECT '[' || group_concat('[' || l.priority || ',' || printf('%!.17g', l.next_due_at)
                               || ']', ',') || ']'
    FROM (SELECT priority, next_due_at FROM host_levels
          WHERE shard = host_queue.shard AND host_key = host_queue.host_key
          ORDER BY priority DESC) AS l);

DROP INDEX host_queue_ready;
DROP INDEX host_queue_shard_ready;
CREATE INDEX host_queue_ready ON host_queue (best_priority, next_due_at, host_key, levels);
CREATE INDEX host_queue_shard_ready
    ON host_queue (shard, best_priority, next_due_at, host_key, levels);
