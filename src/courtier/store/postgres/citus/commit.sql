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
-- The events, audit rows and payload index: the plain form inserts them from the
-- UPDATE's RETURNING rows (`done`) in the same statement. Citus runs an INSERT … SELECT
-- from a subplan through the coordinator and sends the subplan's rows to every worker
-- node first, so every commit took part on every node (a two-phase commit there, even
-- for a batch on one node). Here the statement only collects the applied rows' places in
-- the batch (`ord`, on the coordinator), and the three inserts read the applied rows of
-- the batch itself (`p_commits`: done's columns are the batch's): each row is sent to
-- its own shard's node, no other. Same rows, in the same round and key order. The
-- UPDATE then returns only what the coordinator keeps (no payload comes back).
--
-- The function is rewritten from its own definition (one source of its body), each
-- fragment of the plain form below replaced by its Citus form; a definition rewritten by
-- an earlier version of this file is taken back to the plain form first (every Citus form
-- below replaced by its plain fragment, and the fence of the first version). A plain
-- form without one of the fragments stops the store's open, naming it.
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
    -- the plain form's inserts, CTEs of the statement that applies the batch
    v_done_inserts text := E'        ), logged_events AS (\n'
        || E'            INSERT INTO events (shard, url_key, version, created_at, payload)\n'
        || E'            SELECT d.shard, d.url_key, d.version + 1, p_now, d.payload FROM done d\n'
        || E'            ORDER BY d.shard, d.url_key\n'
        || E'            ON CONFLICT DO NOTHING\n'
        || E'        ), logged_fetches AS (\n'
        || E'            INSERT INTO fetch_log (shard, url_key, version, fetched_at, status, outcome,\n'
        || E'                                   robots_digest, delay_applied, error_kind)\n'
        || E'            SELECT d.shard, d.url_key, d.version + 1, d.fetched_at, d.status, d.outcome,\n'
        || E'                   d.robots_digest, d.delay_applied, d.error_kind FROM done d\n'
        || E'            ORDER BY d.shard, d.url_key\n'
        || E'        ), indexed AS (\n'
        || E'            INSERT INTO payloads (digest, warc_file, warc_offset, url, fetched_at)\n'
        || E'            SELECT d.payload_digest, d.warc_file, d.warc_offset, d.url, d.fetched_at FROM done d\n'
        || E'            WHERE d.payload_digest IS NOT NULL AND d.payload_digest <> \'\'\n'
        || E'              AND d.warc_file IS NOT NULL AND d.warc_offset IS NOT NULL\n'
        || E'            ORDER BY d.shard, d.url_key\n'
        || E'            ON CONFLICT DO NOTHING\n'
        || E'        )\n';
    -- the same inserts from the batch's applied rows (done's columns are the batch's)
    v_batch_inserts text := E'            -- Citus: the inserts of done, from the batch (citus/commit.sql)\n'
        || E'            INSERT INTO events (shard, url_key, version, created_at, payload)\n'
        || E'            SELECT x.shard, x.url_key, x.version + 1, p_now, x.payload\n'
        || E'            FROM unnest(p_commits) AS x WHERE x.ord = ANY(v_ords)\n'
        || E'            ORDER BY x.shard, x.url_key\n'
        || E'            ON CONFLICT DO NOTHING;\n'
        || E'            INSERT INTO fetch_log (shard, url_key, version, fetched_at, status, outcome,\n'
        || E'                                   robots_digest, delay_applied, error_kind)\n'
        || E'            SELECT x.shard, x.url_key, x.version + 1, x.fetched_at, x.status, x.outcome,\n'
        || E'                   x.robots_digest, x.delay_applied, x.error_kind\n'
        || E'            FROM unnest(p_commits) AS x WHERE x.ord = ANY(v_ords)\n'
        || E'            ORDER BY x.shard, x.url_key;\n'
        || E'            INSERT INTO payloads (digest, warc_file, warc_offset, url, fetched_at)\n'
        || E'            SELECT x.payload_digest, x.warc_file, x.warc_offset, x.url, x.fetched_at\n'
        || E'            FROM unnest(p_commits) AS x WHERE x.ord = ANY(v_ords)\n'
        || E'              AND x.payload_digest IS NOT NULL AND x.payload_digest <> \'\'\n'
        || E'              AND x.warc_file IS NOT NULL AND x.warc_offset IS NOT NULL\n'
        || E'            ORDER BY x.shard, x.url_key\n'
        || E'            ON CONFLICT DO NOTHING;\n';
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
         E'              AND u.state IN (0, 1) AND u.shard = ANY(v_batch_shards)\n'],
        -- the inserts from `done` out of the statement, after it from the batch
        [E'    v_done integer;\n',
         E'    v_done integer;\n    v_ords integer[];  -- Citus: applied rows (citus/commit.sql)\n'],
        [v_done_inserts, E'        )  -- Citus: its inserts follow, from the batch\n'],
        [E'            RETURNING c.ord, c.shard, c.url_key, c.url, c.host_key, c.version, c.fetched_at,\n'
         || E'                      c.status, c.outcome, c.robots_digest, c.delay_applied, c.error_kind,\n'
         || E'                      c.payload_digest, c.warc_file, c.warc_offset, c.payload, c.old_state,\n',
         E'            RETURNING c.ord, c.shard, c.url_key, c.host_key, c.old_state,  -- Citus: no payload\n'],
        [E'               array_agg(d.old_priority ORDER BY d.shard, d.url_key) FILTER (WHERE d.old_state = 0)\n'
         || E'        INTO v_done, v_rs, v_rh, v_as, v_ah, v_ad, v_ap, v_ls, v_lh, v_lp\n',
         E'               array_agg(d.old_priority ORDER BY d.shard, d.url_key) FILTER (WHERE d.old_state = 0),\n'
         || E'               array_agg(d.ord)  -- Citus: the inserts below\n'
         || E'        INTO v_done, v_rs, v_rh, v_as, v_ah, v_ad, v_ap, v_ls, v_lh, v_lp, v_ords\n'],
        [E'        IF v_done > 0 THEN\n            v_applied := v_applied + v_done;\n',
         E'        IF v_done > 0 THEN\n' || v_batch_inserts
         || E'            v_applied := v_applied + v_done;\n']];
    v_pair integer;
BEGIN
    v_def := replace(v_def, v_fence_before, v_fence_plain);  -- the first Citus form
    FOR v_pair IN REVERSE array_length(v_pairs, 1) .. 1 LOOP  -- any later Citus form
        v_def := replace(v_def, v_pairs[v_pair][2], v_pairs[v_pair][1]);
    END LOOP;
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
