-- courtier PostgreSQL schema, migration 18: the intake in one function, three statements,
-- and without a speculative insertion per row when no other transaction gets in the way.
--
-- courtier_add_urls (migration 15) called courtier_insert_urls (the INSERT, returning four
-- arrays of every inserted row) and then courtier_queue_add, which unnested those arrays
-- twice and grouped them twice. Each call also set and restored its own settings (jit,
-- plan_cache_mode). Now one function runs three statements:
--
-- 1. The INSERT of the keys that have no committed row yet (the NOT EXISTS of migration
--    15, which never waits: no deadlock with commits), in (shard, url_key) order, first
--    occurrence of a key in the batch winning. It is a plain INSERT, not ON CONFLICT DO
--    NOTHING: a speculative insertion costs a second probe of the primary key, a
--    speculative lock and a confirmation record in the WAL per row, about 20 % of the
--    intake's server time at 1 M known URLs. A plain INSERT fails only when another
--    transaction inserted one of the same new keys and committed before us (our insert
--    waited for it, in key order, as before). It runs in a subtransaction (the EXCEPTION
--    block): on unique_violation it is rolled back and the batch is inserted again with
--    ON CONFLICT DO NOTHING, exactly migration 15's statement. The same statement returns
--    the new rows grouped by (host, level) (count, earliest due time), so the host-queue
--    upkeep reads one row per level instead of one per URL.
-- 2. host_queue upsert from those levels, in (shard, host_key) order.
-- 3. host_levels upsert, in (shard, host_key, priority) order.
-- The lock order is unchanged: urls keys in key order, then host_queue, then host_levels.
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
    INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority)
    SELECT s, h, min(d), max(p) FROM unnest(v_shards, v_hosts, v_priority, v_due) AS t(s, h, p, d)
    WHERE d IS NOT NULL GROUP BY s, h ORDER BY s, h
    ON CONFLICT (shard, host_key) DO UPDATE
        SET next_due_at = LEAST(q.next_due_at, EXCLUDED.next_due_at),
            best_priority = GREATEST(q.best_priority, EXCLUDED.best_priority)
        WHERE EXCLUDED.next_due_at < q.next_due_at OR EXCLUDED.best_priority > q.best_priority;
    INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
    SELECT s, h, p, d FROM unnest(v_shards, v_hosts, v_priority, v_due) AS t(s, h, p, d)
    WHERE d IS NOT NULL ORDER BY s, h, p
    ON CONFLICT (shard, host_key, priority) DO UPDATE
        SET next_due_at = EXCLUDED.next_due_at WHERE EXCLUDED.next_due_at < l.next_due_at;
    RETURN v_added;
END;
$$;

-- No JIT for a batch of a few hundred rows. Generic plans, kept for the session: planning
-- the three statements was ~15 % of the function's server time. A generic plan is made
-- without the batch and may be made while the tables are small (a new crawl), which once
-- gave the anti-join a hash join over all of urls (257 ms a call, migration 16's note).
-- With sequential scans, hash and merge joins off, the only plan left for every statement
-- here is what the custom plans were: per row, a primary-key probe of one partition.
ALTER FUNCTION courtier_add_urls(courtier_new_url[])
    SET jit = off SET plan_cache_mode = force_generic_plan
    SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off;
