-- courtier PostgreSQL schema, migration 37 (branch hostfold, issue 29): the commit's
-- host-queue upkeep writes a host_queue row only when it changes.
--
-- Each commit batch locked (or created) the host_queue row of every host it touched by
-- an upsert whose update set a column to itself (courtier_queue_lock): a new row
-- version (a whole tuple in the heap and in the WAL) per host a batch, only to hold the
-- row (a crawl of 27,160 pages: 41,000 of host_queue's 55,000 updates; bench/README.md,
-- "The host queue written on change"). Then every host's row was recomputed from all its
-- host_levels rows (courtier_queue_from_levels: one index range read and aggregate per
-- host), even the hosts none of whose levels the batch changed.
--
-- Now:
-- 1. the lock is the same upsert with `DO UPDATE ... WHERE false`: PostgreSQL locks a
--    conflicting row before it tests the update's WHERE, so the row is held exactly as
--    before (the same tuple lock mode, the same key order, a missing row still made
--    and held), but no row version is written (only the lock's small WAL record);
-- 2. the commit's two host_levels statements return the hosts whose levels they
--    inserted, changed or deleted; with the hosts whose queue row the lock had to
--    make, those are the only ones recomputed from their levels. A host's queue row is
--    a function of its host_levels rows, every writer of those rows holds the queue
--    row's lock (taken first, in key order), and this transaction holds it: a host
--    whose levels did not change keeps a queue row that is already exact.
--
-- Plain PostgreSQL only: a Citus coordinator keeps its own forms (store/postgres/citus/,
-- whose courtier_queue_lock takes the same `WHERE false`).
DO $migration$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;

    CREATE OR REPLACE FUNCTION courtier_queue_lock(p_shards integer[], p_hosts text[])
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority)
        SELECT DISTINCT s, h, 'infinity'::double precision, 0
        FROM unnest(p_shards, p_hosts) AS t(s, h) ORDER BY s, h
        ON CONFLICT (shard, host_key) DO UPDATE SET best_priority = q.best_priority
            WHERE false;  -- locked, not rewritten
    END;
    $$;

    CREATE OR REPLACE FUNCTION courtier_queue_commit(p_shards integer[], p_hosts text[],
                                                     p_priority integer[],
                                                     p_add_shards integer[], p_add_hosts text[],
                                                     p_add_due double precision[],
                                                     p_add_prio integer[])
    RETURNS void LANGUAGE plpgsql
    SET plan_cache_mode = force_generic_plan SET jit = off
    SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
    AS $$
    DECLARE
        v_s integer[];  -- the hosts to recompute from their levels
        v_h text[];
        v_cs integer[];
        v_ch text[];
    BEGIN
        -- 1. every host's queue row held (made when missing: returned), in key order
        WITH made AS (
            INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority)
            SELECT DISTINCT s, h, 'infinity'::double precision, 0
            FROM unnest(p_shards || p_add_shards, p_hosts || p_add_hosts) AS t(s, h)
            ORDER BY s, h
            ON CONFLICT (shard, host_key) DO UPDATE SET best_priority = q.best_priority
                WHERE false  -- locked, not rewritten
            RETURNING q.shard, q.host_key
        )
        SELECT array_agg(m.shard), array_agg(m.host_key) INTO v_s, v_h FROM made m;
        -- 2. levels entered (an earlier due time is the only change)
        WITH entered AS (
            INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
            SELECT s, h, p, min(d)
            FROM unnest(p_add_shards, p_add_hosts, p_add_prio, p_add_due) AS t(s, h, p, d)
            WHERE d IS NOT NULL GROUP BY s, h, p ORDER BY s, h, p
            ON CONFLICT (shard, host_key, priority) DO UPDATE
                SET next_due_at = EXCLUDED.next_due_at
                WHERE EXCLUDED.next_due_at < l.next_due_at
            RETURNING l.shard, l.host_key
        )
        SELECT array_agg(e.shard), array_agg(e.host_key) INTO v_cs, v_ch FROM entered e;
        v_s := COALESCE(v_s, '{}') || COALESCE(v_cs, '{}');
        v_h := COALESCE(v_h, '{}') || COALESCE(v_ch, '{}');
        -- 3. each level a committed row left: one seek for its new best due time
        WITH t AS (
            SELECT DISTINCT s, h, p FROM unnest(p_shards, p_hosts, p_priority) AS t(s, h, p)
        ), fresh AS (
            SELECT t.s, t.h, t.p,
                   (SELECT u.next_fetch_at FROM urls u
                     WHERE u.shard = t.s AND u.host_key = t.h AND u.state = 0
                       AND u.priority = t.p AND u.next_fetch_at IS NOT NULL
                     ORDER BY u.priority DESC, u.next_fetch_at, u.depth, u.url_key
                     LIMIT 1) AS due
            FROM t
        ), emptied AS (
            DELETE FROM host_levels l USING fresh f
            WHERE l.shard = f.s AND l.host_key = f.h AND l.priority = f.p AND f.due IS NULL
            RETURNING l.shard, l.host_key
        ), moved AS (
            INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
            SELECT s, h, p, due FROM fresh WHERE due IS NOT NULL ORDER BY s, h, p
            ON CONFLICT (shard, host_key, priority) DO UPDATE
                SET next_due_at = EXCLUDED.next_due_at
                WHERE l.next_due_at <> EXCLUDED.next_due_at
            RETURNING l.shard, l.host_key
        )
        SELECT array_agg(c.shard), array_agg(c.host_key) INTO v_cs, v_ch
        FROM (SELECT * FROM emptied UNION ALL SELECT * FROM moved) AS c;
        v_s := v_s || COALESCE(v_cs, '{}');
        v_h := v_h || COALESCE(v_ch, '{}');
        -- 4. the queue rows of the hosts whose levels changed (or whose row was made)
        IF cardinality(v_s) > 0 THEN
            PERFORM courtier_queue_from_levels(v_s, v_h);
        END IF;
    END;
    $$;
END
$migration$;
