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
-- the batch (`ord`, on the coordinator), and the inserts of events and fetch_log take
-- the applied rows of the batch itself (`p_commits`: done's columns are the batch's), as
-- router VALUES lists (courtier_log_applied, below). Same rows, in the same round and
-- key order. The UPDATE then returns only what the coordinator keeps (no payload comes
-- back). The payload index rows are not written here: the function returns the places
-- of the rows to index after [applied, stale, new] (courtier_payload_ords), and the
-- store writes them after the commit (courtier_commit_routed, below, says why). The
-- hosts' statistics are a VALUES list too (courtier_hosts_add).
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
    -- (the events' positions from outbox_heads since migration 32)
    v_done_inserts text := E'        ), counted AS (\n'
        || E'            SELECT d.shard, count(*) AS n FROM done d GROUP BY d.shard\n'
        || E'        ), heads AS (  -- the events\' shard positions (migration 32)\n'
        || E'            INSERT INTO outbox_heads AS h (shard, last_pos)\n'
        || E'            SELECT c.shard, c.n FROM counted c ORDER BY c.shard\n'
        || E'            ON CONFLICT (shard) DO UPDATE SET last_pos = h.last_pos + EXCLUDED.last_pos\n'
        || E'            RETURNING h.shard, h.last_pos\n'
        || E'        ), head_list AS MATERIALIZED (  -- one row, made once: no join of the events with the heads\n'
        || E'            SELECT array_agg(hd.shard) AS s, array_agg(hd.last_pos) AS l FROM heads hd\n'
        || E'        ), logged_events AS (\n'
        || E'            INSERT INTO events (shard, url_key, version, created_at, payload, shard_pos)\n'
        || E'            SELECT d.shard, d.url_key, d.version + 1, p_now, d.payload,\n'
        || E'                   hl.l[array_position(hl.s, d.shard)] - d.n + d.nth\n'
        || E'            FROM (SELECT x.*, count(*) OVER (PARTITION BY x.shard) AS n,\n'
        || E'                         row_number() OVER (PARTITION BY x.shard ORDER BY x.url_key) AS nth\n'
        || E'                  FROM done x) AS d, head_list hl\n'
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
    -- the inserts of the previous form (branch onenode), taken back to the plain form
    v_legacy_inserts text := E'            -- Citus: the inserts of done, from the batch (citus/commit.sql)\n'
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
    -- the events and audit rows of the batch's applied rows as router VALUES lists (the
    -- functions above); their payload index rows are the caller's (courtier_commit_routed)
    v_batch_inserts text := E'            -- Citus: router inserts of done\'s rows (citus/commit.sql)\n'
        || E'            PERFORM courtier_log_applied(p_commits, v_ords, p_now);\n'
        || E'            v_pay := v_pay || v_ords;\n';
    v_hosts_plain text := E'    INSERT INTO hosts AS h (shard, host_key, fetched, errors, bytes, ttfb_sum, status_2xx,\n'
        || E'                            status_3xx, status_4xx, status_5xx, updated_at)\n'
        || E'    SELECT d.shard, d.host_key, sum(d.fetched), sum(d.errors), sum(d.bytes), sum(d.ttfb_sum),\n'
        || E'           sum(d.status_2xx), sum(d.status_3xx), sum(d.status_4xx), sum(d.status_5xx), p_now\n'
        || E'    FROM unnest(p_stats) AS d\n'
        || E'    WHERE d.host_key = ANY(v_hosts) OR NOT d.host_key = ANY(v_committed_hosts)\n'
        || E'    GROUP BY d.shard, d.host_key ORDER BY d.shard, d.host_key\n'
        || E'    ON CONFLICT (shard, host_key) DO UPDATE SET\n'
        || E'        fetched = h.fetched + EXCLUDED.fetched, errors = h.errors + EXCLUDED.errors,\n'
        || E'        bytes = h.bytes + EXCLUDED.bytes, ttfb_sum = h.ttfb_sum + EXCLUDED.ttfb_sum,\n'
        || E'        status_2xx = h.status_2xx + EXCLUDED.status_2xx,\n'
        || E'        status_3xx = h.status_3xx + EXCLUDED.status_3xx,\n'
        || E'        status_4xx = h.status_4xx + EXCLUDED.status_4xx,\n'
        || E'        status_5xx = h.status_5xx + EXCLUDED.status_5xx, updated_at = EXCLUDED.updated_at;\n';
    v_return_plain text := E'    RETURN ARRAY[v_applied, cardinality(p_commits) - v_applied, v_new];\n';
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
         || E'            v_applied := v_applied + v_done;\n'],
        -- no-2PC form: hosts as router VALUES, payload index rows returned, not written
        [E'    v_new integer := 0;\n',
         E'    v_new integer := 0;\n    v_pay integer[] := \'{}\';  -- Citus: payload rows (citus/commit.sql)\n'],
        [v_hosts_plain,
         E'    PERFORM courtier_hosts_add(p_stats, v_hosts, v_committed_hosts, p_now);  -- Citus\n'],
        [v_return_plain,
         E'    RETURN ARRAY[v_applied, cardinality(p_commits) - v_applied, v_new]  -- Citus:\n'
         || E'        || courtier_payload_ords(p_commits, v_pay, v_batch_shards);  -- + payload rows\n']];
    v_pair integer;
