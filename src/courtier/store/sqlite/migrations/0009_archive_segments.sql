-- courtier SQLite schema, migration 9: WARC segments of an object-store archive and their
-- upload state (spooled → uploaded → verified; lost when a spool vanished before upload).
CREATE TABLE archive_segments (
    name       TEXT    NOT NULL PRIMARY KEY,   -- path relative to the archive root
    owner      TEXT    NOT NULL,               -- the writer's prefix (one per worker)
    state      TEXT    NOT NULL,
    size       INTEGER NOT NULL DEFAULT 0,
    created_at REAL    NOT NULL,
    updated_at REAL    NOT NULL
) WITHOUT ROWID;
CREATE INDEX archive_segments_owner_state ON archive_segments (owner, state);
-- URL rows by the WARC file of their last record: a lost segment's URLs are found by it.
CREATE INDEX urls_warc_file ON urls (warc_file) WHERE warc_file IS NOT NULL;
