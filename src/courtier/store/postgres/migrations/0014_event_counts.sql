-- courtier PostgreSQL schema, migration 14: the outbox's tallies kept at write time
-- (store/event_counts.py), so `courtier stats` reads a few rows instead of decoding
-- every event. The store adds the counts of the events a commit or a re-parse wrote in
-- that same transaction (store/postgres/_event_counts.py; a trigger parsing every
-- payload halved the commit rate). Names: 'events', 'outcome:<outcome>',
-- 'status:<2xx..5xx|error>'. Each backend adds to its own rows (slot = its pid), so
-- concurrent commits never wait on a counter row; a read sums the slots.
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

-- The events already stored, counted as store/event_counts.py counts them.
INSERT INTO event_counts (name, slot, n)
    SELECT name, 0, count(*)
    FROM events, unnest(courtier_event_counter_names(events.payload)) AS name
    GROUP BY name;
