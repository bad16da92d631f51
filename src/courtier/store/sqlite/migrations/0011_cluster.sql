-- courtier SQLite schema, migration 11: many workers share one crawl (store/cluster.py).
-- Lease history for handover counting and lease ages.
ALTER TABLE shards ADD COLUMN last_owner TEXT;
ALTER TABLE shards ADD COLUMN acquired_at REAL NOT NULL DEFAULT 0;
-- A release now bumps the epoch; free rows released before this migration did not:
-- bump them once so late writes of their last term stay fenced.
UPDATE shards SET epoch = epoch + 1 WHERE owner IS NULL AND epoch > 0;

CREATE TABLE workers (
    worker_id    TEXT PRIMARY KEY,
    weight       REAL NOT NULL,
    heartbeat_at REAL NOT NULL,
    started_at   REAL NOT NULL,
    info         TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;

CREATE TABLE cluster_counters (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO cluster_counters (name, value) VALUES ('graceful', 0), ('takeover', 0);

-- One politeness clock per host, saved on handover (HostClock).
CREATE TABLE host_clocks (
    host_key          TEXT PRIMARY KEY,
    shard             INTEGER NOT NULL,
    last_start_at     REAL,
    last_end_at       REAL,
    next_start_at     REAL,
    delay_in_force    REAL NOT NULL,
    crawl_delay       REAL,
    adaptive_delay    REAL NOT NULL,
    throttle_delay    REAL NOT NULL,
    throttle_events   INTEGER NOT NULL,
    failures          INTEGER NOT NULL,
    backoff_until     REAL,
    retry_after_until REAL,
    in_flight         INTEGER NOT NULL,
    saved_at          REAL NOT NULL
) WITHOUT ROWID;

-- Per-IP request slots shared by every worker: the next start allowed, and the
-- slots held (until released or expired).
CREATE TABLE ip_gaps (
    ip              TEXT PRIMARY KEY,
    next_allowed_at REAL NOT NULL,
    last_token      INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE ip_slots (
    ip         TEXT NOT NULL,
    token      INTEGER NOT NULL,
    owner      TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (ip, token)
) WITHOUT ROWID;

-- Scope rules every worker applies (seed hosts/domains, include/exclude regexes).
CREATE TABLE scope_rules (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    kind     TEXT NOT NULL,
    value    TEXT NOT NULL,
    added_at REAL NOT NULL,
    UNIQUE (kind, value)
);