BEGIN
    v_def := replace(v_def, v_fence_before, v_fence_plain);  -- the first Citus form
    -- the previous form's inserts (branch onenode) back to the batch's plain inserts
    v_def := replace(v_def, E'        IF v_done > 0 THEN\n' || v_legacy_inserts,
                     E'        IF v_done > 0 THEN\n' || v_batch_inserts);
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

-- The commit without two-phase commit (docs/scale-out.md, "A commit batch without
-- two-phase commit"). Citus prepares a transaction on a node (PREPARE, then COMMIT
-- PREPARED, and a row of pg_dist_transaction) whenever it runs a modification of more than
-- one task (several Citus shards), an INSERT … SELECT through the coordinator (COPY), or
-- modifications over more than one connection; a transaction whose every write is a
-- single-task router statement over one connection to one node commits there by a plain
-- COMMIT. So the statements that write below build router VALUES lists (format %L of each
-- value, the column's type from the target; NULL stays NULL; a double precision in its
-- shortest exact form, extra_float_digits = 1 whatever the session's) instead of INSERT … SELECT
-- of unnest, and courtier_commit_routed calls courtier_commit once per Citus shard of the
-- batch, so that each call's statements name one Citus shard (Citus prunes them to one
-- task). A batch over several nodes stays one transaction, prepared on each: atomic, as
-- before. The payload index (payloads, by digest: any node) is written after the commit,
-- by the store, in transactions of their own (store/postgres/_payload_index.py).

-- the fetch events and audit rows of the applied commits p_ords, in key order; the event's
-- xid is the coordinator's (read here, on the coordinator: the outbox sequencer and the
-- tallies compare it), which Citus would evaluate for the column's default there too.
-- Each event's shard_pos (migration 32) is taken here, Citus having no trigger of events:
-- the heads of the part's shards move by one router upsert (a VALUES list, in shard
-- order), whose RETURNING gives each shard's last position; the events take the ones
-- below it in key order. The heads' rows stay locked until the commit: commit order.
CREATE OR REPLACE FUNCTION courtier_log_applied(p_commits courtier_commit[], p_ords integer[],
                                                p_now double precision)
RETURNS void LANGUAGE plpgsql SET extra_float_digits = 1 AS $$
DECLARE
    v_xid xid8 := pg_current_xact_id();
    v_heads text;
    v_head_shards integer[] := '{}';
    v_head_lasts bigint[] := '{}';
    v_head record;
    v_events text;
    v_fetches text;
