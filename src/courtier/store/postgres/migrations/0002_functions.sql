-- courtier PostgreSQL schema, migration 2: the batch functions. Each store call is
-- one round trip: the Python side passes arrays (of the row types of migration 1)
-- and one function does the whole transaction's work. All run in READ COMMITTED;
-- every statement of a VOLATILE PL/pgSQL function takes a fresh snapshot, which the
-- host-queue maintenance relies on (lock first, then read, in two statements).

-- Hosts gained QUEUED rows (intake, release, reset): lower next_due_at / raise
-- best_priority. Exact without reading urls, because adding rows to Q(h) can only
-- move the min down and the max up. Rows are upserted in key order (no deadlocks).
CREATE FUNCTION courtier_queue_add(p_shards integer[], p_hosts text[],
                                   p_due double precision[], p_priority integer[])
RETURNS void LANGUAGE sql AS $$
    INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority)
    SELECT s, h, min(d), max(p) FROM unnest(p_shards, p_hosts, p_due, p_priority) AS t(s, h, d, p)
    GROUP BY s, h ORDER BY s, h
    ON CONFLICT (shard, host_key) DO UPDATE
        SET next_due_at = LEAST(q.next_due_at, EXCLUDED.next_due_at),
            best_priority = GREATEST(q.best_priority, EXCLUDED.best_priority);
$$;

-- Hosts lost or changed QUEUED rows (refill, commit): recompute their queue rows.
-- Statement 1 locks (or creates) the rows in key order; statement 2, with a snapshot
-- taken after the locks were granted, sees every transaction that touched these
-- hosts before us, and any later one waits for our lock and recomputes after us.
-- Both min and max are single index probes (urls_queued_host_due, urls_queued_rank).
CREATE FUNCTION courtier_queue_refresh(p_shards integer[], p_hosts text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority)
    SELECT DISTINCT s, h, 'infinity'::double precision, 0
    FROM unnest(p_shards, p_hosts) AS t(s, h) ORDER BY s, h
    ON CONFLICT (shard, host_key) DO UPDATE SET best_priority = q.best_priority;

    WITH touched AS (
        SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts) AS t(s, h)
    ), fresh AS (
        SELECT t.s, t.h,
               (SELECT u.next_fetch_at FROM urls u
                 WHERE u.shard = t.s AND u.host_key = t.h AND u.state = 0
                 ORDER BY u.next_fetch_at LIMIT 1) AS due,
               (SELECT u.priority FROM urls u
                 WHERE u.shard = t.s AND u.host_key = t.h AND u.state = 0
                 ORDER BY u.priority DESC LIMIT 1) AS best
        FROM touched t
    ), emptied AS (
        DELETE FROM host_queue q USING fresh f
        WHERE q.shard = f.s AND q.host_key = f.h AND f.due IS NULL
    )
    UPDATE host_queue q SET next_due_at = f.due, best_priority = f.best
    FROM fresh f WHERE q.shard = f.s AND q.host_key = f.h AND f.due IS NOT NULL;
END;
$$;

-- Intake: insert the new rows (sorted by key: concurrent writers take the unique
-- index entries in the same order, so they cannot deadlock), queue their hosts.
CREATE FUNCTION courtier_add_urls(p_urls courtier_new_url[])
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
                          sitemap_lastmod)
        SELECT n.shard, n.url_key, n.url, n.host_key, n.depth, n.priority, 0, 0,
               n.discovered_at, n.next_fetch_at, n.redirect_hops, n.sitemap_changefreq,
               n.sitemap_lastmod
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

-- Commit: epoch-fenced, version-conditional, exactly once. The shard rows are read
-- FOR SHARE, so a takeover (which bumps the epoch) waits for us or we wait for it.
-- Commits are applied in (shard, url_key, batch order): rows are locked in key order,
-- and two commits of one row in a batch behave as if sent one after the other.
CREATE FUNCTION courtier_commit(p_commits courtier_commit[], p_new courtier_new_url[],
                                p_stats courtier_host_delta[], p_now double precision)
RETURNS integer[] LANGUAGE plpgsql AS $$
DECLARE
    c courtier_commit;
    v_epochs jsonb;
    v_applied integer := 0;
    v_stale integer := 0;
    v_new integer := 0;
    v_shards integer[] := '{}';
    v_hosts text[] := '{}';
    v_applied_hosts text[] := '{}';
    v_committed_hosts text[];
