-- courtier SQLite schema, migration 16: the outbox's tallies kept at write time
-- (store/event_counts.py). Every insert into events adds to these counters in the
-- same transaction, so `courtier stats` reads a few rows instead of decoding every
-- event. Names: 'events', 'outcome:<outcome>', 'status:<2xx..5xx|error>'.
CREATE TABLE event_counts (
    name TEXT    PRIMARY KEY,
    n    INTEGER NOT NULL
) WITHOUT ROWID;
-- The events already stored, counted as store/event_counts.py counts them.
INSERT INTO event_counts (name, n)
    SELECT 'events', COUNT(*) FROM events WHERE EXISTS (SELECT 1 FROM events);
INSERT INTO event_counts (name, n)
    SELECT 'outcome:' || COALESCE(json_extract(payload, '$.outcome'), 'None'), COUNT(*)
    FROM events GROUP BY 1;
INSERT INTO event_counts (name, n)
    SELECT 'status:' || CASE
        WHEN json_type(payload, '$.status') = 'integer' AND json_extract(payload, '$.status') > 0
        THEN (json_extract(payload, '$.status') / 100) || 'xx' ELSE 'error' END, COUNT(*)
    FROM events
    WHERE COALESCE(json_extract(payload, '$.outcome'), 'None') NOT IN ('robots_denied', 'blocked')
    GROUP BY 1;
