-- courtier PostgreSQL schema, migration time_partitions: the outbox (events) and the audit log
-- (fetch_log) partitioned by time, so that their retention removes a whole day with a
-- DROP TABLE instead of deleting rows (docs/scale-out.md "Bounded growth").
--
-- events is partitioned by created_at, fetch_log by fetched_at (POSIX seconds), one
-- partition per UTC day (<table>_d<day number>), made ahead by the retention task
-- (courtier_add_day_partition) and recorded in time_partitions with their bounds. A
-- row outside every day partition lands in <table>_default, which the task empties
-- by bounded DELETEs. Indexes are made per partition (a unique index on a partitioned
-- table would have to include the time column): the unique key of an event holds
-- within its day, the read position is unique by the sequencer's construction.
--
-- An existing crawl's tables are not rewritten: the old table becomes the partition
-- <table>_legacy for every time before the day after tomorrow (UTC), keeping its rows,
-- indexes and constraints; it is dropped as a whole once that bound is older than the
-- retention (and, for events, every registered consumer has passed its positions).
-- Attaching it reads the old table's heap once to check the bound (no row is written,
-- no index built), under a lock that holds the crawl's commits for that time. An
-- empty old table (a new database) is simply dropped.

CREATE TABLE time_partitions (
    parent text             NOT NULL,
    name   text             NOT NULL PRIMARY KEY,
    lo     double precision NOT NULL,
    hi     double precision NOT NULL
);
CREATE INDEX time_partitions_age ON time_partitions (parent, hi);

ALTER TABLE outbox_sequencer ADD COLUMN pruned_through bigint NOT NULL DEFAULT 0;

ALTER TABLE events RENAME TO events_legacy;
ALTER SEQUENCE events_id_seq OWNED BY NONE;
CREATE TABLE events (
    id         bigint           NOT NULL DEFAULT nextval('events_id_seq'),
    shard      integer          NOT NULL,
    url_key    bytea            NOT NULL,
    version    integer          NOT NULL,
    kind       integer          NOT NULL DEFAULT 0,
    created_at double precision NOT NULL,
    payload    text             NOT NULL,
    xid        xid8             NOT NULL DEFAULT pg_current_xact_id(),
    read_pos   bigint
) PARTITION BY RANGE (created_at);
CREATE TABLE events_default PARTITION OF events DEFAULT;
CREATE UNIQUE INDEX events_default_key ON events_default (shard, url_key, version, kind);
CREATE INDEX events_default_read_pos ON events_default (read_pos) WHERE read_pos IS NOT NULL;
CREATE INDEX events_default_unsequenced ON events_default (id) WHERE read_pos IS NULL;
CREATE INDEX events_default_age ON events_default (created_at);

ALTER TABLE fetch_log RENAME TO fetch_log_legacy;
ALTER SEQUENCE fetch_log_id_seq OWNED BY NONE;
CREATE TABLE fetch_log (
    id            bigint           NOT NULL DEFAULT nextval('fetch_log_id_seq'),
    shard         integer          NOT NULL,
    url_key       bytea            NOT NULL,
    version       integer          NOT NULL,
    fetched_at    double precision NOT NULL,
    status        integer,
    outcome       text             NOT NULL,
    robots_digest text,
    delay_applied double precision,
    error_kind    text
) PARTITION BY RANGE (fetched_at);
CREATE TABLE fetch_log_default PARTITION OF fetch_log DEFAULT;
CREATE INDEX fetch_log_default_id ON fetch_log_default (id);
CREATE INDEX fetch_log_default_url ON fetch_log_default (shard, url_key, id);
CREATE INDEX fetch_log_default_age ON fetch_log_default (fetched_at);

DO $$
DECLARE
    v_cut double precision := (floor(extract(epoch FROM clock_timestamp()) / 86400) + 2) * 86400;
    v_table text;
    v_found boolean;
