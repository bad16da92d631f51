-- courtier PostgreSQL schema, migration 5 (issue 12): re-parse events and archive segments.
-- Events of more than one kind per capture: kind 0 is the fetch event of (url_key, version),
-- kind N >= 1 the re-parse of that capture by parser version N.
ALTER TABLE events ADD COLUMN kind integer NOT NULL DEFAULT 0;
ALTER TABLE events DROP CONSTRAINT events_shard_url_key_version_key;
ALTER TABLE events ADD CONSTRAINT events_capture_kind UNIQUE (shard, url_key, version, kind);
-- WARC segments of an object-store archive and their upload state.
CREATE TABLE archive_segments (
    name       text             PRIMARY KEY,
    owner      text             NOT NULL,
    state      text             NOT NULL,
    size       bigint           NOT NULL DEFAULT 0,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
);
CREATE INDEX archive_segments_owner_state ON archive_segments (owner, state);
CREATE INDEX urls_warc_file ON urls (warc_file) WHERE warc_file IS NOT NULL;
