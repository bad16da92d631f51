-- courtier PostgreSQL schema, migration 41: two costs the store paid once a row where it
-- meant to pay them once a statement.
--
-- 1. The commit's events took their shard positions from `head_list`, a CTE meant to be
--    one row made once from the heads the same statement had just advanced (migration
--    32: "no join of the events with the heads"). PostgreSQL inlined it into the events
--    insert's join, so its two array_agg ran again for every event row over every
--    advanced head: batch x shards rows (auto_explain on a crawl: loops=203 over 176 heads
--    for one batch of 203 results, 8.7 ms of the statement's 37.7). MATERIALIZED makes it
--    the one row it was meant to be; the positions and every other row are unchanged.
--    Rewritten from the installed definition, as migration 32 did (one source of the
--    body); citus/commit.sql's plain fragment says MATERIALIZED too. A Citus coordinator
--    whose commit is already the Citus form (no such CTE) is left to citus/commit.sql,
--    which rebuilds it from that fragment at the next open.
--
-- 2. courtier_payload_locations (migration 36) was a SQL function with a SET clause,
--    which PostgreSQL 15 neither inlines nor keeps a plan for: its one statement was
--    planned at every call (~80 µs; 2,224 calls in a one-worker crawl of the realistic
--    1,000 x 20 web, a third of the look-up's server time). As PL/pgSQL it keeps a
--    generic plan for the session: the same probes of the payloads key (sequential scans
--    stay off), the same rows.
DO $$
DECLARE
    v_fn regprocedure := ('courtier_commit(courtier_commit[], courtier_new_url[],'
                          || ' courtier_host_delta[], double precision)')::regprocedure;
    v_def text := pg_get_functiondef(v_fn);
    v_old text := E'        ), head_list AS (  -- one row: no join of the events with the heads\n';
    v_new text := E'        ), head_list AS MATERIALIZED (  -- one row, made once: no join of the events with the heads\n';
BEGIN
    IF position(v_old IN v_def) > 0 THEN
        EXECUTE replace(v_def, v_old, v_new);
    ELSIF position(v_new IN v_def) = 0
            AND NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'migration 41: courtier_commit has no head_list to materialize';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION courtier_payload_locations(p_digests text[])
RETURNS TABLE (digest text, warc_file text, warc_offset bigint, url text,
               fetched_at double precision)
LANGUAGE plpgsql STABLE SET enable_seqscan = off SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    SELECT p.digest, p.warc_file, p.warc_offset, p.url, p.fetched_at
    FROM payloads p WHERE p.digest = ANY(p_digests);
END;
$$;
