-- courtier PostgreSQL schema, migration 38: the crawl-wide outbox sequencer finds the
-- events it has not placed from each shard's positions, so no event carries an index
-- entry of its own for it (docs/events.md, "Ordering"; docs/scale-out.md).
--
-- Until now every event got an entry in the partial index (id) WHERE read_pos IS NULL
-- at insert, whether or not a crawl-wide reader ever ran the sequencer. Now each shard
-- keeps in outbox_placed the position (shard_pos) through which the sequencer has
-- placed its events, and a run places, for every shard whose head (outbox_heads.last_pos)
-- is above it, the events of positions in (placed_pos, last_pos]: a range of the
-- (shard, shard_pos) index each event has anyway (migration 32). Never-skip: a writer
-- holds its shard's head row locked from taking its positions until it commits, so every
-- event at or below a head value that a statement reads is committed (or was rolled back
-- with the head), and visible to every later statement; the run reads the heads first,
-- then places the events up to exactly the values read and records those values. An
-- event of a transaction still open sits above the head value read and is placed by a
-- later run, above every position handed out before. The order within one run stays the
-- events' id order, as before.
--
-- outbox_placed is its own table, not a column of outbox_heads: a writer holds its head
-- row locked for its whole transaction, and the sequencer must not wait for it. On Citus
-- it is distributed by shard beside outbox_heads (store/postgres/_citus.py).

CREATE TABLE outbox_placed (
    shard      integer PRIMARY KEY,
    placed_pos bigint  NOT NULL  -- every event of the shard up to here has a read_pos
);

-- Where each shard stands: below its lowest unplaced event (the placed events of a shard
-- are a prefix of its positions: the sequencer placed what was committed, and a shard's
-- positions commit in order), or at its head when it has none. One statement: the heads
-- and the events in one snapshot; the sequencer's lock keeps a run out meanwhile.
DO $$
BEGIN
    PERFORM pg_advisory_xact_lock(1129270868, 0);
    INSERT INTO outbox_placed (shard, placed_pos)
        SELECT h.shard, coalesce(u.low - 1, h.last_pos) FROM outbox_heads h
        LEFT JOIN (SELECT shard, min(shard_pos) AS low FROM events
                   WHERE read_pos IS NULL GROUP BY shard) AS u ON u.shard = h.shard;
END $$;

