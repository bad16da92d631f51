-- The worker lease moves into the worker's `workers` row (issue 30; docs/scale-out.md,
-- "Leases"): a coordinator round's heartbeat renews the lease in the same statement, so a
-- round that takes no shard writes one row of one reference table (on Citus one statement
-- sent to each node and one two-phase commit, where it wrote `workers` and then
-- `worker_leases`, two). A shard is held while `shards.owner` names a worker whose
-- `workers.lease_expires_at` is still ahead of courtier_now(); a worker with no row holds
-- nothing live, as before.
--
-- A lease renewed without a heartbeat (a single process's `renew_shards`, an acquisition by
-- an owner that never heartbeated, a worker that left with leases still live) is a row
-- whose `heartbeat_at` is NULL: no member of the cluster (the view leaves it out), only a
-- lease. `prune_workers` deletes a row once it has been silent (heartbeat, or the lease's
-- end when it never beat) for the age given and its lease has ended: the lease rows of
-- workers long dead go with their membership.
--
-- The race of a taker with the owner's renewal is migration 0034's, on this row: the
-- renewal (a heartbeat, an acquisition, `renew_shards`) updates it first, and a taker
-- reads an owner's expiry only through a FOR SHARE lock of it, SKIP LOCKED.
--
-- Upgrade: every `worker_leases` row's expiry is copied to its owner's row (a new lease
-- row when the owner has none), so every live lease stays live.
ALTER TABLE workers ADD COLUMN lease_expires_at double precision NOT NULL DEFAULT 0;
ALTER TABLE workers ALTER COLUMN heartbeat_at DROP NOT NULL;

INSERT INTO workers AS w (worker_id, weight, heartbeat_at, started_at, info, lease_expires_at)
    SELECT l.owner, 0, NULL, 0, '{}', l.expires_at FROM worker_leases l
    ON CONFLICT (worker_id) DO UPDATE SET lease_expires_at = EXCLUDED.lease_expires_at;

DROP TABLE worker_leases;

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
    -- (a lease row of its own when the owner never heartbeated)
    INSERT INTO workers AS w (worker_id, weight, heartbeat_at, started_at, info,
                              lease_expires_at)
        VALUES (p_owner, 0, NULL, t_now, '{}', t_now + p_lease)
        ON CONFLICT (worker_id) DO UPDATE SET lease_expires_at = EXCLUDED.lease_expires_at;
    IF EXISTS (SELECT 1 FROM unnest(p_shards) AS x
                WHERE NOT EXISTS (SELECT 1 FROM shards s WHERE s.shard = x)) THEN
        INSERT INTO shards AS s (shard) SELECT x FROM unnest(p_shards) AS x ORDER BY x
            ON CONFLICT DO NOTHING;
    END IF;
    -- a call that only renews ends here: the shards of the call we own, no other row
    -- read under a lock or written (on Citus no statement sent to the nodes for them)
    RETURN QUERY
    SELECT s.shard, s.epoch FROM shards s WHERE s.shard = ANY(p_shards) AND s.owner = p_owner;
    IF NOT EXISTS (SELECT 1 FROM shards s WHERE s.shard = ANY(p_shards)
                                             AND s.owner IS DISTINCT FROM p_owner) THEN
        RETURN;
    END IF;
    -- the rows we may take, in shard order; ours are not locked (a taker needs our
    -- workers row, locked above, so none of them changes hands before we commit)
    PERFORM 1 FROM shards s WHERE s.shard = ANY(p_shards) AND s.owner IS DISTINCT FROM p_owner
        ORDER BY s.shard FOR UPDATE;
    t_others := ARRAY(SELECT DISTINCT s.owner FROM shards s
                       WHERE s.shard = ANY(p_shards) AND s.owner <> p_owner);
    IF cardinality(t_others) > 0 THEN
        SELECT array_agg(o) INTO t_expired FROM (
            SELECT o FROM unnest(t_others) AS o
             WHERE NOT EXISTS (SELECT 1 FROM workers w WHERE w.worker_id = o)
            UNION ALL
            SELECT q.worker_id FROM (SELECT w.worker_id FROM workers w
                                      WHERE w.worker_id = ANY(t_others)
                                        AND w.lease_expires_at <= t_now
                                      ORDER BY w.worker_id FOR SHARE SKIP LOCKED) AS q
            ) AS e(o);
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
