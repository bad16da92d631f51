-- courtier PostgreSQL schema, migration 29: the outbox's tallies (migration 14) kept per
-- shard instead of per backend.
--
-- On Citus the table was a reference table (a copy on every node), so every commit's
-- upsert of its tallies wrote every worker node, by two-phase commit, whatever nodes
-- its batch lived on (docs/scale-out.md, "Nodes per commit batch"). Keyed by the shard
-- of the events counted, the table is distributed by shard beside urls and events
-- (store/postgres/_citus.py): a commit adds to the rows of its own shards, on their
-- nodes. A read sums every row of a name, as before.
--
-- Waiting: migration 14 gave each backend rows of its own so that concurrent commits
-- never waited on a counter row. A shard's commits come from the one worker holding its
-- lease, one batch at a time, so two commits now share a counter row only when two
-- writers commit the same shard (a lease handed over, the re-parse of an archive); the
-- upserts lock the rows in (shard, name) order. The counts so far are kept as shard 0's.
-- (The new table is made beside the old and renamed once that is dropped: on Citus the
-- old one is a reference table, whose rename Citus refuses in a multi-statement string.)
CREATE TABLE event_counts_by_shard (
    shard integer NOT NULL,
    name  text    NOT NULL,
    n     bigint  NOT NULL,
    CONSTRAINT event_counts_by_shard_pkey PRIMARY KEY (shard, name)
);
INSERT INTO event_counts_by_shard (shard, name, n)
    SELECT 0, name, sum(n) FROM event_counts GROUP BY name;
DROP TABLE event_counts;
ALTER TABLE event_counts_by_shard RENAME TO event_counts;
ALTER TABLE event_counts RENAME CONSTRAINT event_counts_by_shard_pkey TO event_counts_pkey;
