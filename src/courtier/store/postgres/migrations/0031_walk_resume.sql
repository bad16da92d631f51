-- courtier PostgreSQL schema, migration 31: a refill resumes its walk where the last one
-- stopped, so the hosts its reader holds are not walked again (issue #29's skip set).
-- The walk of the skipset branch (merge d40fc34, reverted in 77053f4), with its change
-- stamp set without a trigger and only where a host-queue write is not HOT anyway.
--
-- The worker's refill skips every host it holds (skip_hosts), and those are the hosts
-- earlier refills returned: the first the walk meets. Walking past them cost ~1.3 us a
-- held host in the database. Now the store (PostgresStore, per reader) remembers where
-- its last walk stopped (the walk key of the last host it returned, the `now` it used and
-- its snapshot's xmin) and the next walk reads:
--
--   * the host range from that key on (as before, from there), and, before that key,
--   * only the hosts that may have entered it since: host-queue rows that were inserted
--     or moved in the walk order since the last walk's snapshot (moved_by >= that xmin,
--     by the index below), hosts whose readiness or overdue state moved with the clock
--     (next_due_at in (then, now] or in [then - OVERDUE_AFTER, now - OVERDUE_AFTER)),
--     less the hosts the reader holds (courtier_walk_candidates, then the store), and
--     the hosts the reader held or was given then and holds no longer (released).
--
-- Every other ready host before the key was, at the last walk, returned or skipped, and
-- is held still, or released (docs/scale-out.md, "Resuming the walk"). A write that
-- leaves a host's walk key alone (its levels' arrays only, or courtier_queue_lock's
-- no-op update) cannot bring it before the key: had it been ready there at the last
-- walk, it was returned or skipped then; had it not, the clock moved it. So moved_by is
-- set only by an insert (the column's default) and by an update that changes
-- next_due_at or best_priority (courtier_queue_enter, courtier_queue_from_levels below:
-- the only functions that write host_queue rows). Such an update changes indexed
-- columns, so it was never HOT: the stamp adds one index entry to it and nothing to the
-- HOT updates (the skipset branch's trigger stamped every write, making the lock's
-- no-op update and the level-array updates non-HOT too, and called PL/pgSQL per row).
--
-- Plain PostgreSQL only for the stamp: on Citus the refill keeps its own
-- courtier_read_due (citus/refill.sql) and walks from the start; its column stays 0.
ALTER TABLE host_queue ADD COLUMN moved_by xid8 NOT NULL DEFAULT '0';

DO $migration$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    ALTER TABLE host_queue ALTER COLUMN moved_by SET DEFAULT pg_current_xact_id();
    CREATE INDEX host_queue_moved ON host_queue (moved_by);

    -- migration 24's function; the update stamps a host whose walk key moves (a level
    -- new or earlier than the host's earliest, or better than its best)
    CREATE OR REPLACE FUNCTION courtier_queue_enter(p_shards integer[], p_hosts text[],
                                                    p_priority integer[],
                                                    p_due double precision[])
    RETURNS void LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_generic_plan
    AS $$
    BEGIN
        WITH lv AS (
            SELECT s, h, p, min(d) AS d
            FROM unnest(p_shards, p_hosts, p_priority, p_due) AS t(s, h, p, d)
            WHERE d IS NOT NULL GROUP BY s, h, p
        )
        INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority,
                                     level_priorities, level_due_ats)
        SELECT s, h, min(d), max(p), array_agg(p ORDER BY p DESC),
               array_agg(d ORDER BY p DESC)
        FROM lv GROUP BY s, h ORDER BY s, h
        ON CONFLICT (shard, host_key) DO UPDATE
            SET next_due_at = LEAST(q.next_due_at, EXCLUDED.next_due_at),
                best_priority = GREATEST(q.best_priority, EXCLUDED.best_priority),
                (level_priorities, level_due_ats) = (
                    SELECT array_agg(m.p ORDER BY m.p DESC), array_agg(m.d ORDER BY m.p DESC)
                    FROM (SELECT t.p, min(t.d) AS d
                          FROM unnest(q.level_priorities || EXCLUDED.level_priorities,
                                      q.level_due_ats || EXCLUDED.level_due_ats) AS t(p, d)
                          GROUP BY t.p) AS m),
                moved_by = CASE WHEN EXCLUDED.next_due_at < q.next_due_at
                                  OR EXCLUDED.best_priority > q.best_priority
                                THEN pg_current_xact_id() ELSE q.moved_by END
            -- only when a level is new, or due earlier than the stored one
            WHERE EXISTS (SELECT 1 FROM unnest(EXCLUDED.level_priorities,
                                               EXCLUDED.level_due_ats) AS n(p, d)
                          WHERE NOT EXISTS (
                              SELECT 1 FROM unnest(q.level_priorities, q.level_due_ats)
                                  AS o(p, d)
                              WHERE o.p = n.p AND o.d <= n.d));
        INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
        SELECT s, h, p, min(d) FROM unnest(p_shards, p_hosts, p_priority, p_due) AS t(s, h, p, d)
        WHERE d IS NOT NULL GROUP BY s, h, p ORDER BY s, h, p
        ON CONFLICT (shard, host_key, priority) DO UPDATE
            SET next_due_at = EXCLUDED.next_due_at WHERE EXCLUDED.next_due_at < l.next_due_at;
    END;
    $$;

    -- migration 30's function; the update stamps a host whose walk key moves
    CREATE OR REPLACE FUNCTION courtier_queue_from_levels(p_shards integer[], p_hosts text[])
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
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
                                level_priorities = a.ps, level_due_ats = a.ds,
                                moved_by = CASE WHEN q.next_due_at <> a.due
                                                  OR q.best_priority <> a.best
                                                THEN pg_current_xact_id()
                                                ELSE q.moved_by END
        FROM agg a
        WHERE q.shard = a.s AND q.host_key = a.h AND a.best IS NOT NULL
          AND (q.next_due_at <> a.due OR q.best_priority <> a.best
               OR q.level_priorities <> a.ps OR q.level_due_ats <> a.ds);
    END;
    $$;
