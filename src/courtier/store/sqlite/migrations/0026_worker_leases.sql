-- courtier SQLite schema, migration worker_leases: a shard's lease is its owner's one
-- worker lease (docs/scale-out.md, "Leases"). A shard is held while `shards.owner` names
-- a worker whose `worker_leases.expires_at` is still ahead; a round's renewal writes that
-- one row, not one row a shard held. A worker with no row here holds nothing live.
-- Upgrade: each owner's lease lasts until the latest of its shards' expiries, so every
-- live lease stays live (an expired shard of an owner with a live one is live again,
-- until that owner's lease ends: it is the same owner, and its epoch is kept).
CREATE TABLE worker_leases (
    owner      TEXT    PRIMARY KEY,
    expires_at REAL    NOT NULL
) WITHOUT ROWID;

INSERT INTO worker_leases (owner, expires_at)
    SELECT owner, max(lease_expires_at) FROM shards WHERE owner IS NOT NULL GROUP BY owner;

ALTER TABLE shards DROP COLUMN lease_expires_at;