-- The partial index of every partition, and of the legacy partition (migration 6's),
-- dropped: no reader uses it any more.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT x.indexrelid::regclass AS idx
        FROM pg_inherits i
        JOIN pg_class p ON p.oid = i.inhparent
        JOIN pg_index x ON x.indrelid = i.inhrelid
        WHERE p.relname = 'events' AND p.relnamespace = current_schema()::regnamespace
          AND NOT x.indisprimary AND NOT x.indisunique
          AND pg_get_expr(x.indpred, x.indrelid) = '(read_pos IS NULL)'
    LOOP
        EXECUTE format('DROP INDEX %s', r.idx);
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION courtier_sequence_events() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
    v_shards integer[];
    v_from bigint[];
    v_to bigint[];
    v_count integer;
BEGIN
    PERFORM pg_advisory_xact_lock(1129270868, 0);
    SELECT s.last_position INTO v_last FROM outbox_sequencer s;
    -- the heads first (a statement of its own): every position up to them is committed.
    -- A placed position above its head (the shard's events and head emptied by hand)
    -- counts from 0 again.
    SELECT array_agg(h.shard ORDER BY h.shard), array_agg(f.pos ORDER BY h.shard),
           array_agg(h.last_pos ORDER BY h.shard)
        INTO v_shards, v_from, v_to
    FROM outbox_heads h LEFT JOIN outbox_placed p ON p.shard = h.shard,
         LATERAL (SELECT CASE WHEN p.placed_pos <= h.last_pos THEN p.placed_pos ELSE 0 END
                  AS pos) AS f
    WHERE h.last_pos > f.pos;
    IF v_shards IS NULL THEN
        RETURN 0;
    END IF;
    -- one range of each shard's (shard, shard_pos) index in every partition: a LATERAL
    -- subquery run once a shard (OFFSET 0 keeps the planner from flattening it into a
    -- join, which it ran as a scan of whole partitions, trusting the statistics that
    -- few events are unplaced)
    WITH ready AS (
        SELECT x.shard, x.shard_pos, row_number() OVER (ORDER BY x.id) AS rn
        FROM unnest(v_shards, v_from, v_to) AS r(s, lo, hi),
        LATERAL (SELECT e.shard, e.shard_pos, e.id FROM events e
                 WHERE e.shard = r.s AND e.shard_pos > r.lo AND e.shard_pos <= r.hi
                   AND e.read_pos IS NULL OFFSET 0) AS x
    ), placed AS (
        UPDATE events e SET read_pos = v_last + r.rn FROM ready r
        WHERE e.shard = r.shard AND e.shard_pos = r.shard_pos AND e.read_pos IS NULL
        RETURNING 1
    )
    SELECT count(*) INTO v_count FROM placed;
    INSERT INTO outbox_placed AS o (shard, placed_pos)
        SELECT r.s, r.hi FROM unnest(v_shards, v_to) AS r(s, hi) ORDER BY r.s
        ON CONFLICT (shard) DO UPDATE SET placed_pos = EXCLUDED.placed_pos;
    IF v_count > 0 THEN
        UPDATE outbox_sequencer SET last_position = v_last + v_count;
    END IF;
    RETURN v_count;
END;
$$;

-- One day partition of events or fetch_log (migration 28's), now without the partial
-- index of unplaced events, and with a BRIN index on the audit rows' id instead of a
-- B-tree (see the end of this file).
CREATE OR REPLACE FUNCTION courtier_add_day_partition(p_parent text, p_day bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_name text := p_parent || '_d' || p_day;
    v_lo double precision := p_day * 86400.0;
    v_hi double precision := (p_day + 1) * 86400.0;
    v_col text;
    v_taken boolean;
BEGIN
    IF p_parent = 'events' THEN
        v_col := 'created_at';
    ELSIF p_parent = 'fetch_log' THEN
        v_col := 'fetched_at';
    ELSE
        RAISE EXCEPTION 'courtier_add_day_partition: unknown table %', p_parent;
    END IF;
    IF EXISTS (SELECT 1 FROM day_partitions t WHERE t.parent = p_parent
               AND t.lo < v_hi AND t.hi > v_lo) THEN
        RETURN false;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE %I >= $1 AND %I < $2)',
                   p_parent || '_default', v_col, v_col) INTO v_taken USING v_lo, v_hi;
    IF v_taken THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%s) TO (%s)',
                   v_name, p_parent, v_lo, v_hi);
    IF p_parent = 'events' THEN
        EXECUTE format('CREATE UNIQUE INDEX %I ON %I (shard, url_key, version, kind)',
                       v_name || '_key', v_name);
        EXECUTE format('CREATE INDEX %I ON %I (read_pos) WHERE read_pos IS NOT NULL',
                       v_name || '_read_pos', v_name);
        BEGIN
            EXECUTE format('ALTER TABLE %I ALTER COLUMN payload SET COMPRESSION lz4', v_name);
        EXCEPTION WHEN feature_not_supported THEN
            NULL;
        END;
    ELSE
        EXECUTE format('CREATE INDEX %I ON %I USING brin (id)', v_name || '_id', v_name);
        EXECUTE format('CREATE INDEX %I ON %I (shard, url_key, id)', v_name || '_url', v_name);
    END IF;
    INSERT INTO day_partitions (parent, name, lo, hi) VALUES (p_parent, v_name, v_lo, v_hi);
    RETURN true;
END;
$$;

-- The audit log's id order (Store.fetch_log without a URL: `courtier export --audit`)
-- is its only reader by id; the per-URL history reads (shard, url_key, id), the
-- retention (fetched_at). Ids come from one sequence and a day partition's rows are
-- appended in about that order, so a BRIN index (a min/max of each 128 heap pages) finds
-- an id window in a few page ranges, and an insert costs it next to nothing (a page range
-- beyond the last summarised one has no entry until VACUUM summarises it) where the
-- B-tree took an entry a row. The reader asks for bounded id windows
-- (store/postgres/_queries.py). The day partitions made so far and still empty get the
-- BRIN index now; those holding rows keep their B-tree until the retention drops them.
DO $$
DECLARE
    r record;
    v_empty boolean;
BEGIN
    FOR r IN SELECT t.name FROM day_partitions t WHERE t.parent = 'fetch_log' ORDER BY t.name LOOP
        CONTINUE WHEN to_regclass(quote_ident(r.name || '_id')) IS NULL;
        EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %I)', r.name) INTO v_empty;
        CONTINUE WHEN NOT v_empty;
        EXECUTE format('DROP INDEX %I', r.name || '_id');
        EXECUTE format('CREATE INDEX %I ON %I USING brin (id)', r.name || '_id', r.name);
    END LOOP;
END $$;
