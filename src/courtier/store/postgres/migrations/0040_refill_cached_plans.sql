-- courtier PostgreSQL schema, migration 40 (issue 29): the refill's per-host probe keeps
-- its plan for the session.
--
-- courtier_read_due runs with force_custom_plan (its host range needs the walk's
-- constants: with a generic plan, the range's `NOT v_late OR next_due_at < p_overdue`
-- and `shard = ANY(...)` are no longer index bounds, and one refill at 1 M URLs took 2 s
-- instead of 0.2 s), so every statement of its walk was planned again at every
-- execution. pg_stat_statements over a crawl of the realistic web
-- (bench/pg_statement_profile.py, 1,000 x 20, one worker) counted 1.37 s of planning in
-- two of them against 0.4 s of their execution, ~50 us a crawled page:
-- * the per-host probe (`WITH probed`: a LATERAL read of urls_queued_rank for each due
--   level of each host of the batch), ~2.6 ms a call, planned over the 16 urls
--   partitions each time. Nothing in it needs a constant: the shard, host and level of
--   every probe come from the rows of an unnest and partitions are pruned at execution
--   either way. It moves, unchanged, into courtier_due_rows, which keeps a generic plan
--   for the session (hash and merge joins off, as in the caller: the one plan left is the
--   custom plans' nested loop of one-partition index probes);
-- * the host range (`WITH r`), ~2 ms a call, ~0.4 ms of it the planner's estimate of
--   `shard = ANY(p_shards)` element by element (up to 1,024 shards a call), stays as it
--   was, planned at every batch. Read through a scalar subquery, the lists were one
--   parameter to the planner, which then chose a sort of the whole range over the index
--   order (slower: bench/README.md, "Host counters every 10 s and the refill probe's
--   cached plan").
--
-- Same rows, same order (`walk`). Plain PostgreSQL only: a Citus coordinator replaces
-- courtier_read_due with citus/refill.sql's form, after the migrations.

DO $migration$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    CREATE OR REPLACE FUNCTION courtier_due_rows(p_ls integer[], p_lh text[], p_lr bigint[],
                                      p_lp integer[], p_now double precision,
                                      p_overdue double precision, p_per_host integer,
                                      p_take bigint, p_taken bigint)
    RETURNS TABLE (walk bigint, shard integer, url_key bytea, url text, host_key text,
                   depth integer, priority integer, version integer,
                   next_fetch_at double precision, redirect_hops integer, etag text,
                   last_modified text, failure_count integer, payload_digest text,
                   change_stats text, last_fetch_at double precision, warc_file text,
                   simhash bigint, sitemap_changefreq text, sitemap_lastmod double precision,
                   redirect_chain text, value double precision)
    LANGUAGE plpgsql STABLE
    SET plan_cache_mode = force_generic_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off AS $fn$
    #variable_conflict use_column
    BEGIN
        RETURN QUERY
        WITH probed AS (
            SELECT lv.rank AS host_rank, p.*,
                   row_number() OVER (
                       PARTITION BY lv.rank
                       ORDER BY p.next_fetch_at < p_overdue DESC, p.priority DESC,
                                p.next_fetch_at, p.depth, p.url_key) AS row_rank
            FROM unnest(p_ls, p_lh, p_lr, p_lp) AS lv(s, h, rank, lp)
            CROSS JOIN LATERAL (
                SELECT u.shard, u.url_key, u.url, u.host_key, u.depth, u.priority,
                       u.version, u.next_fetch_at, u.redirect_hops, u.etag,
                       u.last_modified, u.failure_count, u.payload_digest,
                       u.change_stats, u.last_fetch_at, u.warc_file, u.simhash,
                       u.sitemap_changefreq, u.sitemap_lastmod, u.redirect_chain,
                       u.value
                FROM urls u
                WHERE u.shard = lv.s AND u.host_key = lv.h AND u.state = 0
                  AND u.priority = lv.lp AND u.next_fetch_at <= p_now
                ORDER BY u.next_fetch_at, u.depth, u.url_key
                LIMIT least(p_per_host, p_take)
            ) AS p
        ), chosen AS (
            -- a host's rows are consecutive in walk order: giving each its first
            -- min(per_host, limit - taken) rows is taking the walk's first rows
            SELECT * FROM probed WHERE row_rank <= p_per_host
            ORDER BY host_rank, row_rank LIMIT p_take
        )
        SELECT p_taken + row_number() OVER (ORDER BY c.host_rank, c.row_rank),
               c.shard, c.url_key, c.url, c.host_key, c.depth, c.priority,
               c.version, c.next_fetch_at, c.redirect_hops, c.etag, c.last_modified,
               c.failure_count, c.payload_digest, c.change_stats, c.last_fetch_at,
               c.warc_file, c.simhash, c.sitemap_changefreq, c.sitemap_lastmod,
               c.redirect_chain, c.value
        FROM chosen c;
    END;
    $fn$;

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
    LANGUAGE plpgsql STABLE AS $fn$
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

                    RETURN QUERY SELECT * FROM courtier_due_rows(
                        v_ls, v_lh, v_lr, v_lp, p_now, p_overdue, p_per_host,
                        p_limit - v_taken, v_taken);
                    GET DIAGNOSTICS v_got = ROW_COUNT;
                    v_taken := v_taken + v_got;
                    v_rate := greatest(1.0, v_got::double precision / v_hosts);
                    EXIT WHEN v_hosts < v_want;
                END LOOP;
            END LOOP;
        END LOOP;
    END;
    $fn$;

    ALTER FUNCTION courtier_read_due(integer[], double precision, double precision, integer,
                                     integer, text[])
        SET plan_cache_mode = force_custom_plan SET jit = off
        SET enable_hashjoin = off SET enable_mergejoin = off;
END $migration$;
