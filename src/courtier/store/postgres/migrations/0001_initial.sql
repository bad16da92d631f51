-- courtier PostgreSQL schema, migration 1: tables, partitions, indexes, row types.
-- Applied in one transaction by courtier.store.postgres._schema (which records the
-- version in schema_version). Every table that grows with the crawl carries the
-- shard (the leading 10 bits of every url_key) and leads its primary key with it,
-- so the shard can become the distribution column of a distributed PostgreSQL.

-- One row per known URL. state: 0 QUEUED, 1 SCHEDULED, 2 RETIRED.
CREATE TABLE urls (
    shard              integer          NOT NULL,
    url_key            bytea            NOT NULL,
    url                text             NOT NULL,
    host_key           text             NOT NULL,
    depth              integer          NOT NULL DEFAULT 0,
    priority           integer          NOT NULL DEFAULT 0,
    state              smallint         NOT NULL DEFAULT 0,
    version            integer          NOT NULL DEFAULT 0,
    discovered_at      double precision NOT NULL,
    last_fetch_at      double precision,
    next_fetch_at      double precision,
    "interval"         double precision,
    status             integer,
    outcome            text,
    etag               text,
    last_modified      text,
    content_type       text,
    payload_digest     text,
    content_length     bigint,
    simhash            bigint,
    failure_count      integer          NOT NULL DEFAULT 0,
    redirect_hops      integer          NOT NULL DEFAULT 0,
    redirect_to        text,
    warc_file          text,
    warc_offset        bigint,
    warc_length        bigint,
    error_kind         text,
    title              text,
    robots_digest      text,
    delay_applied      double precision,
    change_stats       text,
    near_dup_of        text,
    sitemap_changefreq text,
    sitemap_lastmod    double precision,
    PRIMARY KEY (shard, url_key)
) PARTITION BY HASH (shard);
CREATE TABLE urls_p00 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 0);
CREATE TABLE urls_p01 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 1);
CREATE TABLE urls_p02 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 2);
CREATE TABLE urls_p03 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 3);
CREATE TABLE urls_p04 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 4);
CREATE TABLE urls_p05 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 5);
CREATE TABLE urls_p06 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 6);
CREATE TABLE urls_p07 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 7);
CREATE TABLE urls_p08 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 8);
CREATE TABLE urls_p09 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 9);
CREATE TABLE urls_p10 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 10);
CREATE TABLE urls_p11 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 11);
CREATE TABLE urls_p12 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 12);
CREATE TABLE urls_p13 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 13);
CREATE TABLE urls_p14 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 14);
CREATE TABLE urls_p15 PARTITION OF urls FOR VALUES WITH (MODULUS 16, REMAINDER 15);

-- The per-host probe of a refill: a host's best QUEUED rows in rank order.
CREATE INDEX urls_queued_rank ON urls (shard, host_key, priority DESC, next_fetch_at, depth, url_key)
    WHERE state = 0;
-- A host's earliest QUEUED row (keeps host_queue.next_due_at exact in O(log n)).
CREATE INDEX urls_queued_host_due ON urls (shard, host_key, next_fetch_at) WHERE state = 0;
-- next_due_at / due_within per shard.
CREATE INDEX urls_queued_due ON urls (shard, next_fetch_at) WHERE state = 0;
-- seed_urls() on resume reads only the seeds.
CREATE INDEX urls_seeds ON urls (discovered_at) WHERE depth = 0;

-- The host queue of the refill: one row per host with QUEUED rows, kept exact by
-- every write (next_due_at = min next_fetch_at, best_priority = max priority of them).
CREATE TABLE host_queue (
    shard         integer          NOT NULL,
    host_key      text             NOT NULL,
    next_due_at   double precision NOT NULL,
    best_priority integer          NOT NULL,
    PRIMARY KEY (shard, host_key)
);
CREATE INDEX host_queue_best ON host_queue (best_priority DESC, next_due_at, host_key);
CREATE INDEX host_queue_due ON host_queue (shard, next_due_at);

