-- courtier PostgreSQL schema, migration 14: the outbox's tallies kept at write time
-- (store/event_counts.py), so `courtier stats` reads a few rows instead of decoding
-- every event. A statement trigger on events adds the inserted rows' counts in the
-- inserting transaction (the commit function, re-parse events, any later writer).
-- Names: 'events', 'outcome:<outcome>', 'status:<2xx..5xx|error>'. Each backend adds
-- to its own rows (slot = its pid), so concurrent commits never wait on a counter row;
-- a read sums the slots.
CREATE TABLE event_counts (
    name text    NOT NULL,
    slot integer NOT NULL,
    n    bigint  NOT NULL,
    PRIMARY KEY (name, slot)
);

CREATE FUNCTION courtier_event_counter_names(payload text) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN o IN ('robots_denied', 'blocked')
                THEN ARRAY['events', 'outcome:' || o]
                ELSE ARRAY['events', 'outcome:' || o, 'status:' || CASE
                    WHEN jsonb_typeof(p -> 'status') = 'number' AND (p ->> 'status') ~ '^[0-9]+$'
                         AND (p ->> 'status')::numeric > 0
                    THEN div((p ->> 'status')::numeric, 100)::text || 'xx'
                    ELSE 'error' END] END
    FROM (SELECT p, COALESCE(p ->> 'outcome', 'None') AS o
          FROM (SELECT payload::jsonb AS p) AS parsed) AS fields
$$;

CREATE FUNCTION courtier_count_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event_counts (name, slot, n)
        SELECT name, pg_backend_pid(), count(*)
        FROM inserted, unnest(courtier_event_counter_names(inserted.payload)) AS name
        GROUP BY name ORDER BY name
    ON CONFLICT (name, slot) DO UPDATE SET n = event_counts.n + excluded.n;
    RETURN NULL;
END
$$;

CREATE TRIGGER events_counted AFTER INSERT ON events REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION courtier_count_events();

-- The events already stored.
INSERT INTO event_counts (name, slot, n)
    SELECT name, 0, count(*)
    FROM events, unnest(courtier_event_counter_names(events.payload)) AS name
    GROUP BY name;
