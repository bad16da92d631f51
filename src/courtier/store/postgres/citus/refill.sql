-- courtier on Citus: the refill (courtier_load_due) and the host-queue upkeep it shares
-- with the commit, replacing migrations 10-17's versions on a Citus coordinator only
-- (store/postgres/_citus.py applies this file after distributing the tables, at every
-- open; plain PostgreSQL never runs it). Same contract (store/base.py, load_due): the
-- contract suite runs it on the local cluster.
--
-- What Citus refuses in the plain forms, and what replaces it:
-- * the skip scan over host_queue's priorities (a recursive CTE, "recursive CTEs are only
--   supported when they contain a filter on the distribution column") -> the distinct
--   priorities of the listed shards' host_queue rows, one multi-shard query pushed down
--   to the nodes (it reads those shards' host_queue rows, not one seek per level);
-- * the per-host LATERAL probes correlated on a batch of hosts held in arrays -> one
--   query over urls filtered by `shard = ANY(shards of the batch) AND host_key = ANY(hosts
--   of the batch)` (exact: a host key names its shard), ranked by a window partitioned by
--   (shard, host_key), which includes the distribution column, so Citus pushes it down;
--   it reads every due QUEUED row of the batch's hosts, not `per_host` rows a level;
-- * the marking by row address (tableoid, ctid) -> an UPDATE joined on the primary key
--   (shard, url_key) to the chosen keys;
-- * `SELECT … FOR UPDATE` of host_queue rows joined to an array (multi-shard row locks)
--   and the skip scan that rediscovers a host's levels -> courtier_queue_lock's upsert
--   (which locks the rows it touches) and one grouped query per batch of hosts;
-- * SQL-language functions called with parameters ("could not create distributed plan")
--   -> PL/pgSQL.
-- The per-shard advisory locks stay: they are taken on the coordinator, through which
-- every statement of every worker passes, so they serialise refills of one shard as
-- before.

-- (a router VALUES list, not INSERT … SELECT of unnest: Citus runs that through the
-- coordinator by COPY, which always asks for two-phase commit; citus/commit.sql). The
-- update's `WHERE false` keeps the lock and writes no row version: PostgreSQL locks a
-- conflicting row before it tests that WHERE (plain form: migration 37).
CREATE OR REPLACE FUNCTION courtier_queue_lock(p_shards integer[], p_hosts text[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_rows text;
BEGIN
    SELECT string_agg(format('(%L, %L, ''infinity''::double precision, 0)', t.s, t.h), ', '
                      ORDER BY t.s, t.h)
    INTO v_rows FROM (SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts) AS t(s, h)) AS t;
    IF v_rows IS NULL THEN
        RETURN;
    END IF;
    EXECUTE 'INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority) VALUES '
        || v_rows || ' ON CONFLICT (shard, host_key) DO UPDATE SET best_priority = q.best_priority'
        || ' WHERE false';  -- locked, not rewritten (migration 37)
END;
$$;

-- every level of these hosts recomputed from urls, then their host_queue rows from the
-- levels (rows of hosts left without a level deleted)
CREATE OR REPLACE FUNCTION courtier_queue_refresh(p_shards integer[], p_hosts text[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET jit = off AS $$
DECLARE
    v_s integer[];
    v_h text[];
    v_p integer[];
    v_d double precision[];
BEGIN
    IF cardinality(p_hosts) = 0 THEN
        RETURN;
    END IF;
    PERFORM courtier_queue_lock(p_shards, p_hosts);
    SELECT array_agg(f.shard), array_agg(f.host_key), array_agg(f.priority), array_agg(f.due)
    INTO v_s, v_h, v_p, v_d
    FROM (SELECT u.shard, u.host_key, u.priority, min(u.next_fetch_at) AS due FROM urls u
          WHERE u.shard = ANY(p_shards) AND u.host_key = ANY(p_hosts) AND u.state = 0
            AND u.next_fetch_at IS NOT NULL
          GROUP BY u.shard, u.host_key, u.priority) AS f;
    DELETE FROM host_levels l
    WHERE l.shard = ANY(p_shards) AND l.host_key = ANY(p_hosts)
      AND NOT (l.host_key || '#' || l.priority::text) = ANY(
          SELECT h || '#' || p::text FROM unnest(COALESCE(v_h, '{}'), COALESCE(v_p, '{}'))
          AS t(h, p));
    IF v_s IS NOT NULL THEN
        INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
        SELECT s, h, p, d FROM unnest(v_s, v_h, v_p, v_d) AS t(s, h, p, d) ORDER BY s, h, p
        ON CONFLICT (shard, host_key, priority) DO UPDATE SET next_due_at = EXCLUDED.next_due_at
            WHERE l.next_due_at <> EXCLUDED.next_due_at;
    END IF;
    PERFORM courtier_queue_from_levels(p_shards, p_hosts);
END;
$$;

-- migration 24's function (each host's row from its levels, level arrays included; rows
-- of hosts left without a level deleted) as two statements Citus pushes down: each joins
-- host_queue with host_levels on (shard, host_key), co-located by shard
CREATE OR REPLACE FUNCTION courtier_queue_from_levels(p_shards integer[], p_hosts text[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
BEGIN
    DELETE FROM host_queue q
    WHERE q.shard = ANY(p_shards) AND q.host_key = ANY(p_hosts)
      AND NOT EXISTS (SELECT 1 FROM host_levels l
                      WHERE l.shard = q.shard AND l.host_key = q.host_key);
    UPDATE host_queue q SET next_due_at = a.due, best_priority = a.best,
                            level_priorities = a.ps, level_due_ats = a.ds
    FROM (SELECT l.shard, l.host_key, max(l.priority) AS best, min(l.next_due_at) AS due,
                 array_agg(l.priority ORDER BY l.priority DESC) AS ps,
                 array_agg(l.next_due_at ORDER BY l.priority DESC) AS ds
          FROM host_levels l WHERE l.shard = ANY(p_shards) AND l.host_key = ANY(p_hosts)
          GROUP BY l.shard, l.host_key) AS a
    WHERE q.shard = a.shard AND q.host_key = a.host_key
      AND q.shard = ANY(p_shards)  -- Citus prunes by it: only the nodes of these shards
      AND (q.next_due_at <> a.due OR q.best_priority <> a.best
           OR q.level_priorities <> a.ps OR q.level_due_ats <> a.ds);
END;
$$;

-- the refill's levels: every level of the hosts it took rows from is recomputed (a
-- superset of the plain form's touched levels; exact either way)
CREATE OR REPLACE FUNCTION courtier_levels_refresh(p_shards integer[], p_hosts text[],
                                                   p_priority integer[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM courtier_queue_refresh(p_shards, p_hosts);
END;
$$;

-- The refill that writes nothing (Store.read_due, migration 24's courtier_read_due): the
-- walk below, then the chosen rows read by their primary key, in walk order. No lock, no
-- write. Unlike the plain form (STABLE, one snapshot) its statements each read their own
-- snapshot, and Citus's nodes each their own: the final read keeps only rows still QUEUED
-- and due. Since migration 35 the rows carry the stored value (DueUrl.value).
CREATE OR REPLACE FUNCTION courtier_read_due(p_shards integer[], p_now double precision,
                                             p_overdue double precision, p_limit integer,
                                             p_per_host integer, p_skip text[])
RETURNS TABLE (walk bigint, shard integer, url_key bytea, url text, host_key text,
               depth integer, priority integer, version integer,
               next_fetch_at double precision, redirect_hops integer, etag text,
               last_modified text, failure_count integer, payload_digest text,
               change_stats text, last_fetch_at double precision, warc_file text,
               simhash bigint, sitemap_changefreq text, sitemap_lastmod double precision,
               redirect_chain text, value double precision)
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET jit = off AS $$
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
    SELECT array_agg(d.p ORDER BY d.p DESC) INTO v_levels
    FROM (SELECT DISTINCT q.best_priority AS p FROM host_queue q
          WHERE q.shard = ANY(p_shards) AND q.next_due_at <= p_now) AS d;
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
                    SELECT t.s, t.h, t.rank FROM unnest(v_hs, v_hh) WITH ORDINALITY AS t(s, h, rank)
                ), probed AS (
                    SELECT u.shard, u.host_key, u.url_key, u.priority,
                           row_number() OVER (
                               PARTITION BY u.shard, u.host_key
                               ORDER BY u.next_fetch_at < p_overdue DESC, u.priority DESC,
                                        u.next_fetch_at, u.depth, u.url_key) AS row_rank
                    FROM urls u
                    WHERE u.shard = ANY(v_hs) AND u.host_key = ANY(v_hh) AND u.state = 0
                      AND u.next_fetch_at <= p_now
                ), capped AS (
                    SELECT h.rank AS host_rank, h.s, h.h, p.url_key, p.priority, p.row_rank
                    FROM probed p JOIN hosts h ON h.s = p.shard AND h.h = p.host_key
                    WHERE p.row_rank <= p_per_host
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
    )
    SELECT c.walk, u.shard, u.url_key, u.url, u.host_key, u.depth, u.priority, u.version,
           u.next_fetch_at, u.redirect_hops, u.etag, u.last_modified, u.failure_count,
           u.payload_digest, u.change_stats, u.last_fetch_at, u.warc_file, u.simhash,
           u.sitemap_changefreq, u.sitemap_lastmod, u.redirect_chain, u.value
    FROM chosen c JOIN urls u ON u.shard = c.s AND u.url_key = c.k
    WHERE u.state = 0 AND u.next_fetch_at <= p_now
    ORDER BY c.walk;
END;
$$;

-- The marking refill (Store.load_due): the per-shard advisory locks, the read above, the
-- marking joined on the primary key (rows still QUEUED and due) and the levels of the
-- hosts it took rows from, as migration 24 builds it from its read.
CREATE OR REPLACE FUNCTION courtier_load_due(p_shards integer[], p_now double precision,
                                             p_overdue double precision, p_limit integer,
                                             p_per_host integer, p_skip text[])
RETURNS TABLE (walk bigint, shard integer, url_key bytea, url text, host_key text,
               depth integer, priority integer, version integer,
               next_fetch_at double precision, redirect_hops integer, etag text,
               last_modified text, failure_count integer, payload_digest text,
               change_stats text, last_fetch_at double precision, warc_file text,
               simhash bigint, sitemap_changefreq text, sitemap_lastmod double precision,
               redirect_chain text, value double precision)
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_shards integer[];
    v_keys bytea[];
    v_hosts text[];
    v_prios integer[];
BEGIN
    IF p_limit <= 0 OR p_per_host <= 0 OR cardinality(p_shards) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(1129270869, l.s)
    FROM (SELECT DISTINCT s FROM unnest(p_shards) AS s ORDER BY s) AS l;

    SELECT array_agg(r.shard ORDER BY r.walk), array_agg(r.url_key ORDER BY r.walk),
           array_agg(r.host_key ORDER BY r.walk), array_agg(r.priority ORDER BY r.walk)
    INTO v_shards, v_keys, v_hosts, v_prios
    FROM courtier_read_due(p_shards, p_now, p_overdue, p_limit, p_per_host, p_skip) AS r;
    IF v_keys IS NULL THEN
        RETURN;
    END IF;

    RETURN QUERY
    WITH chosen AS (
        SELECT t.s, t.k, t.walk FROM unnest(v_shards, v_keys) WITH ORDINALITY AS t(s, k, walk)
    ), marked AS (
        UPDATE urls u SET state = 1 FROM chosen c
        WHERE u.shard = c.s AND u.url_key = c.k AND u.state = 0
          AND u.shard = ANY(v_shards)  -- Citus prunes by it: the chosen rows' nodes only
          AND u.next_fetch_at <= p_now  -- still due: not committed since the walk
        RETURNING c.walk, u.shard, u.url_key, u.url, u.host_key, u.depth, u.priority,
                  u.version, u.next_fetch_at, u.redirect_hops, u.etag, u.last_modified,
                  u.failure_count, u.payload_digest, u.change_stats, u.last_fetch_at,
                  u.warc_file, u.simhash, u.sitemap_changefreq, u.sitemap_lastmod,
                  u.redirect_chain, u.value
    )
    SELECT * FROM marked m ORDER BY m.walk;

    PERFORM courtier_levels_refresh(v_shards, v_hosts, v_prios);
END;
$$;
