-- courtier PostgreSQL schema, migration 10: a refill whose cost follows the rows it returns.
--
-- host_levels holds, per (shard, host, priority) with QUEUED rows, the earliest
-- next_fetch_at of those rows; host_queue (migration 1) is its per-host summary
-- (best level, earliest due time). Both are kept exact by the three maintenance
-- functions below, which every write path already calls.
--
-- The refill walks host_queue as a concatenation of index ranges, one per (overdue?,
-- priority level), in contract order (inside one level, hosts sorted by next_due_at
-- are in contract order, the overdue ones a prefix), taking hosts in batches sized
-- by the rows still wanted; for each host it probes only the levels host_levels says
-- are due, one urls_queued_rank range of at most per_host rows each. Cost: levels +
-- hosts taken + due levels probed + rows returned, whatever the backlog.
CREATE TABLE host_levels (
    shard       integer          NOT NULL,
    host_key    text             NOT NULL,
    priority    integer          NOT NULL,
    next_due_at double precision NOT NULL,
    PRIMARY KEY (shard, host_key, priority)
);
INSERT INTO host_levels (shard, host_key, priority, next_due_at)
    SELECT shard, host_key, priority, min(next_fetch_at) FROM urls
    WHERE state = 0 AND next_fetch_at IS NOT NULL GROUP BY shard, host_key, priority;

-- One range of ready hosts per level, keyset-paginated on (next_due_at, host_key, shard).
DROP INDEX host_queue_best;
CREATE INDEX host_queue_level ON host_queue (best_priority, next_due_at, host_key, shard);

-- Rows entered QUEUED: lower the due time of their level and host, raise the host's
-- best priority. host_queue first, in key order (the lock order of every function).
CREATE OR REPLACE FUNCTION courtier_queue_add(p_shards integer[], p_hosts text[],
                                              p_due double precision[], p_priority integer[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority)
    SELECT s, h, min(d), max(p) FROM unnest(p_shards, p_hosts, p_due, p_priority) AS t(s, h, d, p)
    WHERE d IS NOT NULL GROUP BY s, h ORDER BY s, h
    ON CONFLICT (shard, host_key) DO UPDATE
        SET next_due_at = LEAST(q.next_due_at, EXCLUDED.next_due_at),
            best_priority = GREATEST(q.best_priority, EXCLUDED.best_priority)
        WHERE EXCLUDED.next_due_at < q.next_due_at OR EXCLUDED.best_priority > q.best_priority;
    INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
    SELECT s, h, p, min(d) FROM unnest(p_shards, p_hosts, p_due, p_priority) AS t(s, h, d, p)
    WHERE d IS NOT NULL GROUP BY s, h, p ORDER BY s, h, p
    ON CONFLICT (shard, host_key, priority) DO UPDATE
        SET next_due_at = EXCLUDED.next_due_at WHERE EXCLUDED.next_due_at < l.next_due_at;
END;
$$;

-- Lock (or create) the host_queue rows of these hosts in key order. A later statement
-- (fresh snapshot) sees every transaction that touched them before us; any later one
-- waits for our lock.
CREATE FUNCTION courtier_queue_lock(p_shards integer[], p_hosts text[])
RETURNS void LANGUAGE sql AS $$
    INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority)
    SELECT DISTINCT s, h, 'infinity'::double precision, 0
    FROM unnest(p_shards, p_hosts) AS t(s, h) ORDER BY s, h
    ON CONFLICT (shard, host_key) DO UPDATE SET best_priority = q.best_priority;
$$;

-- host_queue rows of these hosts from their host_levels (deleted when none is left).
CREATE FUNCTION courtier_queue_from_levels(p_shards integer[], p_hosts text[])
RETURNS void LANGUAGE sql AS $$
    WITH t AS (
        SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts) AS t(s, h)
    ), agg AS (
        SELECT t.s, t.h, max(l.priority) AS best, min(l.next_due_at) AS due
        FROM t LEFT JOIN host_levels l ON l.shard = t.s AND l.host_key = t.h
        GROUP BY t.s, t.h
    ), emptied AS (
        DELETE FROM host_queue q USING agg a
        WHERE q.shard = a.s AND q.host_key = a.h AND a.best IS NULL
    )
    INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority)
    SELECT a.s, a.h, a.due, a.best FROM agg a WHERE a.best IS NOT NULL ORDER BY a.s, a.h
    ON CONFLICT (shard, host_key) DO UPDATE
        SET next_due_at = EXCLUDED.next_due_at, best_priority = EXCLUDED.best_priority
        WHERE q.next_due_at <> EXCLUDED.next_due_at OR q.best_priority <> EXCLUDED.best_priority;
$$;