-- Durable host state: robots copy, policy override, counters.
CREATE TABLE hosts (
    shard                integer          NOT NULL,
    host_key             text             NOT NULL,
    robots_status        integer,
    robots_body          bytea,
    robots_fetched_at    double precision,
    robots_expires_at    double precision,
    robots_digest        text,
    crawl_delay          double precision,
    backoff_until        double precision,
    policy_delay         double precision,
    policy_max_in_flight integer,
    policy_max_pages     integer,
    blocked              boolean          NOT NULL DEFAULT false,
    fetched              bigint           NOT NULL DEFAULT 0,
    errors               bigint           NOT NULL DEFAULT 0,
    bytes                bigint           NOT NULL DEFAULT 0,
    ttfb_sum             double precision NOT NULL DEFAULT 0,
    status_2xx           bigint           NOT NULL DEFAULT 0,
    status_3xx           bigint           NOT NULL DEFAULT 0,
    status_4xx           bigint           NOT NULL DEFAULT 0,
    status_5xx           bigint           NOT NULL DEFAULT 0,
    updated_at           double precision,
    policy_updated_at    double precision,
    PRIMARY KEY (shard, host_key)
);
CREATE INDEX hosts_policy_updated ON hosts (policy_updated_at) WHERE policy_updated_at IS NOT NULL;

-- Shard leases; epoch is the fencing token, bumped on every (re)acquisition.
CREATE TABLE shards (
    shard            integer          NOT NULL PRIMARY KEY,
    owner            text,
    epoch            bigint           NOT NULL DEFAULT 0,
    lease_expires_at double precision NOT NULL DEFAULT 0
);

-- Outbox. id is the insertion order (not the commit order); xid is the writing
-- transaction; read_pos is the consumers' cursor, assigned by the sequencer only
-- once every transaction that could still commit an earlier event has finished.
CREATE TABLE events (
    id         bigserial        PRIMARY KEY,
    shard      integer          NOT NULL,
    url_key    bytea            NOT NULL,
    version    integer          NOT NULL,
    created_at double precision NOT NULL,
    payload    text             NOT NULL,
    xid        xid8             NOT NULL DEFAULT pg_current_xact_id(),
    read_pos   bigint,
    UNIQUE (shard, url_key, version)
);
CREATE UNIQUE INDEX events_read_pos ON events (read_pos) WHERE read_pos IS NOT NULL;
CREATE INDEX events_unsequenced ON events (xid, id) WHERE read_pos IS NULL;
CREATE TABLE outbox_sequencer (
    only_row      boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    last_position bigint  NOT NULL
);
INSERT INTO outbox_sequencer (last_position) VALUES (0);

-- Exact-duplicate index: payload digest -> first WARC location.
CREATE TABLE payloads (
    digest      text             NOT NULL PRIMARY KEY,
    warc_file   text             NOT NULL,
    warc_offset bigint           NOT NULL,
    url         text             NOT NULL,
    fetched_at  double precision NOT NULL
);

-- Audit trail: one row per applied commit.
CREATE TABLE fetch_log (
    id            bigserial        PRIMARY KEY,
    shard         integer          NOT NULL,
    url_key       bytea            NOT NULL,
    version       integer          NOT NULL,
    fetched_at    double precision NOT NULL,
    status        integer,
    outcome       text             NOT NULL,
    robots_digest text,
    delay_applied double precision,
    error_kind    text
);
CREATE INDEX fetch_log_url ON fetch_log (shard, url_key, id);

-- Row types of the batch functions (arrays of these are one parameter each).
CREATE TYPE courtier_new_url AS (
    shard integer, url_key bytea, url text, host_key text, depth integer, priority integer,
    discovered_at double precision, next_fetch_at double precision, redirect_hops integer,
    sitemap_changefreq text, sitemap_lastmod double precision
);
CREATE TYPE courtier_commit AS (
    ord integer, shard integer, url_key bytea, url text, host_key text, version integer,
    epoch bigint, state smallint, fetched_at double precision, next_fetch_at double precision,
    "interval" double precision, status integer, outcome text, failure_count integer,
    redirect_to text, error_kind text, robots_digest text, delay_applied double precision,
    fresh boolean, change_stats text, priority integer, etag text, last_modified text,
    content_type text, payload_digest text, content_length bigint, title text, simhash bigint,
    near_dup_of text, warc_file text, warc_offset bigint, warc_length bigint, payload text
);
CREATE TYPE courtier_host_delta AS (
    shard integer, host_key text, fetched bigint, errors bigint, bytes bigint,
    ttfb_sum double precision, status_2xx bigint, status_3xx bigint, status_4xx bigint,
    status_5xx bigint
);
