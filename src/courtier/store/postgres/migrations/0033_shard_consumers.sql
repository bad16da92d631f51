-- courtier PostgreSQL schema, migration 33: named consumers with a per-shard cursor
-- (docs/scale-out.md, "Named consumers by shard"). `cursor` is the ShardCursor's token
-- (c1.…): per shard, the last position consumed; it only moves forward in each shard
-- (an advance merges under the row's lock). The retention removes an event only once
-- every consumer here has read it in its shard. A name is either here or in
-- consumer_cursors, never both. On Citus a reference table, like consumer_cursors
-- (store/postgres/_citus.py): a handful of rows, written once per page a consumer reads,
-- read whole by the retention on the coordinator.
CREATE TABLE shard_consumers (
    name       text             PRIMARY KEY,
    cursor     text             NOT NULL,
    updated_at double precision NOT NULL
);
