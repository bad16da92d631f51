-- courtier PostgreSQL schema: each host's head level in its host-queue row, and a refill
-- that writes nothing (courtier_read_due).
--
-- host_queue gains two columns, kept exact wherever best_priority and next_due_at are:
--   best_due_at  the earliest next_fetch_at of the host's QUEUED rows of its best level
--                (best_priority);
--   rest_due_at  the earliest next_fetch_at of its QUEUED rows of every other level
--                ('infinity' when it has none).
-- A ready host (next_due_at <= now) whose rest_due_at is after now has one due level,
-- its best: its due rows, in the contract's row order, are one range of
-- urls_queued_rank (priority = best_priority AND next_fetch_at <= now, ordered by
-- next_fetch_at, depth, url_key; the overdue rows are that range's prefix), which the
-- refill reads without probing host_levels. Only a host with more than one due level
-- reads its host_levels rows, as before.
--
-- Upkeep: rows entering QUEUED fold into the row by the cases below
-- (courtier_queue_enter: the levels they bring against the stored best level); rows
-- leaving or changing recompute the row from host_levels (courtier_queue_from_levels),
-- which every such path already called.
ALTER TABLE host_queue
    ADD COLUMN best_due_at double precision NOT NULL DEFAULT 'infinity',
    ADD COLUMN rest_due_at double precision NOT NULL DEFAULT 'infinity';

UPDATE host_queue q
SET best_due_at = a.best_due, rest_due_at = a.rest_due
FROM (
    SELECT shard, host_key,
           min(next_due_at) FILTER (WHERE priority = best) AS best_due,
           coalesce(min(next_due_at) FILTER (WHERE priority < best), 'infinity') AS rest_due
    FROM (SELECT l.*, max(l.priority) OVER (PARTITION BY l.shard, l.host_key) AS best
          FROM host_levels l) AS lv
    GROUP BY shard, host_key
) AS a
WHERE q.shard = a.shard AND q.host_key = a.host_key;

-- Rows entered QUEUED, as (shard, host, priority, due): host_queue first, then
-- host_levels, both in key order (the lock order of every function). A host's row
-- changes only when one of its four figures does.
CREATE FUNCTION courtier_queue_enter(p_shards integer[], p_hosts text[],
                                     p_priority integer[], p_due double precision[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH lv AS (
        SELECT s, h, p, min(d) AS d
        FROM unnest(p_shards, p_hosts, p_priority, p_due) AS t(s, h, p, d)
        WHERE d IS NOT NULL GROUP BY s, h, p
    ), ranked AS (
        SELECT s, h, p, d, max(p) OVER (PARTITION BY s, h) AS best FROM lv
    )
    INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority, best_due_at,
                                 rest_due_at)
    SELECT s, h, min(d), max(p), min(d) FILTER (WHERE p = best),
           coalesce(min(d) FILTER (WHERE p < best), 'infinity')
    FROM ranked GROUP BY s, h ORDER BY s, h
    ON CONFLICT (shard, host_key) DO UPDATE
        SET next_due_at = LEAST(q.next_due_at, EXCLUDED.next_due_at),
            best_priority = GREATEST(q.best_priority, EXCLUDED.best_priority),
            best_due_at = CASE
                WHEN EXCLUDED.best_priority > q.best_priority THEN EXCLUDED.best_due_at
                WHEN EXCLUDED.best_priority = q.best_priority
                    THEN LEAST(q.best_due_at, EXCLUDED.best_due_at)
                ELSE q.best_due_at END,
            rest_due_at = CASE
                -- a better level arrived: the stored best level joins the rest
                WHEN EXCLUDED.best_priority > q.best_priority
                    THEN LEAST(EXCLUDED.rest_due_at, q.best_due_at, q.rest_due_at)
                WHEN EXCLUDED.best_priority = q.best_priority
                    THEN LEAST(q.rest_due_at, EXCLUDED.rest_due_at)
                -- every level that arrived is below the stored best
                ELSE LEAST(q.rest_due_at, EXCLUDED.next_due_at) END
        WHERE EXCLUDED.best_priority > q.best_priority
           OR (EXCLUDED.best_priority = q.best_priority
               AND (EXCLUDED.best_due_at < q.best_due_at
                    OR EXCLUDED.rest_due_at < q.rest_due_at))
           OR (EXCLUDED.best_priority < q.best_priority
               AND EXCLUDED.next_due_at < q.rest_due_at);
    INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
    SELECT s, h, p, min(d) FROM unnest(p_shards, p_hosts, p_priority, p_due) AS t(s, h, p, d)
    WHERE d IS NOT NULL GROUP BY s, h, p ORDER BY s, h, p
    ON CONFLICT (shard, host_key, priority) DO UPDATE
        SET next_due_at = EXCLUDED.next_due_at WHERE EXCLUDED.next_due_at < l.next_due_at;
END;
$$;

ALTER FUNCTION courtier_queue_enter(integer[], text[], integer[], double precision[])
    SET jit = off SET plan_cache_mode = force_custom_plan;

CREATE OR REPLACE FUNCTION courtier_queue_add(p_shards integer[], p_hosts text[],
                                              p_due double precision[], p_priority integer[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM courtier_queue_enter(p_shards, p_hosts, p_priority, p_due);
END;
$$;

-- host_queue rows of these hosts from their host_levels (deleted when none is left);
-- migration 13's function with the two head columns. Callers locked the rows first.
CREATE OR REPLACE FUNCTION courtier_queue_from_levels(p_shards integer[], p_hosts text[])
RETURNS void LANGUAGE sql AS $$
    WITH t AS (
        SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts) AS t(s, h)
    ), lv AS (
        SELECT t.s, t.h, l.priority, l.next_due_at,
               max(l.priority) OVER (PARTITION BY t.s, t.h) AS best
        FROM t LEFT JOIN host_levels l ON l.shard = t.s AND l.host_key = t.h
    ), agg AS (
        SELECT s, h, max(priority) AS best, min(next_due_at) AS due,
               min(next_due_at) FILTER (WHERE priority = best) AS best_due,
               coalesce(min(next_due_at) FILTER (WHERE priority < best), 'infinity')
                   AS rest_due
        FROM lv GROUP BY s, h
    ), emptied AS (
        DELETE FROM host_queue q USING agg a
        WHERE q.shard = a.s AND q.host_key = a.h AND a.best IS NULL
    )
    UPDATE host_queue q SET next_due_at = a.due, best_priority = a.best,
                            best_due_at = a.best_due, rest_due_at = a.rest_due
    FROM agg a
    WHERE q.shard = a.s AND q.host_key = a.h AND a.best IS NOT NULL
      AND (q.next_due_at <> a.due OR q.best_priority <> a.best
           OR q.best_due_at <> a.best_due OR q.rest_due_at <> a.rest_due);
$$;

-- Migration 18's intake with its host-queue upkeep in courtier_queue_enter (the same two
-- upserts, from the same per-level aggregates, plus the head columns).
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
-- the walk sees one state of the store. A host with one due level (rest_due_at > now)
-- reads one urls_queued_rank range of its best level; others probe host_levels first.
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
    v_hs integer[];
    v_hh text[];
    v_hd double precision[];
    v_hr double precision[];
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
                SELECT array_agg(r.shard), array_agg(r.host_key), array_agg(r.next_due_at),
                       array_agg(r.rest_due_at)
                INTO v_hs, v_hh, v_hd, v_hr
                FROM (SELECT q.shard, q.host_key, q.next_due_at, q.rest_due_at
                      FROM host_queue q
                      WHERE q.best_priority = v_level
                        AND q.next_due_at >= v_low AND q.next_due_at <= p_now
                        AND (NOT v_late OR q.next_due_at < p_overdue)
                        AND (q.next_due_at, q.host_key, q.shard)
                            > (v_after_due, v_after_host, v_after_shard)
                        AND q.shard = ANY(p_shards) AND q.host_key <> ALL(p_skip)
                      ORDER BY q.next_due_at, q.host_key, q.shard LIMIT v_want) AS r;
                EXIT WHEN v_hs IS NULL;

                RETURN QUERY
                WITH hosts AS (
                    SELECT t.s, t.h, t.r, t.rank
                    FROM unnest(v_hs, v_hh, v_hr) WITH ORDINALITY AS t(s, h, r, rank)
                ), probed AS (
                    SELECT h.rank AS host_rank, p.*,
                           row_number() OVER (
                               PARTITION BY h.rank
                               ORDER BY p.next_fetch_at < p_overdue DESC, p.priority DESC,
                                        p.next_fetch_at, p.depth, p.url_key) AS row_rank
                    FROM hosts h
                    CROSS JOIN LATERAL (
                        -- one due level (the best): no host_levels probe
                        SELECT v_level AS lp WHERE h.r > p_now
                        UNION ALL
                        SELECT l.priority FROM host_levels l
                        WHERE h.r <= p_now AND l.shard = h.s AND l.host_key = h.h
                          AND l.next_due_at <= p_now
                    ) AS lv
                    CROSS JOIN LATERAL (
                        SELECT u.shard, u.url_key, u.url, u.host_key, u.depth, u.priority,
                               u.version, u.next_fetch_at, u.redirect_hops, u.etag,
                               u.last_modified, u.failure_count, u.payload_digest,
                               u.change_stats, u.last_fetch_at, u.warc_file, u.simhash,
                               u.sitemap_changefreq, u.sitemap_lastmod, u.redirect_chain
                        FROM urls u
                        WHERE u.shard = h.s AND u.host_key = h.h AND u.state = 0
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
                v_rate := greatest(1.0, v_got::double precision / cardinality(v_hs));
                EXIT WHEN cardinality(v_hs) < v_want;
                v_after_due := v_hd[cardinality(v_hd)];
                v_after_host := v_hh[cardinality(v_hh)];
                v_after_shard := v_hs[cardinality(v_hs)];
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