BEGIN
    SELECT string_agg(format('(%L, %L)', g.shard, g.n), ', ' ORDER BY g.shard) INTO v_heads
    FROM (SELECT x.shard, count(*) AS n FROM unnest(p_commits) AS x
          WHERE x.ord = ANY(p_ords) GROUP BY x.shard) AS g;
    IF v_heads IS NULL THEN
        RETURN;
    END IF;
    FOR v_head IN EXECUTE 'INSERT INTO outbox_heads AS h (shard, last_pos) VALUES ' || v_heads
        || ' ON CONFLICT (shard) DO UPDATE SET last_pos = h.last_pos + EXCLUDED.last_pos'
        || ' RETURNING h.shard, h.last_pos' LOOP
        v_head_shards := v_head_shards || v_head.shard;
        v_head_lasts := v_head_lasts || v_head.last_pos;
    END LOOP;
    SELECT string_agg(format('(%L, %L, %L, %L, %L, %L, %L)', a.shard, a.url_key, a.version + 1,
                             p_now, a.payload, v_xid, hd.last_pos - a.n + a.nth),
                      ', ' ORDER BY a.shard, a.url_key),
           string_agg(format('(%L, %L, %L, %L, %L, %L, %L, %L, %L)', a.shard, a.url_key,
                             a.version + 1, a.fetched_at, a.status, a.outcome,
                             a.robots_digest, a.delay_applied, a.error_kind),
                      ', ' ORDER BY a.shard, a.url_key)
    INTO v_events, v_fetches
    FROM (SELECT x.*, row_number() OVER (PARTITION BY x.shard ORDER BY x.url_key) AS nth,
                 count(*) OVER (PARTITION BY x.shard) AS n
          FROM unnest(p_commits) AS x WHERE x.ord = ANY(p_ords)) AS a
    JOIN unnest(v_head_shards, v_head_lasts) AS hd(shard, last_pos) ON hd.shard = a.shard;
    EXECUTE 'INSERT INTO events (shard, url_key, version, created_at, payload, xid, shard_pos)'
        || ' VALUES ' || v_events || ' ON CONFLICT DO NOTHING';
    EXECUTE 'INSERT INTO fetch_log (shard, url_key, version, fetched_at, status, outcome,'
        || ' robots_digest, delay_applied, error_kind) VALUES ' || v_fetches;
END;
$$;

-- the heads' increment of the re-parse (store/postgres/_archive.py) names one shard:
-- custom plans, so that Citus routes it (a generic plan's parameter it cannot route)
ALTER FUNCTION courtier_take_shard_pos(integer, integer) SET plan_cache_mode = force_custom_plan;

-- the hosts' statistics (the plain form's upsert from unnest(p_stats), same filter)
CREATE OR REPLACE FUNCTION courtier_hosts_add(p_stats courtier_host_delta[], p_hosts text[],
                                              p_committed_hosts text[], p_now double precision)
RETURNS void LANGUAGE plpgsql SET extra_float_digits = 1 AS $$
DECLARE
    v_rows text;
BEGIN
    SELECT string_agg(format('(%L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L)', g.shard,
                             g.host_key, g.f, g.e, g.b, g.t, g.s2, g.s3, g.s4, g.s5, p_now),
                      ', ' ORDER BY g.shard, g.host_key)
    INTO v_rows
    FROM (SELECT d.shard, d.host_key, sum(d.fetched) AS f, sum(d.errors) AS e,
                 sum(d.bytes) AS b, sum(d.ttfb_sum) AS t, sum(d.status_2xx) AS s2,
                 sum(d.status_3xx) AS s3, sum(d.status_4xx) AS s4, sum(d.status_5xx) AS s5
          FROM unnest(p_stats) AS d
          WHERE d.host_key = ANY(p_hosts) OR NOT d.host_key = ANY(p_committed_hosts)
          GROUP BY d.shard, d.host_key) AS g;
    IF v_rows IS NULL THEN
        RETURN;
    END IF;
    EXECUTE 'INSERT INTO hosts AS h (shard, host_key, fetched, errors, bytes, ttfb_sum,'
        || ' status_2xx, status_3xx, status_4xx, status_5xx, updated_at) VALUES ' || v_rows
        || ' ON CONFLICT (shard, host_key) DO UPDATE SET'
        || ' fetched = h.fetched + EXCLUDED.fetched, errors = h.errors + EXCLUDED.errors,'
        || ' bytes = h.bytes + EXCLUDED.bytes, ttfb_sum = h.ttfb_sum + EXCLUDED.ttfb_sum,'
        || ' status_2xx = h.status_2xx + EXCLUDED.status_2xx,'
        || ' status_3xx = h.status_3xx + EXCLUDED.status_3xx,'
        || ' status_4xx = h.status_4xx + EXCLUDED.status_4xx,'
        || ' status_5xx = h.status_5xx + EXCLUDED.status_5xx,'
        || ' updated_at = EXCLUDED.updated_at';
