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
-- Lost with the NOT EXISTS: on plain PostgreSQL an intake never waits for a commit that
-- updated one of its keys (migration 15); here the unique check of a key whose row a
-- concurrent commit holds waits for that commit (no deadlock seen in the contract suite;
-- not stress-tested on Citus).
CREATE OR REPLACE FUNCTION courtier_add_urls(p_urls courtier_new_url[])
RETURNS integer LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_custom_plan AS $$
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
    -- the host-queue upkeep of any intake (migration 10's function, unchanged here)
    PERFORM courtier_queue_add(v_shards, v_hosts, v_due, v_priority);
    RETURN cardinality(v_shards);
END;
$$;

-- The inserting half, also the commit's intake of discovered links (migration 15's
-- function), without the NOT EXISTS. courtier_add_urls calls it and courtier_queue_add
-- (one row per new URL to the upkeep, not migration 18's one per level).
CREATE OR REPLACE FUNCTION courtier_insert_urls(p_urls courtier_new_url[], OUT o_shards integer[],
                                                OUT o_hosts text[], OUT o_due double precision[],
                                                OUT o_priority integer[])
LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_custom_plan AS $$
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
        ORDER BY n.shard, n.url_key, n.ordinality
        ON CONFLICT DO NOTHING
        RETURNING shard, host_key, next_fetch_at, priority
    )
    SELECT array_agg(shard), array_agg(host_key), array_agg(next_fetch_at), array_agg(priority)
    INTO o_shards, o_hosts, o_due, o_priority FROM added;
END;
$$;
