-- courtier PostgreSQL schema, migration 6: the outbox sequencer needs no xid horizon.
-- Read positions are handed out after commit, by one sequencer at a time (advisory
-- lock), to the events its statement's snapshot can see. An event whose transaction
-- commits later is simply placed by a later call, above every position handed out
-- before, so an integer cursor never skips it. Dropping the horizon means a long
-- transaction elsewhere on the server (xids are cluster-wide) no longer holds back
-- delivery in this database.
DROP INDEX events_unsequenced;
CREATE INDEX events_unsequenced ON events (id) WHERE read_pos IS NULL;

CREATE OR REPLACE FUNCTION courtier_read_events(p_after bigint, p_limit integer)
RETURNS TABLE (read_pos bigint, url_key bytea, version integer, created_at double precision,
               payload text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
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
        UPDATE events e SET read_pos = v_last + r.rn FROM ready r WHERE e.id = r.id
        RETURNING 1
    )
    SELECT count(*) INTO v_count FROM placed;
    IF v_count > 0 THEN
        UPDATE outbox_sequencer SET last_position = v_last + v_count;
    END IF;
    RETURN QUERY
        SELECT e.read_pos, e.url_key, e.version, e.created_at, e.payload FROM events e
        WHERE e.read_pos IS NOT NULL AND e.read_pos > p_after
        ORDER BY e.read_pos LIMIT p_limit;
END;
$$;
