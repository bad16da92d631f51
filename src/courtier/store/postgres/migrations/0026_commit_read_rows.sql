-- courtier PostgreSQL schema, migration 26: a commit of a row read without marking keeps
-- the host queue with one seek per level it left.
--
-- The worker's refill reads rows (courtier_read_due) and no longer marks them SCHEDULED,
-- so every row a commit meets is QUEUED, inside a (host, level) of host_levels and of
-- its host-queue row's arrays. Migration 15's commit sent any batch with such a row to
-- courtier_queue_refresh, which rediscovers every level of each host by a skip scan of
-- urls_queued_rank; now it knows each such row's old level (the priority it had before
-- the update) and recomputes only that level, by one seek — what the marking refill
-- paid (courtier_levels_refresh) — in courtier_queue_commit:
--
-- 1. every host's queue row is locked (or created) first, in key order
--    (courtier_queue_lock): still one key-ordered pass over host_queue per transaction;
-- 2. rows that entered QUEUED — new URLs and every committed row re-queued (from
--    SCHEDULED or from QUEUED) — merge their levels into host_levels as an intake does
--    (the earliest due time per level);
-- 3. each level a committed row left is recomputed by one seek of urls_queued_rank
--    (it runs after 2, so a level the row left and re-entered ends exact);
-- 4. the hosts' queue rows are set from their host_levels (courtier_queue_from_levels,
--    with the level arrays of migration 24).
--
-- A batch whose rows were all SCHEDULED (marked by an older version) keeps migration
-- 15's path (courtier_queue_add). courtier_commit keeps migration 16's generic plan.

CREATE OR REPLACE FUNCTION courtier_queue_commit(p_shards integer[], p_hosts text[], p_priority integer[],
                                      p_add_shards integer[], p_add_hosts text[],
                                      p_add_due double precision[], p_add_prio integer[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
BEGIN
    PERFORM courtier_queue_lock(p_shards || p_add_shards, p_hosts || p_add_hosts);
    INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
    SELECT s, h, p, min(d) FROM unnest(p_add_shards, p_add_hosts, p_add_prio, p_add_due)
        AS t(s, h, p, d)
    WHERE d IS NOT NULL GROUP BY s, h, p ORDER BY s, h, p
    ON CONFLICT (shard, host_key, priority) DO UPDATE
        SET next_due_at = EXCLUDED.next_due_at WHERE EXCLUDED.next_due_at < l.next_due_at;
    WITH t AS (
        SELECT DISTINCT s, h, p FROM unnest(p_shards, p_hosts, p_priority) AS t(s, h, p)
    ), fresh AS (
        SELECT t.s, t.h, t.p,
               (SELECT u.next_fetch_at FROM urls u
                 WHERE u.shard = t.s AND u.host_key = t.h AND u.state = 0 AND u.priority = t.p
                   AND u.next_fetch_at IS NOT NULL
                 ORDER BY u.priority DESC, u.next_fetch_at, u.depth, u.url_key LIMIT 1) AS due
        FROM t
    ), emptied AS (
        DELETE FROM host_levels l USING fresh f
        WHERE l.shard = f.s AND l.host_key = f.h AND l.priority = f.p AND f.due IS NULL
    )
    INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
    SELECT s, h, p, due FROM fresh WHERE due IS NOT NULL ORDER BY s, h, p
    ON CONFLICT (shard, host_key, priority) DO UPDATE SET next_due_at = EXCLUDED.next_due_at
        WHERE l.next_due_at <> EXCLUDED.next_due_at;
    PERFORM courtier_queue_from_levels(p_shards || p_add_shards, p_hosts || p_add_hosts);
END;
$$;

CREATE OR REPLACE FUNCTION courtier_commit(p_commits courtier_commit[], p_new courtier_new_url[],
                                           p_stats courtier_host_delta[],
                                           p_now double precision)
RETURNS integer[] LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET jit = off
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
    v_ls integer[];
    v_lh text[];
    v_lp integer[];
    v_left_shards integer[] := '{}';
    v_left_hosts text[] := '{}';
    v_left_prio integer[] := '{}';
    v_add_shards integer[] := '{}';
    v_add_hosts text[] := '{}';
    v_add_due double precision[] := '{}';
    v_add_prio integer[] := '{}';
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
            SELECT r.*, o.state AS old_state, o.priority AS old_priority
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
                      c.old_priority,
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
               array_agg(d.shard ORDER BY d.shard, d.url_key) FILTER (WHERE d.old_state = 0),
               array_agg(d.host_key ORDER BY d.shard, d.url_key) FILTER (WHERE d.old_state = 0),
               array_agg(d.old_priority ORDER BY d.shard, d.url_key) FILTER (WHERE d.old_state = 0)
        INTO v_done, v_rs, v_rh, v_as, v_ah, v_ad, v_ap, v_ls, v_lh, v_lp
        FROM (SELECT x.*, x.new_state = 0 AS requeued FROM done x) AS d;
        IF v_done > 0 THEN
            v_applied := v_applied + v_done;
            v_shards := v_shards || v_rs;
            v_hosts := v_hosts || v_rh;
            v_add_shards := v_add_shards || v_as;  -- || NULL (none requeued) adds nothing
            v_add_hosts := v_add_hosts || v_ah;
            v_add_due := v_add_due || v_ad;
            v_add_prio := v_add_prio || v_ap;
            v_left_shards := v_left_shards || v_ls;
            v_left_hosts := v_left_hosts || v_lh;
            v_left_prio := v_left_prio || v_lp;
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
    IF cardinality(v_left_shards) > 0 THEN
        PERFORM courtier_queue_commit(v_left_shards, v_left_hosts, v_left_prio,
                                      v_add_shards, v_add_hosts, v_add_due, v_add_prio);
    ELSIF cardinality(v_add_shards) > 0 THEN
        PERFORM courtier_queue_add(v_add_shards, v_add_hosts, v_add_due, v_add_prio);
    END IF;
    RETURN ARRAY[v_applied, cardinality(p_commits) - v_applied, v_new];
END;
$$;
