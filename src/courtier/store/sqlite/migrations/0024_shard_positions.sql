-- courtier SQLite schema, migration shard_positions: every event placed in its shard's
-- commit order (docs/scale-out.md, "The outbox cursor"), the order the per-shard cursor
-- reads (Store.read_events_by_shard). outbox_heads keeps each shard's last position; a
-- writer takes the next ones in its own transaction (one writer at a time: commit
-- order), and the retention never lowers a head, so a position is never handed out twice.
ALTER TABLE events ADD COLUMN shard INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN shard_pos INTEGER NOT NULL DEFAULT 0;
UPDATE events SET shard = COALESCE((SELECT u.shard FROM urls u WHERE u.url_key = events.url_key), 0);
CREATE INDEX events_shard_pos ON events (shard, shard_pos);
-- the events kept so far, numbered per shard in id order (the commit order of one writer)
UPDATE events SET shard_pos = (SELECT count(*) FROM events e
                               WHERE e.shard = events.shard AND e.id <= events.id);
CREATE TABLE outbox_heads (
    shard      INTEGER PRIMARY KEY,
    last_pos   INTEGER NOT NULL,
    pruned_pos INTEGER NOT NULL DEFAULT 0  -- the highest position the retention removed
);
INSERT INTO outbox_heads (shard, last_pos) SELECT shard, max(shard_pos) FROM events GROUP BY shard;
