-- courtier PostgreSQL schema, migration 15: a commit writes each row once and refreshes
-- the host queue only where a row's QUEUED state was already counted.
--
-- Two changes to migration 12's courtier_commit, same contract otherwise:
--
-- 1. The URL's refresh-plan value and tier travel in the commit row (two new attributes
--    of courtier_commit) and are set by the same UPDATE, instead of a second UPDATE of
--    every committed row after the function (one row version per commit, not two).
-- 2. host_levels / host_queue are kept exact by difference. A commit normally finds its
--    row SCHEDULED, i.e. outside every level (the refill that leased it refreshed the
--    levels); the row either leaves the queue (no level changes) or re-enters it, which
--    lowers its level's due time like an intake does (courtier_queue_add). Only hosts
--    with a row that was QUEUED before its commit (reset while its fetch was in flight)
--    get migration 13's rediscovery by skip scan.
-- 3. No deadlock between workers. Two workers' commits used to deadlock (seen with two
--    workers on one farm): A updates its rows, then inserts a link to a row of B's
--    shards that B's commit has just updated, waiting for B, while B's insert of a link
--    to one of A's updated rows waits for A. New URLs are now inserted only when no
--    committed row has their key (a NOT EXISTS on the statement's snapshot, which never
--    waits), so an intake waits only for another transaction inserting the same new
--    key, in the same key order. And every function takes host_queue rows in one
--    key-ordered pass per transaction: the commit adds its new URLs and its re-queued
--    rows in one courtier_queue_add (or refreshes all of those hosts at once).
-- Insert the rows of p_urls whose key is not stored yet (see 3. above); returns what
-- was inserted, for the caller's one courtier_queue_add.
CREATE FUNCTION courtier_insert_urls(p_urls courtier_new_url[], OUT o_shards integer[],
                                     OUT o_hosts text[], OUT o_due double precision[],
                                     OUT o_priority integer[])
LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    WITH added AS (
        INSERT INTO urls (shard, url_key, url, host_key, depth, priority, state, version,
                          discovered_at, next_fetch_at, redirect_hops, sitemap_changefreq,
                          sitemap_lastmod, redirect_chain)
        SELECT n.shard, n.url_key, n.url, n.host_key, n.depth, n.priority, 0, 0,
               n.discovered_at, n.next_fetch_at, n.redirect_hops, n.sitemap_changefreq,
               n.sitemap_lastmod, n.redirect_chain
        FROM unnest(p_urls) WITH ORDINALITY AS n
        WHERE NOT EXISTS (SELECT 1 FROM urls u WHERE u.shard = n.shard AND u.url_key = n.url_key)
        ORDER BY n.shard, n.url_key, n.ordinality
        ON CONFLICT DO NOTHING
        RETURNING shard, host_key, next_fetch_at, priority
    )
    SELECT array_agg(shard), array_agg(host_key), array_agg(next_fetch_at), array_agg(priority)
    INTO o_shards, o_hosts, o_due, o_priority FROM added;
END;
$$;

CREATE OR REPLACE FUNCTION courtier_add_urls(p_urls courtier_new_url[])
RETURNS integer LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    v_shards integer[];
    v_hosts text[];
    v_due double precision[];
    v_priority integer[];
BEGIN
    SELECT o_shards, o_hosts, o_due, o_priority INTO v_shards, v_hosts, v_due, v_priority
    FROM courtier_insert_urls(p_urls);
    IF v_shards IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM courtier_queue_add(v_shards, v_hosts, v_due, v_priority);
    RETURN cardinality(v_shards);
END;
$$;

ALTER TYPE courtier_commit ADD ATTRIBUTE value double precision;
ALTER TYPE courtier_commit ADD ATTRIBUTE tier text;

CREATE OR REPLACE FUNCTION courtier_commit(p_commits courtier_commit[], p_new courtier_new_url[],
                                           p_stats courtier_host_delta[],
                                           p_now double precision)
RETURNS integer[] LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan SET jit = off
SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    v_rounds integer;
    v_round integer;
    v_done integer;
    v_applied integer := 0;
    v_new integer := 0;
    v_rs integer[];
    v_rh text[];
    v_shards integer[] := '{}';
    v_hosts text[] := '{}';
    v_committed_hosts text[];
    v_as integer[];
    v_ah text[];
    v_ad double precision[];
    v_ap integer[];
    v_was_queued boolean;
    v_add_shards integer[] := '{}';
    v_add_hosts text[] := '{}';
    v_add_due double precision[] := '{}';
    v_add_prio integer[] := '{}';
    v_full_refresh boolean := false;