-- Rows left or changed in these (host, level)s (a refill): recompute those levels,
-- one index seek each, then their hosts. The hosts' queue rows exist (the refill
-- read them), so a row lock in key order suffices (no new row versions).
CREATE FUNCTION courtier_levels_refresh(p_shards integer[], p_hosts text[],
                                        p_priority integer[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM host_queue q
    JOIN (SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts) AS t(s, h)) AS t
      ON q.shard = t.s AND q.host_key = t.h
    ORDER BY q.shard, q.host_key FOR UPDATE OF q;
    WITH t AS (
        SELECT DISTINCT s, h, p FROM unnest(p_shards, p_hosts, p_priority) AS t(s, h, p)
    ), fresh AS (
        SELECT t.s, t.h, t.p,
               (SELECT u.next_fetch_at FROM urls u
                 WHERE u.shard = t.s AND u.host_key = t.h AND u.state = 0 AND u.priority = t.p
                   AND u.next_fetch_at IS NOT NULL
                 ORDER BY u.next_fetch_at LIMIT 1) AS due
        FROM t
    ), emptied AS (
        DELETE FROM host_levels l USING fresh f
        WHERE l.shard = f.s AND l.host_key = f.h AND l.priority = f.p AND f.due IS NULL
    )
    INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
    SELECT s, h, p, due FROM fresh WHERE due IS NOT NULL ORDER BY s, h, p
    ON CONFLICT (shard, host_key, priority) DO UPDATE SET next_due_at = EXCLUDED.next_due_at
        WHERE l.next_due_at <> EXCLUDED.next_due_at;
    PERFORM courtier_queue_from_levels(p_shards, p_hosts);
END;
$$;

-- Hosts whose rows changed in any way (commit, archive requeue): rediscover their
-- levels by a skip scan of urls_queued_rank (one seek per level), then the hosts.
CREATE OR REPLACE FUNCTION courtier_queue_refresh(p_shards integer[], p_hosts text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM courtier_queue_lock(p_shards, p_hosts);
    DELETE FROM host_levels l USING (SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts)
                                     AS t(s, h)) AS t
    WHERE l.shard = t.s AND l.host_key = t.h;
    WITH RECURSIVE t AS (
        SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts) AS t(s, h)
    ), lv(s, h, p) AS (
        SELECT t.s, t.h, (SELECT u.priority FROM urls u
                          WHERE u.shard = t.s AND u.host_key = t.h AND u.state = 0
                          ORDER BY u.priority DESC LIMIT 1) FROM t
        UNION ALL
        SELECT lv.s, lv.h, (SELECT u.priority FROM urls u
                            WHERE u.shard = lv.s AND u.host_key = lv.h AND u.state = 0
                              AND u.priority < lv.p ORDER BY u.priority DESC LIMIT 1)
        FROM lv WHERE lv.p IS NOT NULL
    ), fresh AS (
        SELECT lv.s, lv.h, lv.p,
               (SELECT u.next_fetch_at FROM urls u
                 WHERE u.shard = lv.s AND u.host_key = lv.h AND u.state = 0 AND u.priority = lv.p
                   AND u.next_fetch_at IS NOT NULL
                 ORDER BY u.next_fetch_at LIMIT 1) AS due
        FROM lv WHERE lv.p IS NOT NULL
    )
    INSERT INTO host_levels (shard, host_key, priority, next_due_at)
    SELECT s, h, p, due FROM fresh WHERE due IS NOT NULL ORDER BY s, h, p;
    PERFORM courtier_queue_from_levels(p_shards, p_hosts);
END;
$$;

-- The refill (the Store.load_due contract in store/base.py); same signature as in
-- migration 8 (which added redirect_chain to the result). Per-shard advisory locks
-- serialise refills of one shard (a shard has one owner, so they are uncontended in
-- production; they keep concurrent refills exact).
DROP FUNCTION courtier_load_due(integer[], double precision, double precision, integer,
                                integer, text[]);
CREATE FUNCTION courtier_load_due(p_shards integer[], p_now double precision,
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
    ), marked AS (
        UPDATE urls u SET state = 1 FROM chosen c
        WHERE u.shard = c.s AND u.url_key = c.k AND u.state = 0
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

-- Intake as in migration 8 (with the redirect chain), but a key given twice in one batch keeps its first
-- occurrence (as SQLite and the memory store do): the sort that orders key locks
-- breaks ties by position in the batch.
CREATE OR REPLACE FUNCTION courtier_add_urls(p_urls courtier_new_url[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_shards integer[];
    v_hosts text[];
    v_due double precision[];
    v_priority integer[];
BEGIN
    WITH added AS (
        INSERT INTO urls (shard, url_key, url, host_key, depth, priority, state, version,
                          discovered_at, next_fetch_at, redirect_hops, sitemap_changefreq,
                          sitemap_lastmod, redirect_chain)
        SELECT n.shard, n.url_key, n.url, n.host_key, n.depth, n.priority, 0, 0,
               n.discovered_at, n.next_fetch_at, n.redirect_hops, n.sitemap_changefreq,
               n.sitemap_lastmod, n.redirect_chain
        FROM unnest(p_urls) WITH ORDINALITY AS n ORDER BY n.shard, n.url_key, n.ordinality
        ON CONFLICT DO NOTHING
        RETURNING shard, host_key, next_fetch_at, priority
    )
    SELECT array_agg(shard), array_agg(host_key), array_agg(next_fetch_at), array_agg(priority)
    INTO v_shards, v_hosts, v_due, v_priority FROM added;
    IF v_shards IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM courtier_queue_add(v_shards, v_hosts, v_due, v_priority);
    RETURN cardinality(v_shards);
END;
$$;

-- Every statement of the refill is a handful of index seeks per host; a generic plan,
-- JIT, or a hash join against a whole urls partition is never the better plan here.
ALTER FUNCTION courtier_load_due(integer[], double precision, double precision, integer,
                                 integer, text[])
    SET plan_cache_mode = force_custom_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off;
ALTER FUNCTION courtier_commit(courtier_commit[], courtier_new_url[], courtier_host_delta[],
                               double precision)
    SET plan_cache_mode = force_custom_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off;
ALTER FUNCTION courtier_add_urls(courtier_new_url[]) SET jit = off;

-- Every refill and commit rewrites rows of these two small, hot tables; until vacuum
-- their indexes carry the dead versions, which a refill's range scans step over.
-- Vacuum them after a few percent of churn instead of the default fifth.
ALTER TABLE host_queue SET (autovacuum_vacuum_scale_factor = 0.02,
                            autovacuum_vacuum_threshold = 1000);
ALTER TABLE host_levels SET (autovacuum_vacuum_scale_factor = 0.02,
                             autovacuum_vacuum_threshold = 1000);
