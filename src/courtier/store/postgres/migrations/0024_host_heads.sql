-- courtier PostgreSQL schema: each host's levels in its host-queue row, and a refill
-- that writes nothing (courtier_read_due).
--
-- host_queue gains the host's host_levels rows as two arrays, best level first, kept
-- exact wherever best_priority and next_due_at are:
--   level_priorities  the priorities of the host's levels (its QUEUED rows'), descending;
--   level_due_ats     the earliest next_fetch_at of each of those levels.
-- A refill reads them with the host range it walks (the host-queue row it fetches
-- anyway), so it knows a ready host's due levels without probing host_levels: a host
-- costs one urls_queued_rank range per due level (priority = level AND next_fetch_at
-- <= now, ordered by next_fetch_at, depth, url_key: the contract's row order inside a
-- level, overdue rows first), reading the rows it returns. With ~1 due row a host that
-- is one keyed read of a row per row returned.
--
-- Upkeep: rows entering QUEUED merge their levels into the arrays (courtier_queue_enter,
-- the row written only when a level is new or earlier); rows leaving or changing
-- recompute the row from host_levels (courtier_queue_from_levels), which every such
-- path already called. host_levels stays the per-level truth those recomputations use.
ALTER TABLE host_queue
    ADD COLUMN level_priorities integer[] NOT NULL DEFAULT '{}',
    ADD COLUMN level_due_ats double precision[] NOT NULL DEFAULT '{}';

UPDATE host_queue q
SET level_priorities = a.ps, level_due_ats = a.ds
FROM (SELECT shard, host_key, array_agg(priority ORDER BY priority DESC) AS ps,
             array_agg(next_due_at ORDER BY priority DESC) AS ds
      FROM host_levels GROUP BY shard, host_key) AS a
WHERE q.shard = a.shard AND q.host_key = a.host_key;