BEGIN
    SELECT COALESCE(jsonb_object_agg(s.shard::text, s.epoch), '{}'::jsonb) INTO v_epochs
    FROM (SELECT shard, epoch FROM shards
          WHERE shard IN (SELECT DISTINCT x.shard FROM unnest(p_commits) AS x)
          ORDER BY shard FOR SHARE) AS s;
    FOR c IN SELECT * FROM unnest(p_commits) AS x ORDER BY x.shard, x.url_key, x.ord LOOP
        IF COALESCE((v_epochs ->> c.shard::text)::bigint, 0) <> c.epoch THEN
            v_stale := v_stale + 1;
            CONTINUE;
        END IF;
        UPDATE urls u SET
            version = u.version + 1, state = c.state, last_fetch_at = c.fetched_at,
            next_fetch_at = c.next_fetch_at, "interval" = c."interval", status = c.status,
            outcome = c.outcome, failure_count = c.failure_count, redirect_to = c.redirect_to,
            error_kind = c.error_kind, robots_digest = c.robots_digest,
            delay_applied = c.delay_applied,
            change_stats = COALESCE(c.change_stats, u.change_stats),
            priority = COALESCE(c.priority, u.priority),
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
            warc_file = CASE WHEN c.fresh THEN c.warc_file ELSE COALESCE(c.warc_file, u.warc_file) END,
            warc_offset = CASE WHEN c.fresh THEN c.warc_offset
                               ELSE COALESCE(c.warc_offset, u.warc_offset) END,
            warc_length = CASE WHEN c.fresh THEN c.warc_length
                               ELSE COALESCE(c.warc_length, u.warc_length) END
        WHERE u.shard = c.shard AND u.url_key = c.url_key AND u.version = c.version
          AND u.state IN (0, 1);
        IF NOT FOUND THEN
            v_stale := v_stale + 1;
            CONTINUE;
        END IF;
        v_applied := v_applied + 1;
        v_shards := v_shards || c.shard;
        v_hosts := v_hosts || c.host_key;
        v_applied_hosts := v_applied_hosts || c.host_key;
        INSERT INTO events (shard, url_key, version, created_at, payload)
        VALUES (c.shard, c.url_key, c.version + 1, p_now, c.payload)
        ON CONFLICT DO NOTHING;
        INSERT INTO fetch_log (shard, url_key, version, fetched_at, status, outcome,
                               robots_digest, delay_applied, error_kind)
        VALUES (c.shard, c.url_key, c.version + 1, c.fetched_at, c.status, c.outcome,
                c.robots_digest, c.delay_applied, c.error_kind);
        IF c.payload_digest IS NOT NULL AND c.payload_digest <> '' AND c.warc_file IS NOT NULL
           AND c.warc_offset IS NOT NULL THEN
            INSERT INTO payloads (digest, warc_file, warc_offset, url, fetched_at)
            VALUES (c.payload_digest, c.warc_file, c.warc_offset, c.url, c.fetched_at)
            ON CONFLICT DO NOTHING;
        END IF;
    END LOOP;
    IF cardinality(p_new) > 0 THEN
        v_new := courtier_add_urls(p_new);
    END IF;
    SELECT COALESCE(array_agg(DISTINCT x.host_key), '{}') INTO v_committed_hosts
    FROM unnest(p_commits) AS x;
    INSERT INTO hosts AS h (shard, host_key, fetched, errors, bytes, ttfb_sum, status_2xx,
                            status_3xx, status_4xx, status_5xx, updated_at)
    SELECT d.shard, d.host_key, sum(d.fetched), sum(d.errors), sum(d.bytes), sum(d.ttfb_sum),
           sum(d.status_2xx), sum(d.status_3xx), sum(d.status_4xx), sum(d.status_5xx), p_now
    FROM unnest(p_stats) AS d
    WHERE d.host_key = ANY(v_applied_hosts) OR NOT d.host_key = ANY(v_committed_hosts)
    GROUP BY d.shard, d.host_key ORDER BY d.shard, d.host_key
    ON CONFLICT (shard, host_key) DO UPDATE SET
        fetched = h.fetched + EXCLUDED.fetched, errors = h.errors + EXCLUDED.errors,
        bytes = h.bytes + EXCLUDED.bytes, ttfb_sum = h.ttfb_sum + EXCLUDED.ttfb_sum,
        status_2xx = h.status_2xx + EXCLUDED.status_2xx,
        status_3xx = h.status_3xx + EXCLUDED.status_3xx,
        status_4xx = h.status_4xx + EXCLUDED.status_4xx,
        status_5xx = h.status_5xx + EXCLUDED.status_5xx, updated_at = EXCLUDED.updated_at;
    IF v_applied > 0 THEN
        PERFORM courtier_queue_refresh(v_shards, v_hosts);
    END IF;
    RETURN ARRAY[v_applied, v_stale, v_new];
END;
$$;

-- The outbox sequencer. Events get a read read_pos (dense, increasing) only once
-- their transaction id is below the xmin of a snapshot taken after the sequencer
-- lock: every transaction that could still add an event has an xid >= that xmin,
-- so no event can later appear below a read_pos already handed out. The advisory
-- lock (it assigns no xid, unlike a row lock) serialises sequencers; positions are
-- given in (xid, id) order.
CREATE FUNCTION courtier_read_events(p_after bigint, p_limit integer)
RETURNS TABLE (read_pos bigint, url_key bytea, version integer, created_at double precision,
               payload text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_horizon xid8;
    v_last bigint;
    v_count integer;
BEGIN
    PERFORM pg_advisory_xact_lock(1129270868, 0);
    v_horizon := pg_snapshot_xmin(pg_current_snapshot());
    SELECT s.last_position INTO v_last FROM outbox_sequencer s;
    WITH ready AS (
        SELECT e.id, row_number() OVER (ORDER BY e.xid, e.id) AS rn
        FROM events e WHERE e.read_pos IS NULL AND e.xid < v_horizon
    ), placed AS (
        UPDATE events e SET read_pos = v_last + r.rn FROM ready r WHERE e.id = r.id
        RETURNING 1
    )
    SELECT count(*) INTO v_count FROM placed;
    IF v_count > 0 THEN
        UPDATE outbox_sequencer SET last_position = v_last + v_count;
    END IF;
    RETURN QUERY
        SELECT e.read_pos, e.url_key, e.version, e.created_at, e.payload FROM events e
        WHERE e.read_pos IS NOT NULL AND e.read_pos > p_after
        ORDER BY e.read_pos LIMIT p_limit;
END;
$$;
