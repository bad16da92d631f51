-- courtier PostgreSQL schema, migration 35 (branch rowcuts, issue 29): the refill's rows
-- carry the URL's stored value.
--
-- After every refill the worker used to ask for the stored values of the rows just read
-- (`SELECT url_key, value FROM unnest(...) JOIN urls ...`, Store.url_values): a second
-- statement over rows the refill had just read, one round trip a refill, and on a first
-- crawl (no URL fetched yet, no value set) it found nothing in every call (bench/README.md,
-- "Where the realistic web's extra database time goes": 12-60 us a crawled page). The
-- refill (courtier_read_due, and courtier_load_due, which returns what it marked) now
-- returns `value` with the other columns of each row (DueUrl.value), read in the same
-- snapshot: a value set by anyone (the API, another worker's commit) before the refill
-- is in its rows, as it was in the look-up made right after it.
--
-- A return type cannot change in place: both functions are dropped and made again, the
-- same bodies as migration 24's plus the one column, with their settings. On a Citus
-- coordinator the forms of citus/refill.sql (changed with this migration, so applied at
-- the next open, after the migrations) replace these, as they replaced migration 24's.
DROP FUNCTION courtier_load_due(integer[], double precision, double precision, integer,
                                integer, text[]);
DROP FUNCTION courtier_read_due(integer[], double precision, double precision, integer,
                                integer, text[]);

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
               redirect_chain text, value double precision)
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
                               u.sitemap_changefreq, u.sitemap_lastmod, u.redirect_chain,
                               u.value
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
                       c.redirect_chain, c.value
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
CREATE FUNCTION courtier_load_due(p_shards integer[], p_now double precision,
                                             p_overdue double precision, p_limit integer,
                                             p_per_host integer, p_skip text[])
RETURNS TABLE (walk bigint, shard integer, url_key bytea, url text, host_key text,
               depth integer, priority integer, version integer,
               next_fetch_at double precision, redirect_hops integer, etag text,
               last_modified text, failure_count integer, payload_digest text,
               change_stats text, last_fetch_at double precision, warc_file text,
               simhash bigint, sitemap_changefreq text, sitemap_lastmod double precision,
               redirect_chain text, value double precision)
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
                  u.redirect_chain, u.value
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