END;
$$;

-- The batch rows whose payload the index must hold: those applied now (p_applied) and
-- those an earlier try of the same commit applied (the URL's row is at the version this
-- commit makes and references its WARC record, which names one fetch): a retry after a
-- failure between the commit and its payload rows writes them then (ON CONFLICT DO
-- NOTHING). Only rows with a payload digest and a WARC record, as the plain form indexes.
CREATE OR REPLACE FUNCTION courtier_payload_ords(p_commits courtier_commit[],
                                                 p_applied integer[], p_shards integer[])
RETURNS integer[] LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_ords integer[];
    v_again integer[];
BEGIN
    SELECT COALESCE(array_agg(x.ord), '{}') INTO v_ords FROM unnest(p_commits) AS x
    WHERE x.ord = ANY(p_applied) AND x.payload_digest IS NOT NULL AND x.payload_digest <> ''
      AND x.warc_file IS NOT NULL AND x.warc_offset IS NOT NULL;
    IF cardinality(v_ords) < (SELECT count(*) FROM unnest(p_commits) AS x
                              WHERE x.payload_digest IS NOT NULL AND x.payload_digest <> ''
                                AND x.warc_file IS NOT NULL AND x.warc_offset IS NOT NULL) THEN
        SELECT COALESCE(array_agg(x.ord), '{}') INTO v_again
        FROM urls u JOIN unnest(p_commits) AS x ON u.shard = x.shard AND u.url_key = x.url_key
        WHERE u.shard = ANY(p_shards) AND NOT x.ord = ANY(p_applied)
          AND x.payload_digest IS NOT NULL AND x.payload_digest <> ''
          AND u.version = x.version + 1 AND u.warc_file = x.warc_file
          AND u.warc_offset = x.warc_offset;
        v_ords := v_ords || v_again;
    END IF;
    RETURN v_ords;
END;
$$;

