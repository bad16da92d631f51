-- courtier SQLite schema, migration 1: the initial tables (DESIGN.md §4).
-- Applied inside one transaction by courtier.store.sqlite._schema; the runner
-- records the version in schema_version, so this file never does.

-- One row per known URL; url_key (16 bytes) is the truth about "seen".
-- state: 0 QUEUED, 1 SCHEDULED, 2 RETIRED (courtier.store.base.UrlState).
CREATE TABLE urls (
    url_key        BLOB    NOT NULL PRIMARY KEY,
    url            TEXT    NOT NULL,
    host_key       TEXT    NOT NULL,
    shard          INTEGER NOT NULL,
    depth          INTEGER NOT NULL DEFAULT 0,
    priority       INTEGER NOT NULL DEFAULT 0,
    state          INTEGER NOT NULL DEFAULT 0,
    version        INTEGER NOT NULL DEFAULT 0,
    discovered_at  REAL    NOT NULL,
    last_fetch_at  REAL,
    next_fetch_at  REAL,
    interval       REAL,
    status         INTEGER,
    outcome        TEXT,
    etag           TEXT,
    last_modified  TEXT,
    content_type   TEXT,
    payload_digest TEXT,
    content_length INTEGER,
    simhash        INTEGER,
    failure_count  INTEGER NOT NULL DEFAULT 0,
    redirect_hops  INTEGER NOT NULL DEFAULT 0,
    redirect_to    TEXT,
    warc_file      TEXT,
    warc_offset    INTEGER,
    warc_length    INTEGER,
    error_kind     TEXT,
    title          TEXT,
    robots_digest  TEXT,
    delay_applied  REAL
) WITHOUT ROWID;

-- Refill (load_due) and next_due_at: every hot query stays inside one shard.
CREATE INDEX urls_due ON urls (shard, state, next_fetch_at);

-- Durable host state: robots copy, policy override, counters.
CREATE TABLE hosts (
    host_key             TEXT    NOT NULL PRIMARY KEY,
    shard                INTEGER NOT NULL,
    robots_status        INTEGER,
    robots_body          BLOB,
    robots_fetched_at    REAL,
    robots_expires_at    REAL,
    robots_digest        TEXT,
    crawl_delay          REAL,
    backoff_until        REAL,
    policy_delay         REAL,
    policy_max_in_flight INTEGER,
    policy_max_pages     INTEGER,
    blocked              INTEGER NOT NULL DEFAULT 0,
    fetched              INTEGER NOT NULL DEFAULT 0,
    errors               INTEGER NOT NULL DEFAULT 0,
    bytes                INTEGER NOT NULL DEFAULT 0,
    ttfb_sum             REAL    NOT NULL DEFAULT 0,
    status_2xx           INTEGER NOT NULL DEFAULT 0,
    status_3xx           INTEGER NOT NULL DEFAULT 0,
    status_4xx           INTEGER NOT NULL DEFAULT 0,
    status_5xx           INTEGER NOT NULL DEFAULT 0,
    updated_at           REAL
) WITHOUT ROWID;

-- Shard leases; epoch is the fencing token, bumped on every (re)acquisition.
CREATE TABLE shards (
    shard            INTEGER NOT NULL PRIMARY KEY,
    owner            TEXT,
    epoch            INTEGER NOT NULL DEFAULT 0,
    lease_expires_at REAL    NOT NULL DEFAULT 0
);

-- Outbox for downstream consumers, read with an id cursor.
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    url_key    BLOB    NOT NULL,
    version    INTEGER NOT NULL,
    created_at REAL    NOT NULL,
    payload    TEXT    NOT NULL,
    UNIQUE (url_key, version)
);

-- Exact-duplicate index: payload digest -> first WARC location.
CREATE TABLE payloads (
    digest      TEXT    NOT NULL PRIMARY KEY,
    warc_file   TEXT    NOT NULL,
    warc_offset INTEGER NOT NULL,
    url         TEXT    NOT NULL,
    fetched_at  REAL    NOT NULL
) WITHOUT ROWID;

-- Audit trail: one row per applied commit.
CREATE TABLE fetch_log (
    id            INTEGER PRIMARY KEY,
    url_key       BLOB    NOT NULL,
    version       INTEGER NOT NULL,
    fetched_at    REAL    NOT NULL,
    status        INTEGER,
    outcome       TEXT    NOT NULL,
    robots_digest TEXT,
    delay_applied REAL,
    error_kind    TEXT
);
CREATE INDEX fetch_log_url ON fetch_log (url_key);
