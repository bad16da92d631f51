-- courtier on Citus: the intake (courtier_add_urls and the commit's courtier_insert_urls),
-- replacing migrations 15 and 18's versions on a Citus coordinator only
-- (store/postgres/_citus.py applies this file after distributing the tables, at every
-- open; plain PostgreSQL never runs it).
--
-- What differs, and why:
-- * No `WHERE NOT EXISTS (SELECT 1 FROM urls …)`: Citus refuses a correlated subquery
--   when the FROM clause is a set-returning function (`unnest`). The batch is inserted
--   with `ON CONFLICT DO NOTHING` directly, which is migration 18's fallback statement.
--   Citus plans it as an INSERT … SELECT through the coordinator: the batch is evaluated
--   there, each row routed to the Citus shard that holds its `shard` value.
-- * Custom plans (`plan_cache_mode = force_custom_plan`): with migration 18's generic
--   plans Citus cannot build a distributed plan of a statement whose values are
--   parameters ("could not create distributed plan").
-- * The NOT EXISTS as a statement of its own: the keys of the batch that have a row are
--   read first (a join of the batch with urls, which Citus runs as an intermediate result
--   pushed to the nodes) and left out of the INSERT. Without it the unique check of a key
--   whose row a concurrent commit had updated waited for that commit, and two workers'
--   commits whose pages linked to each other's rows deadlocked ("deadlock detected" in
--   a 2-worker crawl on Citus, CI of 2026-12-06; migration 15 says why plain PostgreSQL
--   never waits). What can still wait: two transactions inserting the same new key.
-- * One Citus shard of urls at a time, in Citus shard order (the batch's rows of that
--   Citus shard, in batch order), each part inserted and entered in the host queue before
--   the next: the commit's lock order (citus/commit.sql, courtier_commit_routed). Taken
--   whole, the batch's new keys were locked in every Citus shard before its host-queue
--   rows (Citus runs a multi-row INSERT one Citus shard after another), and a commit
--   holding a host-queue row of a lower Citus shard, about to insert one of those keys (a
--   link to the same new URL) in a higher one, closed a cycle with it
--   (tests/integration/store/test_citus_commit_lock_order.py).
CREATE OR REPLACE FUNCTION courtier_add_urls(p_urls courtier_new_url[])
RETURNS integer LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_group record;
    v_added integer := 0;
    v_shards integer[];
    v_hosts text[];
    v_due double precision[];
    v_priority integer[];
BEGIN
    FOR v_group IN
        SELECT get_shard_id_for_distribution_column('urls', t.s) AS c,
               array_agg(t.s ORDER BY t.s) AS shards
        FROM (SELECT DISTINCT n.shard FROM unnest(p_urls) AS n) AS t(s)
        GROUP BY 1 ORDER BY 1
    LOOP
        SELECT o_shards, o_hosts, o_due, o_priority INTO v_shards, v_hosts, v_due, v_priority
        FROM courtier_insert_urls(ARRAY(SELECT p_urls[i] FROM generate_subscripts(p_urls, 1) AS i
                                        WHERE (p_urls[i]).shard = ANY(v_group.shards)
                                        ORDER BY i));
        IF v_shards IS NOT NULL THEN
            -- the host-queue upkeep of any intake (migration 24's courtier_queue_add,
            -- which calls courtier_queue_enter: its Citus form below)
            PERFORM courtier_queue_add(v_shards, v_hosts, v_due, v_priority);
            v_added := v_added + cardinality(v_shards);
        END IF;
    END LOOP;
    RETURN v_added;
END;
$$;

