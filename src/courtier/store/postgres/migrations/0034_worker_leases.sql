-- A shard's lease is its owner's one worker lease (issues 29 and 30; docs/scale-out.md,
-- "Leases"). A shard is held while `shards.owner` names a worker whose
-- `worker_leases.expires_at` is still ahead of courtier_now(); a worker with no row here
-- holds nothing live. Before, every coordinator round rewrote the expiry of each shard the
-- worker held (1,024 rows a round with 1,024 shards, each sent to every node on Citus,
-- where `shards` is a reference table); now a round's renewal writes one row, and an
-- acquisition writes only the shard rows that change owner.
--
-- Same decisions as migration 0031: ours renewed (epoch kept), even when expired and not
-- yet taken; free taken at greatest(epoch, 1), a "graceful" handover when another owner
-- released it; under an expired lease taken at epoch + 1, a "takeover"; another owner's
-- live lease left alone. The shard row keeps owner, epoch, last_owner and acquired_at;
-- its own expiry column goes.
--
-- The race of a taker with the owner's renewal (READ COMMITTED): the renewal's first
-- statement updates the owner's row, which stays locked to the end of its transaction;
-- a taker reads an owner's expiry only through a FOR SHARE lock of that row, SKIP LOCKED
-- (a row its owner is renewing right now is live). Either the taker locked first and the
-- renewal waits for its commit, then reads (a statement of its own, a later snapshot)
-- which shards its owner still owns; or the renewal locked first and the taker leaves
-- that owner's shards alone. The taker never waits on a lease row, so no cycle: the
-- shard rows it may take are locked FOR UPDATE in shard order before any lease row.
--
-- Upgrade: each owner's lease lasts until the latest expiry of its shards, so every live
-- lease stays live (an expired shard of an owner with a live lease is live again until
-- that lease ends: same owner, same epoch).
CREATE TABLE worker_leases (
    owner      text PRIMARY KEY,
    expires_at double precision NOT NULL
);

INSERT INTO worker_leases (owner, expires_at)
    SELECT s.owner, max(s.lease_expires_at) FROM shards s WHERE s.owner IS NOT NULL
    GROUP BY s.owner;

CREATE OR REPLACE FUNCTION courtier_acquire_shards(p_owner text, p_shards integer[],
                                                   p_lease double precision)
RETURNS TABLE (shard integer, epoch bigint)
LANGUAGE plpgsql AS $$
DECLARE
    t_now double precision := courtier_now();
    t_others text[];
    t_expired text[];
    t_takeable bigint;
    t_graceful bigint;
    t_takeover bigint;
BEGIN
    -- the renewal of every shard we own, in this call or not: one row, locked to the end
    INSERT INTO worker_leases AS l (owner, expires_at) VALUES (p_owner, t_now + p_lease)
        ON CONFLICT (owner) DO UPDATE SET expires_at = EXCLUDED.expires_at;
    IF EXISTS (SELECT 1 FROM unnest(p_shards) AS x
                WHERE NOT EXISTS (SELECT 1 FROM shards s WHERE s.shard = x)) THEN
        INSERT INTO shards AS s (shard) SELECT x FROM unnest(p_shards) AS x ORDER BY x
            ON CONFLICT DO NOTHING;
    END IF;
    -- a round that only renews ends here: the shards of the call we own, no other row
    -- read under a lock or written (on Citus no statement sent to the nodes for them)
    RETURN QUERY
    SELECT s.shard, s.epoch FROM shards s WHERE s.shard = ANY(p_shards) AND s.owner = p_owner;
    IF NOT EXISTS (SELECT 1 FROM shards s WHERE s.shard = ANY(p_shards)
                                             AND s.owner IS DISTINCT FROM p_owner) THEN
        RETURN;
    END IF;
    -- the rows we may take, in shard order; ours are not locked (a taker needs our lease
    -- row, locked above, so none of them changes hands before we commit)
    PERFORM 1 FROM shards s WHERE s.shard = ANY(p_shards) AND s.owner IS DISTINCT FROM p_owner
        ORDER BY s.shard FOR UPDATE;
    t_others := ARRAY(SELECT DISTINCT s.owner FROM shards s
                       WHERE s.shard = ANY(p_shards) AND s.owner <> p_owner);
    IF cardinality(t_others) > 0 THEN
        SELECT array_agg(o) INTO t_expired FROM (
            SELECT o FROM unnest(t_others) AS o
             WHERE NOT EXISTS (SELECT 1 FROM worker_leases l WHERE l.owner = o)
            UNION ALL
            SELECT q.owner FROM (SELECT l.owner FROM worker_leases l
                                  WHERE l.owner = ANY(t_others) AND l.expires_at <= t_now
                                  ORDER BY l.owner FOR SHARE SKIP LOCKED) AS q) AS e(o);
    END IF;
    t_expired := coalesce(t_expired, '{}');
    SELECT count(*),
           count(*) FILTER (WHERE s.owner IS NULL AND s.last_owner IS NOT NULL
                                  AND s.last_owner <> p_owner),
           count(*) FILTER (WHERE s.owner IS NOT NULL)
      INTO t_takeable, t_graceful, t_takeover
      FROM shards s
     WHERE s.shard = ANY(p_shards) AND (s.owner IS NULL OR s.owner = ANY(t_expired));
    IF t_takeable = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    UPDATE shards s SET owner = p_owner,
        epoch = CASE WHEN s.owner IS NULL THEN greatest(s.epoch, 1) ELSE s.epoch + 1 END,
        last_owner = p_owner, acquired_at = t_now
    WHERE s.shard = ANY(p_shards) AND (s.owner IS NULL OR s.owner = ANY(t_expired))
    RETURNING s.shard, s.epoch;
    IF t_graceful > 0 THEN
        UPDATE cluster_counters c SET value = c.value + t_graceful WHERE c.name = 'graceful';
    END IF;
    IF t_takeover > 0 THEN
        UPDATE cluster_counters c SET value = c.value + t_takeover WHERE c.name = 'takeover';
    END IF;
END $$;

ALTER TABLE shards DROP COLUMN lease_expires_at;