END
$migration$;

-- The hosts that may have entered the part of a walk done before its place since that
-- walk (the caller's change mark p_since, its now and overdue bound): host-queue rows
-- inserted or moved since (moved_by), and the hosts whose readiness or overdue state
-- moved with the clock (one range of host_queue_level per level). The store drops the
-- ones it holds and adds the ones it released before the walk (courtier_read_due_from's
-- p_cand_*): a held host that moved (the worker's own commit of one of its rows moves
-- it) is not read at all, where the skipset branch's walk read its rows and dropped them.
CREATE OR REPLACE FUNCTION courtier_walk_candidates(p_shards integer[], p_since xid8,
                                         p_since_now double precision,
                                         p_now double precision,
                                         p_since_overdue double precision,
                                         p_overdue double precision)
RETURNS TABLE (shard integer, host_key text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE lv(p) AS (
        SELECT (SELECT q.best_priority FROM host_queue q ORDER BY q.best_priority DESC LIMIT 1)
        UNION ALL
        SELECT (SELECT q.best_priority FROM host_queue q WHERE q.best_priority < lv.p
                ORDER BY q.best_priority DESC LIMIT 1) FROM lv WHERE lv.p IS NOT NULL
    )
    SELECT q.shard, q.host_key FROM host_queue q
    WHERE q.moved_by >= p_since AND q.shard = ANY(p_shards) AND q.next_due_at <= p_now
    UNION
    SELECT w.shard, w.host_key FROM lv
    CROSS JOIN LATERAL (
        SELECT q.shard, q.host_key FROM host_queue q
        WHERE q.best_priority = lv.p AND q.next_due_at > p_since_now
          AND q.next_due_at <= p_now AND q.shard = ANY(p_shards)
        UNION ALL
        SELECT q.shard, q.host_key FROM host_queue q
        WHERE q.best_priority = lv.p AND q.next_due_at >= p_since_overdue
          AND q.next_due_at < p_overdue AND q.shard = ANY(p_shards)
    ) AS w
    WHERE lv.p IS NOT NULL;
END;
$$;

-- Custom plans, as courtier_read_due_from: a generic plan guesses a third of the table for
-- the moved_by range and walked a whole index (~7 ms a call at 120,000 hosts,
-- bench/skip_set_bench.py, where the custom plan reads one empty index range: 0.2 ms).
ALTER FUNCTION courtier_walk_candidates(integer[], xid8, double precision, double precision,
                                        double precision, double precision)
    SET plan_cache_mode = force_custom_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off;

-- Migration 24's walk with a place to resume from. p_resumed false: no place, the walk
-- of migration 24 (from the start). Otherwise the walk key of the last host the last
-- walk returned (p_after_*; p_after_late NULL: it returned fewer rows than asked, so it
-- walked every ready host) and the candidates, as (shard, host): the hosts that may have
-- entered the part of the walk done before that key since (courtier_walk_candidates,
-- less the held hosts, plus the released ones). Each range (overdue or not, level) is
-- walked in two phases: first the candidates up to the resume key, by their primary
-- keys; then the host range after that key (a range wholly before it: none).
-- host_due and host_level are the returned row's host's walk key (the caller's next
-- resume key).
CREATE OR REPLACE FUNCTION courtier_read_due_from(p_shards integer[], p_now double precision,
                                       p_overdue double precision, p_limit integer,
                                       p_per_host integer, p_skip text[],
                                       p_resumed boolean, p_after_late boolean,
                                       p_after_level integer, p_after_due double precision,
                                       p_after_host text, p_after_shard integer,
                                       p_cand_shards integer[], p_cand_hosts text[])
RETURNS TABLE (walk bigint, shard integer, url_key bytea, url text, host_key text,
               depth integer, priority integer, version integer,
               next_fetch_at double precision, redirect_hops integer, etag text,
               last_modified text, failure_count integer, payload_digest text,
               change_stats text, last_fetch_at double precision, warc_file text,
               simhash bigint, sitemap_changefreq text, sitemap_lastmod double precision,
               redirect_chain text, host_due double precision, host_level integer)
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
    v_ld double precision[];
    v_taken bigint := 0;
    v_got bigint;
    v_cs integer[] := '{}';  -- the candidates before the resume key (shard, host)
    v_ch text[] := '{}';
    v_phase integer;  -- 1: candidates up to the resume key, 2: the range after it
    v_until_due double precision;
    v_until_host text;
    v_until_shard integer;
    v_range_before boolean;
    v_range_at boolean;
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
    IF p_resumed THEN
        SELECT coalesce(array_agg(c.s), '{}'), coalesce(array_agg(c.h), '{}') INTO v_cs, v_ch
        FROM unnest(p_cand_shards, p_cand_hosts) AS c(s, h)
        WHERE c.h <> ALL(p_skip) AND c.s = ANY(p_shards);
    END IF;

    <<ranges>>
    FOREACH v_late IN ARRAY ARRAY[true, false] LOOP
        v_low := CASE WHEN v_late THEN '-infinity'::double precision ELSE p_overdue END;
        FOREACH v_level IN ARRAY v_levels LOOP
            -- where this range stands against the resume key
            v_range_before := p_resumed AND (
                p_after_late IS NULL OR (v_late AND NOT p_after_late)
                OR (v_late = p_after_late AND v_level > p_after_level));
            v_range_at := p_resumed AND NOT v_range_before
                AND v_late = p_after_late AND v_level = p_after_level;
            v_after_due := '-infinity';
            v_after_host := '';
            v_after_shard := -1;
            IF v_range_before THEN
                v_until_due := 'infinity';
                v_until_host := '';
                v_until_shard := -1;
            ELSE
                v_until_due := p_after_due;
                v_until_host := p_after_host;
                v_until_shard := p_after_shard;
            END IF;
            v_phase := CASE WHEN v_range_before OR v_range_at THEN 1 ELSE 2 END;
            LOOP
                EXIT ranges WHEN v_taken >= p_limit;
                v_want := greatest(1, ceil((p_limit - v_taken) / v_rate))::integer;
                IF v_phase = 1 THEN
                    -- candidates of this range up to the resume key, by primary key
                    WITH r AS MATERIALIZED (
                        SELECT k.*, row_number() OVER () AS rank
                        FROM (SELECT q.shard, q.host_key, q.next_due_at, q.level_priorities,
                                     q.level_due_ats
                              FROM unnest(v_cs, v_ch) AS c(s, h)
                              CROSS JOIN LATERAL (
                                  SELECT x.* FROM host_queue x
                                  WHERE x.shard = c.s AND x.host_key = c.h OFFSET 0) AS q
                              WHERE q.best_priority = v_level
                                AND q.next_due_at >= v_low AND q.next_due_at <= p_now
                                AND (NOT v_late OR q.next_due_at < p_overdue)
                                AND (q.next_due_at, q.host_key, q.shard)
                                    > (v_after_due, v_after_host, v_after_shard)
                                AND (v_range_before OR (q.next_due_at, q.host_key, q.shard)
                                     <= (v_until_due, v_until_host, v_until_shard))
                              ORDER BY q.next_due_at, q.host_key, q.shard LIMIT v_want) AS k
                    ), last AS (
                        SELECT r.shard, r.host_key, r.next_due_at, r.rank FROM r
                        ORDER BY r.rank DESC LIMIT 1
                    ), due AS (
                        SELECT r.shard, r.host_key, r.rank, x.p, r.next_due_at FROM r
                        CROSS JOIN LATERAL unnest(r.level_priorities, r.level_due_ats) AS x(p, d)
                        WHERE x.d <= p_now
                    )
                    SELECT l.rank, l.next_due_at, l.host_key, l.shard,
                           (SELECT array_agg(d.shard) FROM due d),
                           (SELECT array_agg(d.host_key) FROM due d),
                           (SELECT array_agg(d.rank) FROM due d),
                           (SELECT array_agg(d.p) FROM due d),
                           (SELECT array_agg(d.next_due_at) FROM due d)
                    INTO v_hosts, v_after_due, v_after_host, v_after_shard, v_ls, v_lh, v_lr,
                         v_lp, v_ld
                    FROM last l;
                    IF v_hosts IS NULL THEN  -- candidates done: the range after the key
                        EXIT WHEN v_range_before;
                        v_phase := 2;
                        v_after_due := v_until_due;
                        v_after_host := v_until_host;
                        v_after_shard := v_until_shard;
                        CONTINUE;
                    END IF;
                ELSE
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
                        SELECT r.shard, r.host_key, r.rank, x.p, r.next_due_at FROM r
                        CROSS JOIN LATERAL unnest(r.level_priorities, r.level_due_ats) AS x(p, d)
                        WHERE x.d <= p_now
                    )
                    SELECT l.rank, l.next_due_at, l.host_key, l.shard,
                           (SELECT array_agg(d.shard) FROM due d),
                           (SELECT array_agg(d.host_key) FROM due d),
                           (SELECT array_agg(d.rank) FROM due d),
                           (SELECT array_agg(d.p) FROM due d),
                           (SELECT array_agg(d.next_due_at) FROM due d)
                    INTO v_hosts, v_after_due, v_after_host, v_after_shard, v_ls, v_lh, v_lr,
                         v_lp, v_ld
                    FROM last l;
                    EXIT WHEN v_hosts IS NULL;
                END IF;

                RETURN QUERY
                WITH probed AS (
                    SELECT lv.rank AS host_rank, lv.hd AS host_due, p.*,
                           row_number() OVER (
                               PARTITION BY lv.rank
                               ORDER BY p.next_fetch_at < p_overdue DESC, p.priority DESC,
                                        p.next_fetch_at, p.depth, p.url_key) AS row_rank
                    FROM unnest(v_ls, v_lh, v_lr, v_lp, v_ld) AS lv(s, h, rank, lp, hd)
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
                       c.redirect_chain, c.host_due, v_level
                FROM chosen c;
                GET DIAGNOSTICS v_got = ROW_COUNT;
                v_taken := v_taken + v_got;
                v_rate := greatest(1.0, v_got::double precision / v_hosts);
                IF v_hosts < v_want THEN
                    EXIT WHEN v_phase = 2 OR v_range_before;
                    v_phase := 2;  -- the candidates up to the key are done
                    v_after_due := v_until_due;
                    v_after_host := v_until_host;
                    v_after_shard := v_until_shard;
                END IF;
            END LOOP;
        END LOOP;
    END LOOP;
END;
$$;

ALTER FUNCTION courtier_read_due_from(integer[], double precision, double precision, integer,
                                      integer, text[], boolean, boolean, integer,
                                      double precision, text, integer, integer[], text[])
    SET plan_cache_mode = force_custom_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off;

-- Migration 24's form: the walk from the start (courtier_load_due reads it; Citus has its
-- own, citus/refill.sql).
CREATE OR REPLACE FUNCTION courtier_read_due(p_shards integer[], p_now double precision,
                                             p_overdue double precision, p_limit integer,
                                             p_per_host integer, p_skip text[])
RETURNS TABLE (walk bigint, shard integer, url_key bytea, url text, host_key text,
               depth integer, priority integer, version integer,
               next_fetch_at double precision, redirect_hops integer, etag text,
               last_modified text, failure_count integer, payload_digest text,
               change_stats text, last_fetch_at double precision, warc_file text,
               simhash bigint, sitemap_changefreq text, sitemap_lastmod double precision,
               redirect_chain text)
LANGUAGE sql STABLE AS $$
    SELECT r.walk, r.shard, r.url_key, r.url, r.host_key, r.depth, r.priority, r.version,
           r.next_fetch_at, r.redirect_hops, r.etag, r.last_modified, r.failure_count,
           r.payload_digest, r.change_stats, r.last_fetch_at, r.warc_file, r.simhash,
           r.sitemap_changefreq, r.sitemap_lastmod, r.redirect_chain
    FROM courtier_read_due_from(p_shards, p_now, p_overdue, p_limit, p_per_host, p_skip,
                                false, NULL, NULL, NULL, NULL, NULL, NULL, NULL) AS r;
$$;
