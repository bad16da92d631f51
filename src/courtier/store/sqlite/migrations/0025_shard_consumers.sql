-- courtier SQLite schema, migration shard_consumers: named consumers with a per-shard
-- cursor (docs/scale-out.md, "Named consumers by shard"). `cursor` is the ShardCursor's
-- token (c1.…): per shard, the last position consumed; it only moves forward in each
-- shard. The retention removes an event only once every consumer here has read it in
-- its shard. A name is either here or in consumer_cursors, never both.
CREATE TABLE shard_consumers (
    name       TEXT    PRIMARY KEY,
    cursor     TEXT    NOT NULL,
    updated_at REAL    NOT NULL
) WITHOUT ROWID;