-- The store's commit on Citus: courtier_commit (the Citus form above) once per Citus shard
-- of urls that the batch's rows, links or host statistics name, in Citus shard order, each
-- call given that Citus shard's part of each array (in the batch's order), then the event
-- tallies of that part (migration 29's upsert, counted here first and written as a router
-- VALUES list). Every statement of a call names one Citus shard, so Citus plans each as a
-- single-task router statement: the batch's join with urls and the UPDATE of urls
-- included, whose rows never pass through the coordinator. When those Citus shards sit on
-- one node the node commits without two-phase commit; a batch over several nodes is one
-- transaction prepared on each (atomic, as before). Lock order: the fence first for
-- every shard of the batch in shard order (each call takes its own again: held already),
-- then every row lock by Citus shard, in Citus shard order, and within one by the plain
-- form's order, for every batch; the intake (citus/intake.sql) goes the same way, so
-- commits and intakes never wait for each other in a cycle
-- (tests/integration/store/test_citus_commit_lock_order.py; docs/scale-out.md, "A commit
-- batch without two-phase commit", says why the other writers close none either, and
-- what is left to Citus's deadlock detection). Multi-shard statements would run over one
-- connection a node (citus.multi_shard_modify_mode sequential, for the transaction).
-- Returns [applied, stale, new URLs] and then the ords of the batch rows whose payload
-- the index must get (courtier_payload_ords).
CREATE OR REPLACE FUNCTION courtier_commit_routed(p_commits courtier_commit[],
                                                  p_new courtier_new_url[],
                                                  p_stats courtier_host_delta[],
                                                  p_now double precision,
                                                  p_tally_shards integer[],
                                                  p_tally_keys bytea[],
                                                  p_tally_versions integer[],
                                                  p_tally_names text[])
RETURNS integer[] LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET jit = off AS $$
DECLARE
    v_xid xid8 := pg_current_xact_id();
    v_shards integer[];
    v_citus_shards bigint[];
    v_group record;
    v_part integer[];
    v_applied integer := 0;
    v_stale integer := 0;
    v_new integer := 0;
    v_pay integer[] := '{}';
    v_tallies text;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1129270870, l.s)
    FROM (SELECT DISTINCT x.shard AS s FROM unnest(p_commits) AS x ORDER BY 1) AS l;
    SELECT array_agg(t.s), array_agg(get_shard_id_for_distribution_column('urls', t.s))
    INTO v_shards, v_citus_shards
    FROM (SELECT x.shard FROM unnest(p_commits) AS x
          UNION SELECT n.shard FROM unnest(p_new) AS n
          UNION SELECT d.shard FROM unnest(p_stats) AS d) AS t(s);
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    FOR v_group IN  -- one part per Citus shard
        SELECT m.c, array_agg(m.s ORDER BY m.s) AS shards
        FROM unnest(v_shards, v_citus_shards) AS m(s, c)
        GROUP BY m.c ORDER BY m.c
    LOOP
        v_part := courtier_commit(
            ARRAY(SELECT p_commits[i] FROM generate_subscripts(p_commits, 1) AS i
                  WHERE (p_commits[i]).shard = ANY(v_group.shards) ORDER BY i),
            ARRAY(SELECT p_new[i] FROM generate_subscripts(p_new, 1) AS i
                  WHERE (p_new[i]).shard = ANY(v_group.shards) ORDER BY i),
            ARRAY(SELECT p_stats[i] FROM generate_subscripts(p_stats, 1) AS i
                  WHERE (p_stats[i]).shard = ANY(v_group.shards) ORDER BY i),
            p_now);
        v_applied := v_applied + v_part[1];
        v_stale := v_stale + v_part[2];
        v_new := v_new + v_part[3];
        v_pay := v_pay || v_part[4:];
        SELECT string_agg(format('(%L, %L, %L)', c.shard, c.name, c.n), ', '
                          ORDER BY c.shard, c.name)
        INTO v_tallies
        FROM (SELECT e.shard, k.name, count(*) AS n
              FROM unnest(p_tally_shards, p_tally_keys, p_tally_versions, p_tally_names)
                  AS k(shard, url_key, version, name)
              JOIN events e ON e.shard = k.shard AND e.url_key = k.url_key
                           AND e.version = k.version
              WHERE e.shard = ANY(v_group.shards) AND k.shard = ANY(v_group.shards)
                AND e.xid = v_xid AND e.created_at = p_now
              GROUP BY e.shard, k.name) AS c;
        IF v_tallies IS NOT NULL THEN
            EXECUTE 'INSERT INTO event_counts AS c (shard, name, n) VALUES ' || v_tallies
                || ' ON CONFLICT (shard, name) DO UPDATE SET n = c.n + excluded.n';
        END IF;
    END LOOP;
    RETURN ARRAY[v_applied, v_stale, v_new] || v_pay;
END;
$$;

-- One Citus shard's payload index rows (the store groups them by Citus shard of payloads
-- and calls this once per group, each outside any transaction: a single-task router
-- INSERT, committed on its node alone). First copy kept (ON CONFLICT DO NOTHING), as the
-- plain form's; rows in the order given.
CREATE OR REPLACE FUNCTION courtier_index_payloads(p_digests text[], p_files text[],
                                                   p_offsets bigint[], p_urls text[],
                                                   p_fetched double precision[])
RETURNS void LANGUAGE plpgsql SET extra_float_digits = 1 AS $$
DECLARE
    v_rows text;
BEGIN
    SELECT string_agg(format('(%L, %L, %L, %L, %L)', t.d, t.f, t.o, t.u, t.a), ', '
                      ORDER BY t.i)
    INTO v_rows
    FROM unnest(p_digests, p_files, p_offsets, p_urls, p_fetched) WITH ORDINALITY
        AS t(d, f, o, u, a, i);
    IF v_rows IS NOT NULL THEN
        EXECUTE 'INSERT INTO payloads (digest, warc_file, warc_offset, url, fetched_at) VALUES '
            || v_rows || ' ON CONFLICT DO NOTHING';
    END IF;
END;
$$;
