-- courtier PostgreSQL schema: the day partitions' bookkeeping table of migration
-- time_partitions renamed to day_partitions.
--
-- On a Citus coordinator an unqualified "time_partitions" names Citus's catalog view
-- pg_catalog.time_partitions (pg_catalog is searched before the schema courtier's tables
-- are in), so the retention would read and write Citus's view instead of this table.
-- The table keeps its rows, key and index under the new names (a rename, no rewrite);
-- the one function that names it is made again. The rename names the table by its
-- schema (the one it was created in: the migrations' current schema) for the same
-- reason.
DO $$
BEGIN
    IF to_regclass(format('%I.day_partitions', current_schema())) IS NOT NULL THEN
        RETURN;  -- renamed already (a schema whose version was set back by hand)
    END IF;
    EXECUTE format('ALTER TABLE %I.time_partitions RENAME TO day_partitions', current_schema());
    EXECUTE format('ALTER INDEX %I.time_partitions_pkey RENAME TO day_partitions_pkey',
                   current_schema());
    EXECUTE format('ALTER INDEX %I.time_partitions_age RENAME TO day_partitions_age',
                   current_schema());
END $$;

-- One day partition of events or fetch_log (p_day: the UTC day number, POSIX seconds
-- / 86400) with its indexes, unless it exists, overlaps a partition already recorded
-- (the legacy one) or would take rows that already sit in the default partition (those
-- stay there until the retention deletes them). True when made.
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
    INSERT INTO day_partitions (parent, name, lo, hi) VALUES (p_parent, v_name, v_lo, v_hi);
    RETURN true;
END;
$$;
