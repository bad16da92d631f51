-- courtier on Citus: the commit's host-queue upkeep (courtier_queue_commit, migration 26),
-- replacing the plain form on a Citus coordinator only (store/postgres/_citus.py applies
-- this file after distributing the tables; plain PostgreSQL never runs it).
--
-- What differs, and why: the plain form finds each left (host, level)'s new best due time
-- with a correlated subquery over the batch's levels, which Citus refuses ("correlated
-- subqueries are not supported when the FROM clause contains a CTE or subquery"). Here a
-- loop asks for each level's best row with one router query (the level's shard is the
-- distribution key of urls and host_levels), then deletes the level or writes its new
-- time, as the plain form does. One coordinator-to-node round trip per level a committed
-- QUEUED row left: the cost the plain form pays as one seek per level, plus the network.
-- As in the plain form since migration 37, only the hosts whose levels may have changed
-- are recomputed from their levels: every host with a level entered (the upsert does not
-- say which it changed: a superset) and each host a left level was deleted or moved
-- for; a batch that changed none skips the two recomputing statements.
CREATE OR REPLACE FUNCTION courtier_queue_commit(p_shards integer[], p_hosts text[],
                                                 p_priority integer[],
                                                 p_add_shards integer[], p_add_hosts text[],
                                                 p_add_due double precision[],
                                                 p_add_prio integer[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_level record;
    v_due double precision;
    v_s integer[] := p_add_shards;  -- the hosts to recompute from their levels
    v_h text[] := p_add_hosts;
BEGIN
    PERFORM courtier_queue_lock(p_shards || p_add_shards, p_hosts || p_add_hosts);
    PERFORM courtier_levels_enter(p_add_shards, p_add_hosts, p_add_prio, p_add_due);
    FOR v_level IN
        SELECT DISTINCT s, h, p FROM unnest(p_shards, p_hosts, p_priority) AS t(s, h, p)
        ORDER BY s, h, p
    LOOP
        v_due := NULL;
        SELECT u.next_fetch_at INTO v_due FROM urls u
        WHERE u.shard = v_level.s AND u.host_key = v_level.h AND u.state = 0
          AND u.priority = v_level.p AND u.next_fetch_at IS NOT NULL
        ORDER BY u.next_fetch_at, u.depth, u.url_key LIMIT 1;
        IF v_due IS NULL THEN
            DELETE FROM host_levels l
            WHERE l.shard = v_level.s AND l.host_key = v_level.h AND l.priority = v_level.p;
        ELSE
            INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
            VALUES (v_level.s, v_level.h, v_level.p, v_due)
            ON CONFLICT (shard, host_key, priority) DO UPDATE
                SET next_due_at = EXCLUDED.next_due_at
                WHERE l.next_due_at <> EXCLUDED.next_due_at;
        END IF;
        IF FOUND THEN  -- the level was deleted, made or moved
            v_s := v_s || v_level.s;
            v_h := v_h || v_level.h;
        END IF;
    END LOOP;
    IF cardinality(v_s) > 0 THEN
        PERFORM courtier_queue_from_levels(v_s, v_h);
    END IF;
END;
$$;
