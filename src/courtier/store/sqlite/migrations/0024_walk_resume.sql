-- courtier SQLite schema, migration 24: a refill resumes its walk where the last one
-- stopped (store/walk_place.py; PostgreSQL's migration 0031 does the same).
--
-- Every insert of a host-queue row, and every change of its walk key (next_due_at,
-- best_priority), stamps the row with the walk clock's value and advances the clock, in
-- the writer's transaction. A refill reads the clock in its own read transaction: every
-- row stamped below that value was visible to it, and every later write stamps at least
-- that value, so the next refill finds what moved since by one range of
-- host_queue_changed. A write that changes only a host's levels leaves the stamp alone:
-- a host whose walk key did not move cannot enter the part of the walk already done
-- (PostgreSQL's migration 0031 says why), and the skipset branch's stamp of every level
-- change (merge d40fc34) cost a trigger run and two writes per commit of a host.
CREATE TABLE IF NOT EXISTS walk_clock (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    n  INTEGER NOT NULL
);
INSERT OR IGNORE INTO walk_clock (id, n) VALUES (0, 1);

ALTER TABLE host_queue ADD COLUMN changed INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS host_queue_changed ON host_queue (changed);

CREATE TRIGGER IF NOT EXISTS host_queue_entered AFTER INSERT ON host_queue
BEGIN
    UPDATE host_queue SET changed = (SELECT n FROM walk_clock WHERE id = 0)
    WHERE shard = NEW.shard AND host_key = NEW.host_key;
    UPDATE walk_clock SET n = n + 1 WHERE id = 0;
END;

CREATE TRIGGER IF NOT EXISTS host_queue_moved AFTER UPDATE OF next_due_at, best_priority ON host_queue
WHEN OLD.next_due_at IS NOT NEW.next_due_at OR OLD.best_priority IS NOT NEW.best_priority
BEGIN
    UPDATE host_queue SET changed = (SELECT n FROM walk_clock WHERE id = 0)
    WHERE shard = NEW.shard AND host_key = NEW.host_key;
    UPDATE walk_clock SET n = n + 1 WHERE id = 0;
END;