BEGIN
    PERFORM 1 FROM shards
    WHERE shard IN (SELECT DISTINCT x.shard FROM unnest(p_commits) AS x)
    ORDER BY shard FOR SHARE;
    -- the epochs read below cannot change before we commit: a takeover waits for us
    SELECT COALESCE(max(n.nth), 0) INTO v_rounds
    FROM (SELECT count(*) AS nth FROM unnest(p_commits) AS x GROUP BY x.shard, x.url_key) AS n;
    v_round := 1;
    WHILE v_round <= v_rounds LOOP
        WITH ranked AS (
            SELECT x.*, row_number() OVER (PARTITION BY x.shard, x.url_key ORDER BY x.ord) AS nth
            FROM unnest(p_commits) AS x
        ), fenced AS (
            SELECT r.*, o.state AS old_state
            FROM ranked r LEFT JOIN shards s ON s.shard = r.shard
            JOIN urls o ON o.shard = r.shard AND o.url_key = r.url_key
            WHERE r.nth = v_round AND COALESCE(s.epoch, 0) = r.epoch
            ORDER BY r.shard, r.url_key
        ), done AS (
            UPDATE urls u SET
                version = u.version + 1, state = c.state, last_fetch_at = c.fetched_at,
                next_fetch_at = c.next_fetch_at, "interval" = c."interval", status = c.status,
                outcome = c.outcome, failure_count = c.failure_count, redirect_to = c.redirect_to,
                error_kind = c.error_kind, robots_digest = c.robots_digest,
                delay_applied = c.delay_applied,
                change_stats = COALESCE(c.change_stats, u.change_stats),
                priority = COALESCE(c.priority, u.priority),
                value = COALESCE(c.value, u.value), tier = COALESCE(c.tier, u.tier),
                etag = CASE WHEN c.fresh THEN c.etag ELSE COALESCE(c.etag, u.etag) END,
                last_modified = CASE WHEN c.fresh THEN c.last_modified
                                     ELSE COALESCE(c.last_modified, u.last_modified) END,
                content_type = CASE WHEN c.fresh THEN c.content_type
                                    ELSE COALESCE(c.content_type, u.content_type) END,
                payload_digest = CASE WHEN c.fresh THEN c.payload_digest
                                      ELSE COALESCE(c.payload_digest, u.payload_digest) END,
                content_length = CASE WHEN c.fresh THEN c.content_length
                                      ELSE COALESCE(c.content_length, u.content_length) END,
                title = CASE WHEN c.fresh THEN c.title ELSE COALESCE(c.title, u.title) END,
                simhash = CASE WHEN c.fresh THEN c.simhash ELSE COALESCE(c.simhash, u.simhash) END,
                near_dup_of = CASE WHEN c.fresh THEN c.near_dup_of
                                   ELSE COALESCE(c.near_dup_of, u.near_dup_of) END,
                warc_file = CASE WHEN c.fresh THEN c.warc_file
                                 ELSE COALESCE(c.warc_file, u.warc_file) END,
                warc_offset = CASE WHEN c.fresh THEN c.warc_offset
                                   ELSE COALESCE(c.warc_offset, u.warc_offset) END,
                warc_length = CASE WHEN c.fresh THEN c.warc_length
                                   ELSE COALESCE(c.warc_length, u.warc_length) END
            FROM fenced c
            WHERE u.shard = c.shard AND u.url_key = c.url_key AND u.version = c.version
              AND u.state IN (0, 1)
            RETURNING c.ord, c.shard, c.url_key, c.url, c.host_key, c.version, c.fetched_at,
                      c.status, c.outcome, c.robots_digest, c.delay_applied, c.error_kind,
                      c.payload_digest, c.warc_file, c.warc_offset, c.payload, c.old_state,
                      u.state AS new_state, u.next_fetch_at AS new_due, u.priority AS new_priority
        ), logged_events AS (
            INSERT INTO events (shard, url_key, version, created_at, payload)
            SELECT d.shard, d.url_key, d.version + 1, p_now, d.payload FROM done d
            ORDER BY d.shard, d.url_key
            ON CONFLICT DO NOTHING
        ), logged_fetches AS (
            INSERT INTO fetch_log (shard, url_key, version, fetched_at, status, outcome,
                                   robots_digest, delay_applied, error_kind)
            SELECT d.shard, d.url_key, d.version + 1, d.fetched_at, d.status, d.outcome,
                   d.robots_digest, d.delay_applied, d.error_kind FROM done d
            ORDER BY d.shard, d.url_key
        ), indexed AS (
            INSERT INTO payloads (digest, warc_file, warc_offset, url, fetched_at)
            SELECT d.payload_digest, d.warc_file, d.warc_offset, d.url, d.fetched_at FROM done d
            WHERE d.payload_digest IS NOT NULL AND d.payload_digest <> ''
              AND d.warc_file IS NOT NULL AND d.warc_offset IS NOT NULL
            ORDER BY d.shard, d.url_key
            ON CONFLICT DO NOTHING
        )
        SELECT count(*), array_agg(d.shard ORDER BY d.shard, d.url_key),
               array_agg(d.host_key ORDER BY d.shard, d.url_key),
               array_agg(d.shard ORDER BY d.shard, d.url_key) FILTER (WHERE d.requeued),
               array_agg(d.host_key ORDER BY d.shard, d.url_key) FILTER (WHERE d.requeued),
               array_agg(d.new_due ORDER BY d.shard, d.url_key) FILTER (WHERE d.requeued),
               array_agg(d.new_priority ORDER BY d.shard, d.url_key) FILTER (WHERE d.requeued),
               bool_or(d.old_state = 0)
        INTO v_done, v_rs, v_rh, v_as, v_ah, v_ad, v_ap, v_was_queued
        FROM (SELECT x.*, x.old_state <> 0 AND x.new_state = 0 AS requeued FROM done x) AS d;
        IF v_done > 0 THEN
            v_applied := v_applied + v_done;
            v_shards := v_shards || v_rs;
            v_hosts := v_hosts || v_rh;
            v_add_shards := v_add_shards || v_as;  -- || NULL (none requeued) adds nothing
            v_add_hosts := v_add_hosts || v_ah;
            v_add_due := v_add_due || v_ad;
            v_add_prio := v_add_prio || v_ap;
            v_full_refresh := v_full_refresh OR v_was_queued;
        END IF;
        v_round := v_round + 1;
    END LOOP;
    IF cardinality(p_new) > 0 THEN
        SELECT o_shards, o_hosts, o_due, o_priority INTO v_as, v_ah, v_ad, v_ap
        FROM courtier_insert_urls(p_new);
        v_new := COALESCE(cardinality(v_as), 0);
        v_add_shards := v_add_shards || v_as;
        v_add_hosts := v_add_hosts || v_ah;
        v_add_due := v_add_due || v_ad;
        v_add_prio := v_add_prio || v_ap;
    END IF;
    SELECT COALESCE(array_agg(DISTINCT x.host_key), '{}') INTO v_committed_hosts
    FROM unnest(p_commits) AS x;
    INSERT INTO hosts AS h (shard, host_key, fetched, errors, bytes, ttfb_sum, status_2xx,
                            status_3xx, status_4xx, status_5xx, updated_at)
    SELECT d.shard, d.host_key, sum(d.fetched), sum(d.errors), sum(d.bytes), sum(d.ttfb_sum),
           sum(d.status_2xx), sum(d.status_3xx), sum(d.status_4xx), sum(d.status_5xx), p_now
    FROM unnest(p_stats) AS d
    WHERE d.host_key = ANY(v_hosts) OR NOT d.host_key = ANY(v_committed_hosts)
    GROUP BY d.shard, d.host_key ORDER BY d.shard, d.host_key
    ON CONFLICT (shard, host_key) DO UPDATE SET
        fetched = h.fetched + EXCLUDED.fetched, errors = h.errors + EXCLUDED.errors,
        bytes = h.bytes + EXCLUDED.bytes, ttfb_sum = h.ttfb_sum + EXCLUDED.ttfb_sum,
        status_2xx = h.status_2xx + EXCLUDED.status_2xx,
        status_3xx = h.status_3xx + EXCLUDED.status_3xx,
        status_4xx = h.status_4xx + EXCLUDED.status_4xx,
        status_5xx = h.status_5xx + EXCLUDED.status_5xx, updated_at = EXCLUDED.updated_at;
    -- one key-ordered pass over host_queue either way (see the header)
    IF v_full_refresh THEN
        PERFORM courtier_queue_refresh(v_shards || v_add_shards, v_hosts || v_add_hosts);
    ELSIF cardinality(v_add_shards) > 0 THEN
        PERFORM courtier_queue_add(v_add_shards, v_add_hosts, v_add_due, v_add_prio);
    END IF;
    RETURN ARRAY[v_applied, cardinality(p_commits) - v_applied, v_new];
END;
$$;
