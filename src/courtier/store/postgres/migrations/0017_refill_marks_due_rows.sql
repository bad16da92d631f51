-- courtier PostgreSQL schema, migration 17: a refill marks only rows still due.
--
-- courtier_load_due chooses its rows by walking the host queue (statements of their
-- own, each with its own snapshot under READ COMMITTED), then marks the chosen keys
-- SCHEDULED in a last statement that took a new snapshot and checked only that the row
-- was still QUEUED (`state = 0`). A row committed in between (version + 1, its next
-- fetch tomorrow, QUEUED again) passed that check: the refill handed out the committed
-- version, not due, and the worker fetched it again at once with the validators of
-- its first fetch, a second final event (`not_modified`) after the first. A commit can
-- meet a QUEUED row only after a reset while the row's fetch was in flight (a worker's
-- recovery from a refill with an unknown outcome, a takeover): seen in the store-loss
-- cluster test about one run in four. The marking now checks what the walk checked
-- (`next_fetch_at <= p_now` besides `state = 0`), on the row version it updates, which
-- PostgreSQL re-reads and rechecks when a concurrent commit changed it. A row dropped
-- that way is simply not returned; its host's levels are refreshed as before.
-- Otherwise migration 16's function.

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
          AND u.next_fetch_at <= p_now  -- still due: not committed since the walk
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
