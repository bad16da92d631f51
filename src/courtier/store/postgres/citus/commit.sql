-- courtier on Citus: the commit (courtier_commit, migration 15's body) with custom plans
-- and its epoch fence taken as coordinator advisory locks instead of row locks.
--
-- Custom plans: migration 16 gave it generic plans; Citus cannot build a distributed plan
-- of a statement whose values are parameters of a generic plan ("could not create
-- distributed plan"). Its statements then run as Citus plans them: the batch (an array)
-- joined to urls becomes an intermediate result on the coordinator, the UPDATE and the
-- inserts that read its RETURNING rows are run per Citus shard.
ALTER FUNCTION courtier_commit(courtier_commit[], courtier_new_url[], courtier_host_delta[],
                               double precision)
    SET plan_cache_mode = force_custom_plan;

-- The fence: the plain form locks the batch's rows of the `shards` table FOR SHARE, so a
-- takeover (which locks them FOR UPDATE) waits for the commit. On Citus `shards` is a
-- reference table, and a row lock on a reference table is a lock on its one Citus shard
-- (Citus serialises the writes of its copies): every commit, refill, reset and release of
-- every worker then queued behind every lease change, and with Citus's other locks this
-- was "deadlock detected" dozens of times a crawl (docs/scale-out.md, "Citus: as built").
-- Here the commit takes a shared advisory lock per shard of its batch on the coordinator,
-- in shard order (keys 1129270870 and the shard: _cluster.FENCE_LOCK), which every lease
-- change takes exclusively before it writes (store/postgres/_cluster.py): the same waits
-- as the row locks, and nothing else. The epochs are then read by the statement that
-- applies the batch, as before.
--
-- The nodes: the batch's join with urls (`fenced`) and the UPDATE from it name the rows'
-- shards only through the join with the batch, which Citus cannot prune by, so both ran
-- on every Citus shard of urls, on every node, whatever the batch. Each also names the
-- batch's shards as a constant array (`v_batch_shards`, set after the fence), which
-- Citus prunes by: they run on the nodes of the batch's shards only. Same rows.
--
-- The function is rewritten from its own definition (one source of its body), each
-- fragment of the plain form below replaced by its Citus form; a definition rewritten by
-- an earlier version of this file (its fence only) is taken back to the plain fence
-- first. A plain form without one of the fragments stops the store's open, naming it.
DO $$
DECLARE
    v_fn regprocedure := ('courtier_commit(courtier_commit[], courtier_new_url[],'
                          || ' courtier_host_delta[], double precision)')::regprocedure;
    v_def text := pg_get_functiondef(v_fn);
    v_fence_plain text := E'    PERFORM 1 FROM shards\n'
        || E'    WHERE shard IN (SELECT DISTINCT x.shard FROM unnest(p_commits) AS x)\n'
        || E'    ORDER BY shard FOR SHARE;\n';
    v_fence_before text := E'    PERFORM pg_advisory_xact_lock_shared(1129270870, l.s)\n'
        || E'    FROM (SELECT DISTINCT x.shard AS s FROM unnest(p_commits) AS x\n'
        || E'          ORDER BY 1) AS l;  -- Citus: the fence (citus/commit.sql)\n';
    v_fence_citus text := v_fence_before
        || E'    v_batch_shards := ARRAY(SELECT DISTINCT x.shard FROM unnest(p_commits) AS x);\n';
    -- (plain fragment, Citus form) pairs
    v_pairs text[][] := ARRAY[
        [v_fence_plain, v_fence_citus],
        [E'DECLARE\n    v_rounds integer;\n',
         E'DECLARE\n    v_batch_shards integer[];  -- Citus: pruning (citus/commit.sql)\n'
         || E'    v_rounds integer;\n'],
        [E'            WHERE r.nth = v_round AND COALESCE(s.epoch, 0) = r.epoch\n',
         E'            WHERE r.nth = v_round AND COALESCE(s.epoch, 0) = r.epoch\n'
         || E'              AND o.shard = ANY(v_batch_shards)  -- Citus: pruning\n'],
        [E'              AND u.state IN (0, 1)\n',
         E'              AND u.state IN (0, 1) AND u.shard = ANY(v_batch_shards)\n']];
    v_pair integer;
BEGIN
    IF position(v_fence_citus IN v_def) > 0 THEN
        RETURN;  -- rewritten already
    END IF;
    v_def := replace(v_def, v_fence_before, v_fence_plain);  -- an earlier Citus form
    FOR v_pair IN 1 .. array_length(v_pairs, 1) LOOP
        IF position(v_pairs[v_pair][1] IN v_def) = 0 THEN
            RAISE EXCEPTION 'citus/commit.sql: courtier_commit has no fragment % to replace',
                v_pair USING DETAIL = v_pairs[v_pair][1],
                HINT = 'a migration changed courtier_commit: change citus/commit.sql with it';
        END IF;
        v_def := replace(v_def, v_pairs[v_pair][1], v_pairs[v_pair][2]);
    END LOOP;
    EXECUTE v_def;
END $$;
