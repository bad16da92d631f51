-- courtier PostgreSQL schema, migration 8: the redirect chain of a URL (issue 12).
-- A JSON list of {"url", "status"}: the redirects that led to the URL when it was
-- first discovered, oldest first, capped (events/redirects.py); NULL when reached
-- directly. Intake stores it, the refill hands it to the frontier, and the events of
-- the URL's fetches carry it. The two functions below are those of migrations 2 and
-- 3 with the new column added; load_due's result type changes, so it is re-created.
ALTER TABLE urls ADD COLUMN redirect_chain text;
ALTER TYPE courtier_new_url ADD ATTRIBUTE redirect_chain text;

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
        FROM unnest(p_urls) AS n ORDER BY n.shard, n.url_key
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
    v_host_shards integer[];
    v_hosts text[];
BEGIN
    PERFORM pg_advisory_xact_lock(1129270869, l.s)
    FROM (SELECT DISTINCT s FROM unnest(p_shards) AS s ORDER BY s) AS l;

    SELECT array_agg(r.shard ORDER BY r.late DESC, r.best_priority DESC, r.next_due_at,
                     r.host_key),
           array_agg(r.host_key ORDER BY r.late DESC, r.best_priority DESC, r.next_due_at,
                     r.host_key)
    INTO v_host_shards, v_hosts
    FROM (
        SELECT * FROM (
            (SELECT q.shard, q.host_key, q.best_priority, q.next_due_at, true AS late
             FROM host_queue q
             WHERE q.shard = ANY(p_shards) AND q.next_due_at < p_overdue
               AND q.host_key <> ALL(p_skip)
             ORDER BY q.best_priority DESC, q.next_due_at, q.host_key LIMIT p_limit)
            UNION ALL
            (SELECT q.shard, q.host_key, q.best_priority, q.next_due_at, false AS late
             FROM host_queue q
             WHERE q.shard = ANY(p_shards) AND q.next_due_at >= p_overdue
               AND q.next_due_at <= p_now AND q.host_key <> ALL(p_skip)
             ORDER BY q.best_priority DESC, q.next_due_at, q.host_key LIMIT p_limit)
        ) AS both_kinds
        ORDER BY late DESC, best_priority DESC, next_due_at, host_key LIMIT p_limit
    ) AS r;
    IF v_hosts IS NULL THEN
        RETURN;
    END IF;

    RETURN QUERY
    WITH hosts AS (
        SELECT t.s, t.h, t.rank FROM unnest(v_host_shards, v_hosts) WITH ORDINALITY AS t(s, h, rank)
    ), probed AS (
        SELECT h.rank AS host_rank, p.url_key, p.shard,
               row_number() OVER (PARTITION BY h.rank ORDER BY p.late DESC, p.priority DESC,
                                  p.next_fetch_at, p.depth, p.url_key) AS row_rank
        FROM hosts h CROSS JOIN LATERAL (
            (SELECT u.shard, u.url_key, u.priority, u.next_fetch_at, u.depth, true AS late
             FROM urls u
             WHERE u.shard = h.s AND u.host_key = h.h AND u.state = 0
               AND u.next_fetch_at < p_overdue
             ORDER BY u.priority DESC, u.next_fetch_at, u.depth, u.url_key LIMIT p_per_host)
            UNION ALL
            (SELECT u.shard, u.url_key, u.priority, u.next_fetch_at, u.depth, false AS late
             FROM urls u
             WHERE u.shard = h.s AND u.host_key = h.h AND u.state = 0
               AND u.next_fetch_at >= p_overdue AND u.next_fetch_at <= p_now
             ORDER BY u.priority DESC, u.next_fetch_at, u.depth, u.url_key LIMIT p_per_host)
        ) AS p
    ), capped AS (
        SELECT * FROM probed WHERE row_rank <= p_per_host
    ), room AS (
        SELECT c.host_rank,
               p_limit - COALESCE(sum(count(*)) OVER (ORDER BY c.host_rank
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS left_over
        FROM capped c GROUP BY c.host_rank
    ), chosen AS (
        SELECT c.shard, c.url_key, c.host_rank, c.row_rank
        FROM capped c JOIN room r ON r.host_rank = c.host_rank
        WHERE c.row_rank <= r.left_over
    ), marked AS (
        UPDATE urls u SET state = 1 FROM chosen c
        WHERE u.shard = c.shard AND u.url_key = c.url_key AND u.state = 0
        RETURNING c.host_rank, c.row_rank, u.shard, u.url_key, u.url, u.host_key, u.depth,
                  u.priority, u.version, u.next_fetch_at, u.redirect_hops, u.etag,
                  u.last_modified, u.failure_count, u.payload_digest, u.change_stats,
                  u.last_fetch_at, u.warc_file, u.simhash, u.sitemap_changefreq,
                  u.sitemap_lastmod, u.redirect_chain
    )
    SELECT row_number() OVER (ORDER BY m.host_rank, m.row_rank), m.shard, m.url_key, m.url,
           m.host_key, m.depth, m.priority, m.version, m.next_fetch_at, m.redirect_hops,
           m.etag, m.last_modified, m.failure_count, m.payload_digest, m.change_stats,
           m.last_fetch_at, m.warc_file, m.simhash, m.sitemap_changefreq, m.sitemap_lastmod,
           m.redirect_chain
    FROM marked m ORDER BY m.host_rank, m.row_rank;

    PERFORM courtier_queue_refresh(v_host_shards, v_hosts);
END;
$$;
