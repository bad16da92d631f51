-- Citus only: the crawl-wide sequencer of migration 38 with its events read by a join of
-- the shards' ranges instead of a LATERAL subquery per shard, which Citus refuses beside
-- a set-returning function ("correlated subqueries are not supported when the FROM
-- clause contains a set returning function"). The shard list prunes the read to the
-- Citus shards that hold those shards; the ready rows are numbered on the coordinator
-- (a window over every shard) and the UPDATE goes back to the nodes: the sequencer's
-- known pull (tests/integration/store/test_citus_plans.py). Same never-skip argument as
-- the migration's header.
CREATE OR REPLACE FUNCTION courtier_sequence_events() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
    v_shards integer[];
    v_from bigint[];
    v_to bigint[];
    v_count integer;
BEGIN
    PERFORM pg_advisory_xact_lock(1129270868, 0);
    SELECT s.last_position INTO v_last FROM outbox_sequencer s;
    -- the heads first (a statement of its own): every position up to them is committed.
    -- A placed position above its head (the shard's events and head emptied by hand)
    -- counts from 0 again.
    SELECT array_agg(h.shard ORDER BY h.shard), array_agg(f.pos ORDER BY h.shard),
           array_agg(h.last_pos ORDER BY h.shard)
        INTO v_shards, v_from, v_to
    FROM outbox_heads h LEFT JOIN outbox_placed p ON p.shard = h.shard,
         LATERAL (SELECT CASE WHEN p.placed_pos <= h.last_pos THEN p.placed_pos ELSE 0 END
                  AS pos) AS f
    WHERE h.last_pos > f.pos;
    IF v_shards IS NULL THEN
        RETURN 0;
    END IF;
    WITH ready AS (
        SELECT e.shard, e.shard_pos, row_number() OVER (ORDER BY e.id) AS rn
        FROM events e
        JOIN unnest(v_shards, v_from, v_to) AS r(s, lo, hi)
            ON e.shard = r.s AND e.shard_pos > r.lo AND e.shard_pos <= r.hi
        WHERE e.read_pos IS NULL AND e.shard = ANY(v_shards)
    ), placed AS (
        UPDATE events e SET read_pos = v_last + r.rn FROM ready r
        WHERE e.shard = r.shard AND e.shard_pos = r.shard_pos AND e.read_pos IS NULL
        RETURNING 1
    )
    SELECT count(*) INTO v_count FROM placed;
    INSERT INTO outbox_placed AS o (shard, placed_pos)
        SELECT r.s, r.hi FROM unnest(v_shards, v_to) AS r(s, hi) ORDER BY r.s
        ON CONFLICT (shard) DO UPDATE SET placed_pos = EXCLUDED.placed_pos;
    IF v_count > 0 THEN
        UPDATE outbox_sequencer SET last_position = v_last + v_count;
    END IF;
    RETURN v_count;
END;
$$;

