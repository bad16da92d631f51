-- courtier SQLite schema, migration 8: outbox events of more than one kind per capture.
-- kind 0 is the fetch event of (url_key, version); kind N >= 1 is the re-parse of that
-- capture by parser version N (courtier reparse), so re-parsing twice emits nothing new.
-- SQLite cannot change a table constraint in place: the table is rebuilt, ids kept.
CREATE TABLE events_v7 (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    url_key    BLOB    NOT NULL,
    version    INTEGER NOT NULL,
    kind       INTEGER NOT NULL DEFAULT 0,
    created_at REAL    NOT NULL,
    payload    TEXT    NOT NULL,
    UNIQUE (url_key, version, kind)
);
INSERT INTO events_v7 (id, url_key, version, kind, created_at, payload)
    SELECT id, url_key, version, 0, created_at, payload FROM events;
DROP TABLE events;
ALTER TABLE events_v7 RENAME TO events;