-- The inserting half, also the commit's intake of discovered links (migration 15's
-- function), without the NOT EXISTS. courtier_add_urls calls it and courtier_queue_add
-- (one row per new URL to the upkeep, not migration 18's one per level).
CREATE OR REPLACE FUNCTION courtier_insert_urls(p_urls courtier_new_url[], OUT o_shards integer[],
                                                OUT o_hosts text[], OUT o_due double precision[],
                                                OUT o_priority integer[])
LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_custom_plan
SET extra_float_digits = 1 AS $$
DECLARE
    v_shards integer[];
    v_known bytea[];
    v_rows text;
    v_added record;
BEGIN
    -- the keys that have a row (read by snapshot: a row another transaction is updating
    -- is seen, never waited for); on the batch's shards only, which Citus prunes by (the
    -- join alone runs on every Citus shard of urls, on every node)
    SELECT array_agg(DISTINCT n.shard) INTO v_shards FROM unnest(p_urls) AS n;
    SELECT COALESCE(array_agg(u.url_key), '{}') INTO v_known
    FROM urls u JOIN unnest(p_urls) AS n ON u.shard = n.shard AND u.url_key = n.url_key
    WHERE u.shard = ANY(v_shards);
    -- the new rows as a router VALUES list (citus/commit.sql says why), first of each key
    SELECT string_agg(format('(%L, %L, %L, %L, %L, %L, 0, 0, %L, %L, %L, %L, %L, %L)',
                             n.shard, n.url_key, n.url, n.host_key, n.depth, n.priority,
                             n.discovered_at, n.next_fetch_at, n.redirect_hops,
                             n.sitemap_changefreq, n.sitemap_lastmod, n.redirect_chain),
                      ', ' ORDER BY n.shard, n.url_key)
    INTO v_rows
    FROM (SELECT DISTINCT ON (n.shard, n.url_key) n.*
          FROM unnest(p_urls) WITH ORDINALITY AS n
          WHERE NOT n.url_key = ANY(v_known)  -- a url_key names its shard (core/urls.py)
          ORDER BY n.shard, n.url_key, n.ordinality) AS n;
    IF v_rows IS NULL THEN
        RETURN;
    END IF;
    FOR v_added IN EXECUTE
        'INSERT INTO urls (shard, url_key, url, host_key, depth, priority, state, version,'
        || ' discovered_at, next_fetch_at, redirect_hops, sitemap_changefreq,'
        || ' sitemap_lastmod, redirect_chain) VALUES ' || v_rows
        || ' ON CONFLICT DO NOTHING RETURNING shard, host_key, next_fetch_at, priority'
    LOOP
        o_shards := o_shards || v_added.shard;
        o_hosts := o_hosts || v_added.host_key;
        o_due := o_due || v_added.next_fetch_at;
        o_priority := o_priority || v_added.priority;
    END LOOP;
END;
$$;

-- Rows entered QUEUED, as (shard, host, priority, due): migration 24's function, whose
-- upserts merge the level arrays with correlated subqueries over `unnest` of the row's
-- own arrays under generic plans ("could not create distributed plan" on Citus). Here:
-- host_queue first (the lock order of every function: a row made for a new host, an
-- existing row locked by a no-op upsert), then the levels' upsert as in the plain form,
-- then the hosts' rows recomputed from their levels (courtier_queue_from_levels, Citus
-- form in refill.sql: one pushed-down UPDATE per call, level arrays included). Unlike the
-- plain form, every host of the batch has its host_queue row written, not only hosts
-- whose level is new or earlier.
CREATE OR REPLACE FUNCTION courtier_queue_enter(p_shards integer[], p_hosts text[],
                                                p_priority integer[], p_due double precision[])
RETURNS void LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_s integer[];
    v_h text[];
BEGIN
    SELECT array_agg(t.s ORDER BY t.s, t.h), array_agg(t.h ORDER BY t.s, t.h) INTO v_s, v_h
    FROM (SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts, p_due) AS t(s, h, d)
          WHERE d IS NOT NULL) AS t;
    IF v_s IS NULL THEN
        RETURN;  -- levels whose rows all have no due time enter no queue
    END IF;
    PERFORM courtier_queue_lock(v_s, v_h);
    PERFORM courtier_levels_enter(p_shards, p_hosts, p_priority, p_due);
    PERFORM courtier_queue_from_levels(v_s, v_h);
END;
$$;

-- Rows entered QUEUED merge their levels: the earliest due time per (shard, host,
-- priority), upserted as a router VALUES list (citus/commit.sql says why); rows without
-- a due time enter no level. The intake's and the commit's upkeep (courtier_queue_enter,
-- courtier_queue_commit).
CREATE OR REPLACE FUNCTION courtier_levels_enter(p_shards integer[], p_hosts text[],
                                                 p_priority integer[],
                                                 p_due double precision[])
RETURNS void LANGUAGE plpgsql SET extra_float_digits = 1 AS $$
DECLARE
    v_rows text;
BEGIN
    SELECT string_agg(format('(%L, %L, %L, %L)', g.s, g.h, g.p, g.d), ', '
                      ORDER BY g.s, g.h, g.p)
    INTO v_rows
    FROM (SELECT s, h, p, min(d) AS d FROM unnest(p_shards, p_hosts, p_priority, p_due)
              AS t(s, h, p, d)
          WHERE d IS NOT NULL GROUP BY s, h, p) AS g;
    IF v_rows IS NULL THEN
        RETURN;
    END IF;
    EXECUTE 'INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at) VALUES '
        || v_rows || ' ON CONFLICT (shard, host_key, priority) DO UPDATE'
        || ' SET next_due_at = EXCLUDED.next_due_at WHERE EXCLUDED.next_due_at < l.next_due_at';
END;
$$;
