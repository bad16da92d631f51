-- courtier PostgreSQL schema, migration 3: the two-level refill (the Store.load_due contract in store/base.py).
--
-- Level 1: the best ready hosts of the requested shards from host_queue (a host is
-- ready when next_due_at <= now, i.e. it has a due QUEUED row), overdue hosts first,
-- then best_priority DESC, next_due_at, host_key; at most p_limit hosts.
-- Level 2: per host, a LATERAL probe of at most p_per_host rows on the partial index
-- urls_queued_rank (overdue rows, then the other due rows, each in rank order).
-- The walk then gives host i the first min(per_host, limit - taken) of its rows.
-- Cost: O(hosts returned × per_host) index probes, independent of the backlog.
-- Per-shard advisory locks serialise refills of one shard (a shard has one owner,
-- so they are uncontended in production; they keep concurrent refills exact).
CREATE FUNCTION courtier_load_due(p_shards integer[], p_now double precision,
                                  p_overdue double precision, p_limit integer,
                                  p_per_host integer, p_skip text[])
RETURNS TABLE (walk bigint, shard integer, url_key bytea, url text, host_key text,
               depth integer, priority integer, version integer,
               next_fetch_at double precision, redirect_hops integer, etag text,
               last_modified text, failure_count integer, payload_digest text,
               change_stats text, last_fetch_at double precision, warc_file text,
               simhash bigint, sitemap_changefreq text, sitemap_lastmod double precision)
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
                  u.sitemap_lastmod
    )
    SELECT row_number() OVER (ORDER BY m.host_rank, m.row_rank), m.shard, m.url_key, m.url,
           m.host_key, m.depth, m.priority, m.version, m.next_fetch_at, m.redirect_hops,
           m.etag, m.last_modified, m.failure_count, m.payload_digest, m.change_stats,
           m.last_fetch_at, m.warc_file, m.simhash, m.sitemap_changefreq, m.sitemap_lastmod
    FROM marked m ORDER BY m.host_rank, m.row_rank;

    PERFORM courtier_queue_refresh(v_host_shards, v_hosts);
END;
$$;