-- Rows entered QUEUED, as (shard, host, priority, due): host_queue first, then
-- host_levels, both in key order (the lock order of every function). A host's row
-- changes only when a level is new or due earlier.
CREATE FUNCTION courtier_queue_enter(p_shards integer[], p_hosts text[],
                                     p_priority integer[], p_due double precision[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH lv AS (
        SELECT s, h, p, min(d) AS d
        FROM unnest(p_shards, p_hosts, p_priority, p_due) AS t(s, h, p, d)
        WHERE d IS NOT NULL GROUP BY s, h, p
    )
    INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority,
                                 level_priorities, level_due_ats)
    SELECT s, h, min(d), max(p), array_agg(p ORDER BY p DESC), array_agg(d ORDER BY p DESC)
    FROM lv GROUP BY s, h ORDER BY s, h
    ON CONFLICT (shard, host_key) DO UPDATE
        SET next_due_at = LEAST(q.next_due_at, EXCLUDED.next_due_at),
            best_priority = GREATEST(q.best_priority, EXCLUDED.best_priority),
            (level_priorities, level_due_ats) = (
                SELECT array_agg(m.p ORDER BY m.p DESC), array_agg(m.d ORDER BY m.p DESC)
                FROM (SELECT t.p, min(t.d) AS d
                      FROM unnest(q.level_priorities || EXCLUDED.level_priorities,
                                  q.level_due_ats || EXCLUDED.level_due_ats) AS t(p, d)
                      GROUP BY t.p) AS m)
        -- only when a level is new, or due earlier than the stored one
        WHERE EXISTS (SELECT 1 FROM unnest(EXCLUDED.level_priorities,
                                           EXCLUDED.level_due_ats) AS n(p, d)
                      WHERE NOT EXISTS (
                          SELECT 1 FROM unnest(q.level_priorities, q.level_due_ats) AS o(p, d)
                          WHERE o.p = n.p AND o.d <= n.d));
    INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
    SELECT s, h, p, min(d) FROM unnest(p_shards, p_hosts, p_priority, p_due) AS t(s, h, p, d)
    WHERE d IS NOT NULL GROUP BY s, h, p ORDER BY s, h, p
    ON CONFLICT (shard, host_key, priority) DO UPDATE
        SET next_due_at = EXCLUDED.next_due_at WHERE EXCLUDED.next_due_at < l.next_due_at;
END;
$$;

-- Generic plans, kept for the session, as migration 18 gave the intake: both statements
-- read only their arrays and the conflict's primary key, so no plan can do otherwise, and
-- planning them at every call was most of their cost.
ALTER FUNCTION courtier_queue_enter(integer[], text[], integer[], double precision[])
    SET jit = off SET plan_cache_mode = force_generic_plan;

CREATE OR REPLACE FUNCTION courtier_queue_add(p_shards integer[], p_hosts text[],
                                              p_due double precision[], p_priority integer[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM courtier_queue_enter(p_shards, p_hosts, p_priority, p_due);
END;
$$;

-- host_queue rows of these hosts from their host_levels (deleted when none is left);
-- migration 13's function with the level arrays. Callers locked the rows first.
CREATE OR REPLACE FUNCTION courtier_queue_from_levels(p_shards integer[], p_hosts text[])
RETURNS void LANGUAGE sql AS $$
    WITH t AS (
        SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts) AS t(s, h)
    ), agg AS (
        SELECT t.s, t.h, max(l.priority) AS best, min(l.next_due_at) AS due,
               array_agg(l.priority ORDER BY l.priority DESC) AS ps,
               array_agg(l.next_due_at ORDER BY l.priority DESC) AS ds
        FROM t LEFT JOIN host_levels l ON l.shard = t.s AND l.host_key = t.h
        GROUP BY t.s, t.h
    ), emptied AS (
        DELETE FROM host_queue q USING agg a
        WHERE q.shard = a.s AND q.host_key = a.h AND a.best IS NULL
    )
    UPDATE host_queue q SET next_due_at = a.due, best_priority = a.best,
                            level_priorities = a.ps, level_due_ats = a.ds
    FROM agg a
    WHERE q.shard = a.s AND q.host_key = a.h AND a.best IS NOT NULL
      AND (q.next_due_at <> a.due OR q.best_priority <> a.best
           OR q.level_priorities <> a.ps OR q.level_due_ats <> a.ds);
$$;

-- Migration 18's intake with its host-queue upkeep in courtier_queue_enter (the same two
-- upserts, from the same per-level aggregates, plus the level arrays).
CREATE OR REPLACE FUNCTION courtier_add_urls(p_urls courtier_new_url[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_added bigint;
    v_shards integer[];
    v_hosts text[];
    v_priority integer[];
    v_due double precision[];
BEGIN
    BEGIN
        WITH added AS (
            INSERT INTO urls (shard, url_key, url, host_key, depth, priority, state, version,
                              discovered_at, next_fetch_at, redirect_hops, sitemap_changefreq,
                              sitemap_lastmod, redirect_chain)
            SELECT DISTINCT ON (n.shard, n.url_key)
                   n.shard, n.url_key, n.url, n.host_key, n.depth, n.priority, 0, 0,
                   n.discovered_at, n.next_fetch_at, n.redirect_hops, n.sitemap_changefreq,
                   n.sitemap_lastmod, n.redirect_chain
            FROM unnest(p_urls) WITH ORDINALITY AS n
            WHERE NOT EXISTS (SELECT 1 FROM urls u
                              WHERE u.shard = n.shard AND u.url_key = n.url_key)
            ORDER BY n.shard, n.url_key, n.ordinality
            RETURNING shard, host_key, priority, next_fetch_at
        ), levels AS (
            SELECT shard, host_key, priority, min(next_fetch_at) AS due, count(*) AS rows
            FROM added GROUP BY shard, host_key, priority
        )
        SELECT sum(rows), array_agg(shard), array_agg(host_key), array_agg(priority),
               array_agg(due)
        INTO v_added, v_shards, v_hosts, v_priority, v_due FROM levels;
    EXCEPTION WHEN unique_violation THEN
        -- another transaction committed one of these keys while we waited for it
        WITH added AS (
            INSERT INTO urls (shard, url_key, url, host_key, depth, priority, state, version,
                              discovered_at, next_fetch_at, redirect_hops, sitemap_changefreq,
                              sitemap_lastmod, redirect_chain)
            SELECT n.shard, n.url_key, n.url, n.host_key, n.depth, n.priority, 0, 0,
                   n.discovered_at, n.next_fetch_at, n.redirect_hops, n.sitemap_changefreq,
                   n.sitemap_lastmod, n.redirect_chain
            FROM unnest(p_urls) WITH ORDINALITY AS n
            WHERE NOT EXISTS (SELECT 1 FROM urls u
                              WHERE u.shard = n.shard AND u.url_key = n.url_key)
            ORDER BY n.shard, n.url_key, n.ordinality
            ON CONFLICT DO NOTHING
            RETURNING shard, host_key, priority, next_fetch_at
        ), levels AS (
            SELECT shard, host_key, priority, min(next_fetch_at) AS due, count(*) AS rows
            FROM added GROUP BY shard, host_key, priority
        )
        SELECT sum(rows), array_agg(shard), array_agg(host_key), array_agg(priority),
               array_agg(due)
        INTO v_added, v_shards, v_hosts, v_priority, v_due FROM levels;
    END;
    IF v_added IS NULL THEN
        RETURN 0;
    END IF;
    -- levels whose rows all have no due time (next_fetch_at NULL) enter no queue
    PERFORM courtier_queue_enter(v_shards, v_hosts, v_priority, v_due);
    RETURN v_added;
END;
$$;

ALTER FUNCTION courtier_add_urls(courtier_new_url[])
    SET jit = off SET plan_cache_mode = force_generic_plan
    SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off;

-- The refill without marking (Store.read_due): courtier_load_due's walk (migration 17)
-- over the host queue's level ranges, keyset-paginated in batches sized by the rows
-- still wanted, each batch one statement that returns its rows; no advisory lock, no
-- UPDATE, no host-queue upkeep. STABLE: every statement reads the caller's snapshot, so
-- the walk sees one state of the store. The host range also gives each host's due
-- levels (from its level arrays), so a batch reads one urls_queued_rank range per due
-- level and nothing else.
CREATE FUNCTION courtier_read_due(p_shards integer[], p_now double precision,
                                  p_overdue double precision, p_limit integer,
                                  p_per_host integer, p_skip text[])
RETURNS TABLE (walk bigint, shard integer, url_key bytea, url text, host_key text,
               depth integer, priority integer, version integer,
               next_fetch_at double precision, redirect_hops integer, etag text,
               last_modified text, failure_count integer, payload_digest text,
               change_stats text, last_fetch_at double precision, warc_file text,
               simhash bigint, sitemap_changefreq text, sitemap_lastmod double precision,
               redirect_chain text)
LANGUAGE plpgsql STABLE AS $$
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
    v_hosts integer;
    v_ls integer[];
    v_lh text[];
    v_lr bigint[];
    v_lp integer[];
    v_taken bigint := 0;
    v_got bigint;
BEGIN
    IF p_limit <= 0 OR p_per_host <= 0 OR cardinality(p_shards) = 0 THEN
        RETURN;
    END IF;
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
                EXIT ranges WHEN v_taken >= p_limit;
                v_want := greatest(1, ceil((p_limit - v_taken) / v_rate))::integer;
                -- the next hosts of this range, and the due levels of each (host rank)
                WITH r AS MATERIALIZED (
                    SELECT k.*, row_number() OVER () AS rank
                    FROM (SELECT q.shard, q.host_key, q.next_due_at, q.level_priorities,
                                 q.level_due_ats
                          FROM host_queue q
                          WHERE q.best_priority = v_level
                            AND q.next_due_at >= v_low AND q.next_due_at <= p_now
                            AND (NOT v_late OR q.next_due_at < p_overdue)
                            AND (q.next_due_at, q.host_key, q.shard)
                                > (v_after_due, v_after_host, v_after_shard)
                            AND q.shard = ANY(p_shards) AND q.host_key <> ALL(p_skip)
                          ORDER BY q.next_due_at, q.host_key, q.shard LIMIT v_want) AS k
                ), last AS (
                    SELECT r.shard, r.host_key, r.next_due_at, r.rank FROM r
                    ORDER BY r.rank DESC LIMIT 1
                ), due AS (
                    SELECT r.shard, r.host_key, r.rank, x.p FROM r
                    CROSS JOIN LATERAL unnest(r.level_priorities, r.level_due_ats) AS x(p, d)
                    WHERE x.d <= p_now
                )
                SELECT l.rank, l.next_due_at, l.host_key, l.shard,
                       (SELECT array_agg(d.shard) FROM due d),
                       (SELECT array_agg(d.host_key) FROM due d),
                       (SELECT array_agg(d.rank) FROM due d),
                       (SELECT array_agg(d.p) FROM due d)
                INTO v_hosts, v_after_due, v_after_host, v_after_shard, v_ls, v_lh, v_lr, v_lp
                FROM last l;
                EXIT WHEN v_hosts IS NULL;

                RETURN QUERY
                WITH probed AS (
                    SELECT lv.rank AS host_rank, p.*,
                           row_number() OVER (
                               PARTITION BY lv.rank
                               ORDER BY p.next_fetch_at < p_overdue DESC, p.priority DESC,
                                        p.next_fetch_at, p.depth, p.url_key) AS row_rank
                    FROM unnest(v_ls, v_lh, v_lr, v_lp) AS lv(s, h, rank, lp)
                    CROSS JOIN LATERAL (
                        SELECT u.shard, u.url_key, u.url, u.host_key, u.depth, u.priority,
                               u.version, u.next_fetch_at, u.redirect_hops, u.etag,
                               u.last_modified, u.failure_count, u.payload_digest,
                               u.change_stats, u.last_fetch_at, u.warc_file, u.simhash,
                               u.sitemap_changefreq, u.sitemap_lastmod, u.redirect_chain
                        FROM urls u
                        WHERE u.shard = lv.s AND u.host_key = lv.h AND u.state = 0
                          AND u.priority = lv.lp AND u.next_fetch_at <= p_now
                        ORDER BY u.next_fetch_at, u.depth, u.url_key
                        LIMIT least(p_per_host, p_limit - v_taken)
                    ) AS p
                ), chosen AS (
                    -- a host's rows are consecutive in walk order: giving each its first
                    -- min(per_host, limit - taken) rows is taking the walk's first rows
                    SELECT * FROM probed WHERE row_rank <= p_per_host
                    ORDER BY host_rank, row_rank LIMIT p_limit - v_taken
                )
                SELECT v_taken + row_number() OVER (ORDER BY c.host_rank, c.row_rank),
                       c.shard, c.url_key, c.url, c.host_key, c.depth, c.priority,
                       c.version, c.next_fetch_at, c.redirect_hops, c.etag, c.last_modified,
                       c.failure_count, c.payload_digest, c.change_stats, c.last_fetch_at,
                       c.warc_file, c.simhash, c.sitemap_changefreq, c.sitemap_lastmod,
                       c.redirect_chain
                FROM chosen c;
                GET DIAGNOSTICS v_got = ROW_COUNT;
                v_taken := v_taken + v_got;
                v_rate := greatest(1.0, v_got::double precision / v_hosts);
                EXIT WHEN v_hosts < v_want;
            END LOOP;
        END LOOP;
    END LOOP;
END;
$$;

ALTER FUNCTION courtier_read_due(integer[], double precision, double precision, integer,
                                 integer, text[])
    SET plan_cache_mode = force_custom_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off;

-- The marking refill (Store.load_due) is the read above, then migration 17's marking
-- (rows still QUEUED and due, by their primary key, in walk order) and level refresh,
-- under the per-shard advisory locks as before. The read now takes one snapshot, after
-- the locks; the marking still rechecks each row on the version it updates.
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

-- CREATE OR REPLACE drops a function's settings: migration 16's, again (without them the
-- marking joins every chosen key against whole partitions and JIT compiles it).
ALTER FUNCTION courtier_load_due(integer[], double precision, double precision, integer,
                                 integer, text[])
    SET plan_cache_mode = force_custom_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off;
