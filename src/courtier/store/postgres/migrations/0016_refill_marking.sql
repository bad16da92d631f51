-- courtier PostgreSQL schema, migration 16: a refill's marking and a lease renewal
-- whose cost does not depend on the planner's statistics or on a loop per shard, and
-- a cheaper commit.
--
-- 1. courtier_load_due is migration 10's with one statement changed: the UPDATE that
--    marks the chosen rows SCHEDULED. It joined the chosen keys to urls with
--    `u.state = 0`; in a crawl whose tables grow fast (every new crawl), autovacuum's
--    statistics lag behind, the planner estimated a few QUEUED rows per partition
--    and (hash and merge joins being off in this function) read every QUEUED row
--    once and compared it with every chosen key: 2,000 keys x 14,594 rows = 29 M
--    comparisons, 9 s for one refill, seen in the many-workers bench. Now each key
--    is first found by a primary-key probe inside a LATERAL fenced by OFFSET 0 (so
--    it stays a probe per key), and the UPDATE takes the row version it found by its
--    TID. Reading every QUEUED row per key is no longer a plan the planner can
--    estimate as cheap: it would repeat all the probes per row. A row updated
--    between the probe and the UPDATE is followed to its new version and rechecked
--    (`state = 0`), as before.
-- 2. courtier_acquire_shards renews the caller's own leases in one UPDATE (it ran one
--    UPDATE statement per shard: ~1,024 per renewal of a single worker, 100-150 ms);
--    the rows are still locked in shard order first, and the shards it does not own
--    go through the same rules as in migration 7.
-- 3. courtier_commit keeps its plans for the session (plan_cache_mode =
--    force_generic_plan; it re-planned every statement of every call). Planning its
--    statements over the 16 partitions was about 40 % of a commit: 80 results of a
--    realistic page each, 41-42 ms in the function with custom plans against 21-27 ms
--    with generic ones (same database, alternating runs, auto_explain timing on). Its
--    statements are safe without the batch's values: the commits of one round are
--    estimated at one row (a filter on a window function's output) and drive
--    primary-key probes of urls, hash and merge joins stay off, and ANALYZE
--    invalidates a cached plan. (The refill keeps custom plans: its host walk's
--    ranges are chosen by the values.)
-- 4. Event payloads (a page's JSON with its links: ~4 KB in a typical crawl, over the
--    2 KB at which PostgreSQL compresses a value) are compressed with lz4 where the
--    server has it, not pglz: ~45 us less server CPU per event measured on 3.6 KB
--    payloads (20,000 rows: 1.19 s against 2.09 s), about as small. Old rows keep
--    pglz; both are read transparently.

CREATE OR REPLACE FUNCTION courtier_load_due(p_shards integer[], p_now double precision,
                                             p_overdue double precision, p_limit integer,
                                             p_per_host integer, p_skip text[])
RETURNS TABLE (walk bigint, shard integer, url_key bytea, url text, host_key text,
               depth integer, priority integer, version integer,
               next_fetch_at double precision, redirect_hops integer, etag text,
               last_modified text, failure_count integer, payload_digest text,
               change_stats text, last_fetch_at double precision, warc_file text,
               simhash bigint, sitemap_changefreq text, sitemap_lastmod double precision,
               redirect_chain text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_levels integer[];
    v_late boolean;
    v_level integer;
    v_low double precision;
    v_after_due double precision;
    v_after_host text;
    v_after_shard integer;
    v_want integer;
    v_rate double precision := greatest(p_per_host, 1);  -- rows per host, then as seen
    v_hs integer[];
    v_hh text[];
    v_hd double precision[];
    v_seen bigint;
    v_shards integer[] := '{}';
    v_keys bytea[] := '{}';
    v_hosts text[] := '{}';
    v_prios integer[] := '{}';
    v_bs integer[];
    v_bk bytea[];
    v_bh text[];
    v_bp integer[];
BEGIN
    IF p_limit <= 0 OR p_per_host <= 0 OR cardinality(p_shards) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(1129270869, l.s)
    FROM (SELECT DISTINCT s FROM unnest(p_shards) AS s ORDER BY s) AS l;

    -- the distinct best priorities of host_queue, best first (one seek each)
    WITH RECURSIVE lv(p) AS (
        SELECT (SELECT q.best_priority FROM host_queue q ORDER BY q.best_priority DESC LIMIT 1)
        UNION ALL
        SELECT (SELECT q.best_priority FROM host_queue q WHERE q.best_priority < lv.p
                ORDER BY q.best_priority DESC LIMIT 1) FROM lv WHERE lv.p IS NOT NULL
    )
    SELECT array_agg(lv.p ORDER BY lv.p DESC) INTO v_levels FROM lv WHERE lv.p IS NOT NULL;
    IF v_levels IS NULL THEN
        RETURN;
    END IF;

    <<ranges>>
    FOREACH v_late IN ARRAY ARRAY[true, false] LOOP
        v_low := CASE WHEN v_late THEN '-infinity'::double precision ELSE p_overdue END;
        FOREACH v_level IN ARRAY v_levels LOOP
            v_after_due := '-infinity';
            v_after_host := '';
            v_after_shard := -1;
            LOOP
                EXIT ranges WHEN cardinality(v_keys) >= p_limit;
                v_want := greatest(1, ceil((p_limit - cardinality(v_keys)) / v_rate))::integer;
                SELECT array_agg(r.shard), array_agg(r.host_key), array_agg(r.next_due_at)
                INTO v_hs, v_hh, v_hd
                FROM (SELECT q.shard, q.host_key, q.next_due_at FROM host_queue q
                      WHERE q.best_priority = v_level
                        AND q.next_due_at >= v_low AND q.next_due_at <= p_now
                        AND (NOT v_late OR q.next_due_at < p_overdue)
                        AND (q.next_due_at, q.host_key, q.shard)
                            > (v_after_due, v_after_host, v_after_shard)
                        AND q.shard = ANY(p_shards) AND q.host_key <> ALL(p_skip)
                      ORDER BY q.next_due_at, q.host_key, q.shard LIMIT v_want) AS r;
                EXIT WHEN v_hs IS NULL;

                WITH hosts AS (
                    SELECT t.s, t.h, t.rank
                    FROM unnest(v_hs, v_hh) WITH ORDINALITY AS t(s, h, rank)
                ), probed AS (
                    SELECT h.rank AS host_rank, h.s, h.h, p.url_key, p.priority,
                           row_number() OVER (
                               PARTITION BY h.rank
                               ORDER BY p.next_fetch_at < p_overdue DESC, p.priority DESC,
                                        p.next_fetch_at, p.depth, p.url_key) AS row_rank
                    FROM hosts h
                    CROSS JOIN LATERAL (
                        SELECT l.priority FROM host_levels l
                        WHERE l.shard = h.s AND l.host_key = h.h AND l.next_due_at <= p_now
                    ) AS lv
                    CROSS JOIN LATERAL (
                        SELECT u.url_key, u.priority, u.next_fetch_at, u.depth FROM urls u
                        WHERE u.shard = h.s AND u.host_key = h.h AND u.state = 0
                          AND u.priority = lv.priority AND u.next_fetch_at <= p_now
                        ORDER BY u.next_fetch_at, u.depth, u.url_key
                        LIMIT least(p_per_host, p_limit - cardinality(v_keys))
                    ) AS p
                ), capped AS (
                    SELECT * FROM probed WHERE row_rank <= p_per_host
                ), chosen AS (
                    -- a host's rows are consecutive in walk order: giving each its first
                    -- min(per_host, limit - taken) rows is taking the walk's first rows
                    SELECT * FROM capped ORDER BY host_rank, row_rank
                    LIMIT p_limit - cardinality(v_keys)
                )
                SELECT array_agg(c.s ORDER BY c.host_rank, c.row_rank),
                       array_agg(c.url_key ORDER BY c.host_rank, c.row_rank),
                       array_agg(c.h ORDER BY c.host_rank, c.row_rank),
                       array_agg(c.priority ORDER BY c.host_rank, c.row_rank),
                       (SELECT count(*) FROM capped)
                INTO v_bs, v_bk, v_bh, v_bp, v_seen
                FROM chosen c;
                IF v_bk IS NOT NULL THEN
                    v_shards := v_shards || v_bs;
                    v_keys := v_keys || v_bk;
                    v_hosts := v_hosts || v_bh;
                    v_prios := v_prios || v_bp;
                END IF;
                v_rate := greatest(1.0, v_seen::double precision / cardinality(v_hs));
                EXIT WHEN cardinality(v_hs) < v_want;
                v_after_due := v_hd[cardinality(v_hd)];
                v_after_host := v_hh[cardinality(v_hh)];
                v_after_shard := v_hs[cardinality(v_hs)];
            END LOOP;
        END LOOP;
    END LOOP;
    IF cardinality(v_keys) = 0 THEN
        RETURN;
    END IF;

    RETURN QUERY
    WITH chosen AS (
        SELECT t.s, t.k, t.walk FROM unnest(v_shards, v_keys) WITH ORDINALITY AS t(s, k, walk)
    ), found AS (
        -- each chosen key's row version by a primary-key probe (the fence keeps it one)
        SELECT c.walk, f.toid, f.tid FROM chosen c
        CROSS JOIN LATERAL (
            SELECT x.tableoid AS toid, x.ctid AS tid FROM urls x
            WHERE x.shard = c.s AND x.url_key = c.k OFFSET 0
        ) AS f
    ), marked AS (
        UPDATE urls u SET state = 1 FROM found c
        WHERE u.tableoid = c.toid AND u.ctid = c.tid AND u.state = 0
        RETURNING c.walk, u.shard, u.url_key, u.url, u.host_key, u.depth, u.priority,
                  u.version, u.next_fetch_at, u.redirect_hops, u.etag, u.last_modified,
                  u.failure_count, u.payload_digest, u.change_stats, u.last_fetch_at,
                  u.warc_file, u.simhash, u.sitemap_changefreq, u.sitemap_lastmod,
                  u.redirect_chain
    )
    SELECT * FROM marked m ORDER BY m.walk;

    PERFORM courtier_levels_refresh(v_shards, v_hosts, v_prios);
END;
$$;

ALTER FUNCTION courtier_load_due(integer[], double precision, double precision, integer,
                                 integer, text[])
    SET plan_cache_mode = force_custom_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off;


CREATE OR REPLACE FUNCTION courtier_acquire_shards(p_owner text, p_shards integer[],
                                                   p_lease double precision)
RETURNS TABLE (shard integer, epoch bigint)
LANGUAGE plpgsql AS $$
DECLARE
    t_now double precision := courtier_now();
    r record;
    t_epoch bigint;
    t_kind text;
BEGIN
    INSERT INTO shards AS s (shard) SELECT x FROM unnest(p_shards) AS x ORDER BY x
        ON CONFLICT DO NOTHING;
    PERFORM 1 FROM shards s WHERE s.shard = ANY(p_shards) ORDER BY s.shard FOR UPDATE;
    RETURN QUERY
    UPDATE shards s SET lease_expires_at = t_now + p_lease
    WHERE s.shard = ANY(p_shards) AND s.owner = p_owner
    RETURNING s.shard, s.epoch;
    FOR r IN SELECT s.shard, s.owner, s.epoch, s.lease_expires_at, s.last_owner
             FROM shards s WHERE s.shard = ANY(p_shards) AND s.owner IS DISTINCT FROM p_owner
             ORDER BY s.shard LOOP
        t_kind := NULL;
        IF r.owner IS NULL THEN
            t_epoch := greatest(r.epoch, 1);
            IF r.last_owner IS NOT NULL AND r.last_owner <> p_owner THEN
                t_kind := 'graceful';
            END IF;
        ELSIF r.lease_expires_at <= t_now THEN
            t_epoch := r.epoch + 1;
            t_kind := 'takeover';
        ELSE
            CONTINUE;
        END IF;
        UPDATE shards s SET owner = p_owner, epoch = t_epoch,
            lease_expires_at = t_now + p_lease, last_owner = p_owner, acquired_at = t_now
            WHERE s.shard = r.shard;
        IF t_kind IS NOT NULL THEN
            UPDATE cluster_counters c SET value = c.value + 1 WHERE c.name = t_kind;
        END IF;
        shard := r.shard; epoch := t_epoch; RETURN NEXT;
    END LOOP;
END $$;

ALTER FUNCTION courtier_commit(courtier_commit[], courtier_new_url[], courtier_host_delta[],
                               double precision)
    SET plan_cache_mode = force_generic_plan;
-- ... but not the functions it calls, which would inherit the setting: the intake's
-- anti-join and the host-queue upkeep are sized by their arrays (a generic plan of the
-- intake, made while the tables were small, took 257 ms a call in the bench).
ALTER FUNCTION courtier_insert_urls(courtier_new_url[]) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION courtier_queue_add(integer[], text[], double precision[], integer[])
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION courtier_queue_refresh(integer[], text[]) SET plan_cache_mode = force_custom_plan;

DO $$
BEGIN
    ALTER TABLE events ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    NULL;  -- a server built without lz4 keeps pglz
END $$;