BEGIN
    BEGIN
        ALTER TABLE events ALTER COLUMN payload SET COMPRESSION lz4;
        ALTER TABLE events_default ALTER COLUMN payload SET COMPRESSION lz4;
    EXCEPTION WHEN feature_not_supported THEN
        NULL;  -- a server built without lz4 keeps pglz
    END;
    FOREACH v_table IN ARRAY ARRAY['events', 'fetch_log'] LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I)', v_table || '_legacy')
            INTO STRICT v_found;
        IF v_found THEN
            EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%s)',
                           v_table, v_table || '_legacy', v_cut);
            INSERT INTO time_partitions (parent, name, lo, hi)
                VALUES (v_table, v_table || '_legacy', '-infinity', v_cut);
        ELSE
            EXECUTE format('DROP TABLE %I', v_table || '_legacy');
        END IF;
    END LOOP;
END $$;

-- One day partition of events or fetch_log (p_day: the UTC day number, POSIX seconds
-- / 86400) with its indexes, unless it exists, overlaps a partition already recorded
-- (the legacy one) or would take rows that already sit in the default partition (those
-- stay there until the retention deletes them). True when made.
CREATE FUNCTION courtier_add_day_partition(p_parent text, p_day bigint) RETURNS boolean
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
    IF EXISTS (SELECT 1 FROM time_partitions t WHERE t.parent = p_parent
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
        EXECUTE format('CREATE INDEX %I ON %I (id) WHERE read_pos IS NULL',
                       v_name || '_unsequenced', v_name);
        BEGIN
            EXECUTE format('ALTER TABLE %I ALTER COLUMN payload SET COMPRESSION lz4', v_name);
        EXCEPTION WHEN feature_not_supported THEN
            NULL;
        END;
    ELSE
        EXECUTE format('CREATE INDEX %I ON %I (id)', v_name || '_id', v_name);
        EXECUTE format('CREATE INDEX %I ON %I (shard, url_key, id)', v_name || '_url', v_name);
    END IF;
    INSERT INTO time_partitions (parent, name, lo, hi) VALUES (p_parent, v_name, v_lo, v_hi);
    RETURN true;
END;
$$;

-- The sequencer of migration 0006 on its own (the retention runs it before it looks for
-- unplaced events), then the reader, which refuses a position below pruned_through
-- (SQLSTATE CP410, the highest position removed in DETAIL): a reader there would skip
-- the removed events silently.
CREATE FUNCTION courtier_sequence_events() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
    v_count integer;
BEGIN
    PERFORM pg_advisory_xact_lock(1129270868, 0);
    SELECT s.last_position INTO v_last FROM outbox_sequencer s;
    WITH ready AS (
        SELECT e.id, row_number() OVER (ORDER BY e.id) AS rn
        FROM events e WHERE e.read_pos IS NULL
    ), placed AS (
        UPDATE events e SET read_pos = v_last + r.rn FROM ready r
        WHERE e.id = r.id AND e.read_pos IS NULL
        RETURNING 1
    )
    SELECT count(*) INTO v_count FROM placed;
    IF v_count > 0 THEN
        UPDATE outbox_sequencer SET last_position = v_last + v_count;
    END IF;
    RETURN v_count;
END;
$$;

CREATE OR REPLACE FUNCTION courtier_read_events(p_after bigint, p_limit integer)
RETURNS TABLE (read_pos bigint, url_key bytea, version integer, created_at double precision,
               payload text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_through bigint;
BEGIN
    SELECT s.pruned_through INTO v_through FROM outbox_sequencer s;
    IF p_after < v_through THEN
        RAISE EXCEPTION 'events after position % were pruned', p_after
            USING ERRCODE = 'CP410', DETAIL = v_through::text;
    END IF;
    PERFORM courtier_sequence_events();
    RETURN QUERY
        SELECT e.read_pos, e.url_key, e.version, e.created_at, e.payload FROM events e
        WHERE e.read_pos IS NOT NULL AND e.read_pos > p_after
        ORDER BY e.read_pos LIMIT p_limit;
END;
$$;
