-- courtier PostgreSQL schema, migration 30 (branch pgcpu, issue 29): the commit's
-- host-queue upkeep and link intake keep their plans for the session.
--
-- pg_stat_statements over a whole crawl (bench/pg_statement_profile.py, 1,000 hosts x 20
-- pages, one worker) put about a sixth of the server's statement time in planning, most
-- of it in the commit's callees, re-planned at every call:
--   * courtier_queue_commit and courtier_insert_urls run with force_custom_plan (3.4 and
--     2.7 ms of planning a call for the level seek and the intake's anti-join, against
--     5.2 and 10 ms of execution: the seek's statement plans the correlated LIMIT 1 over
--     the 16 urls partitions each time);
--   * courtier_queue_lock and courtier_queue_from_levels are SQL-language functions that
--     PostgreSQL cannot inline (they write), and it plans such a function's statements
--     at every call (0.5 and 0.9 ms a call).
-- A custom plan knows the arrays' lengths and nothing else these statements need: the
-- shard, host and level of every probe come from the rows of an unnest, never from a
-- constant, so partitions are pruned at execution time either way. As migration 18 did
-- for courtier_add_urls, sequential scans, hash and merge joins are turned off for them,
-- so the one plan left is the custom plans' (per row, a primary-key or urls_queued_rank
-- probe of one partition), and force_generic_plan keeps it for the session; the two SQL
-- functions become PL/pgSQL (same statements, same results), whose plans are cached and
-- follow the caller's settings.
--
-- Plain PostgreSQL only: a Citus coordinator runs its own forms of these functions
-- (store/postgres/citus/*.sql, applied after the migrations and only when their file
-- changed), which this must not replace or re-tune.
--
-- shards gets fillfactor 50: a lease renewal rewrites every shard row it holds (1,024 a
-- renewal for a lone worker) and, with full pages, ~85 % of those updates were not HOT
-- (a new index entry each); rows move to half-filled pages as they are next updated.
DO $migration$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    ALTER TABLE shards SET (fillfactor = 50);

    CREATE OR REPLACE FUNCTION courtier_queue_lock(p_shards integer[], p_hosts text[])
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO host_queue AS q (shard, host_key, next_due_at, best_priority)
        SELECT DISTINCT s, h, 'infinity'::double precision, 0
        FROM unnest(p_shards, p_hosts) AS t(s, h) ORDER BY s, h
        ON CONFLICT (shard, host_key) DO UPDATE SET best_priority = q.best_priority;
    END;
    $$;

    CREATE OR REPLACE FUNCTION courtier_queue_from_levels(p_shards integer[], p_hosts text[])
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        WITH t AS (
            SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts) AS t(s, h)
        ), agg AS (
            SELECT t.s, t.h, max(l.priority) AS best, min(l.next_due_at) AS due,
                   array_agg(l.priority ORDER BY l.priority DESC) AS ps,
                   array_agg(l.next_due_at ORDER BY l.priority DESC) AS ds
            FROM t LEFT JOIN host_levels l ON l.shard = t.s AND l.host_key = t.h
            GROUP BY t.s, t.h
        ), emptied AS (
            DELETE FROM host_queue q USING agg a
            WHERE q.shard = a.s AND q.host_key = a.h AND a.best IS NULL
        )
        UPDATE host_queue q SET next_due_at = a.due, best_priority = a.best,
                                level_priorities = a.ps, level_due_ats = a.ds
        FROM agg a
        WHERE q.shard = a.s AND q.host_key = a.h AND a.best IS NOT NULL
          AND (q.next_due_at <> a.due OR q.best_priority <> a.best
               OR q.level_priorities <> a.ps OR q.level_due_ats <> a.ds);
    END;
    $$;

    ALTER FUNCTION courtier_queue_commit(integer[], text[], integer[], integer[], text[],
                                         double precision[], integer[])
        SET plan_cache_mode = force_generic_plan SET jit = off
        SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off;
    ALTER FUNCTION courtier_insert_urls(courtier_new_url[])
        SET plan_cache_mode = force_generic_plan SET jit = off
        SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off;
END
$migration$;
