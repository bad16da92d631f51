-- courtier PostgreSQL schema, migration 7: many workers share one crawl (store/cluster.py).
-- Every lease, heartbeat and IP-slot time is the server's clock (courtier_now()).

CREATE FUNCTION courtier_now() RETURNS double precision
LANGUAGE sql VOLATILE AS $$ SELECT extract(epoch FROM clock_timestamp())::double precision $$;

ALTER TABLE shards ADD COLUMN last_owner text;
ALTER TABLE shards ADD COLUMN acquired_at double precision NOT NULL DEFAULT 0;
-- A release now bumps the epoch; free rows released before did not: bump them once.
UPDATE shards SET epoch = epoch + 1 WHERE owner IS NULL AND epoch > 0;

CREATE TABLE workers (
    worker_id    text PRIMARY KEY,
    weight       double precision NOT NULL,
    heartbeat_at double precision NOT NULL,
    started_at   double precision NOT NULL,
    info         jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE cluster_counters (
    name  text PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO cluster_counters (name, value) VALUES ('graceful', 0), ('takeover', 0);

CREATE TABLE host_clocks (
    shard             integer NOT NULL,
    host_key          text NOT NULL,
    last_start_at     double precision,
    last_end_at       double precision,
    next_start_at     double precision,
    delay_in_force    double precision NOT NULL,
    crawl_delay       double precision,
    adaptive_delay    double precision NOT NULL,
    throttle_delay    double precision NOT NULL,
    throttle_events   bigint NOT NULL,
    failures          bigint NOT NULL,
    backoff_until     double precision,
    retry_after_until double precision,
    in_flight         bigint NOT NULL,
    saved_at          double precision NOT NULL,
    PRIMARY KEY (shard, host_key)
);

CREATE TABLE ip_gaps (
    ip              text PRIMARY KEY,
    next_allowed_at double precision NOT NULL,
    last_token      bigint NOT NULL DEFAULT 0
);

CREATE TABLE ip_slots (
    ip         text NOT NULL,
    token      bigint NOT NULL,
    owner      text NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (ip, token)
);

CREATE TABLE scope_rules (
    id       bigserial PRIMARY KEY,
    kind     text NOT NULL,
    value    text NOT NULL,
    added_at double precision NOT NULL,
    UNIQUE (kind, value)
);

-- Acquire shards for p_owner on the server clock (rules: store/cluster_rules.acquire_step).
-- Rows are created, then locked in shard order (FOR UPDATE waits for commits holding
-- the epochs FOR SHARE), so concurrent acquisitions cannot deadlock or both win.
CREATE FUNCTION courtier_acquire_shards(p_owner text, p_shards integer[],
                                        p_lease double precision)
RETURNS TABLE (shard integer, epoch bigint)
LANGUAGE plpgsql AS $$
DECLARE
    t_now double precision := courtier_now();
    r record;
    t_epoch bigint;
    t_kind text;
BEGIN
    INSERT INTO shards AS s (shard) SELECT x FROM unnest(p_shards) AS x ORDER BY x
        ON CONFLICT DO NOTHING;
    FOR r IN SELECT s.shard, s.owner, s.epoch, s.lease_expires_at, s.last_owner
             FROM shards s WHERE s.shard = ANY(p_shards) ORDER BY s.shard FOR UPDATE LOOP
        t_kind := NULL;
        IF r.owner = p_owner THEN
            UPDATE shards s SET lease_expires_at = t_now + p_lease WHERE s.shard = r.shard;
            shard := r.shard; epoch := r.epoch; RETURN NEXT;
            CONTINUE;
        ELSIF r.owner IS NULL THEN
            t_epoch := greatest(r.epoch, 1);
            IF r.last_owner IS NOT NULL AND r.last_owner <> p_owner THEN
                t_kind := 'graceful';
            END IF;
        ELSIF r.lease_expires_at <= t_now THEN
            t_epoch := r.epoch + 1;
            t_kind := 'takeover';
        ELSE
            CONTINUE;
        END IF;
        UPDATE shards s SET owner = p_owner, epoch = t_epoch,
            lease_expires_at = t_now + p_lease, last_owner = p_owner, acquired_at = t_now
            WHERE s.shard = r.shard;
        IF t_kind IS NOT NULL THEN
            UPDATE cluster_counters c SET value = c.value + 1 WHERE c.name = t_kind;
        END IF;
        shard := r.shard; epoch := t_epoch; RETURN NEXT;
    END LOOP;
END $$;

-- Count fetches against per-window caps (store/cluster_rules.day_window/day_grant);
-- the caller sends reservations sorted by key, so row locks are taken in one order.
CREATE FUNCTION courtier_reserve_day_counts(p_keys text[], p_starts double precision[],
                                            p_ns bigint[], p_limits bigint[])
RETURNS TABLE (budget_key text, day_start double precision, granted bigint, used bigint)
LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    t_start double precision;
    t_used bigint;
    t_granted bigint;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        INSERT INTO day_counts AS d (budget_key, day_start, used)
            VALUES (p_keys[i], p_starts[i], 0) ON CONFLICT DO NOTHING;
        SELECT d.day_start, d.used INTO t_start, t_used FROM day_counts d
            WHERE d.budget_key = p_keys[i] FOR UPDATE;
        IF p_starts[i] >= t_start + 86400 THEN
            t_start := p_starts[i];
            t_used := 0;
        END IF;
        IF p_ns[i] < 0 THEN
            t_granted := greatest(p_ns[i], -t_used);
        ELSIF p_limits[i] IS NULL THEN
            t_granted := p_ns[i];
        ELSE
            t_granted := greatest(0, least(p_ns[i], p_limits[i] - t_used));
        END IF;
        UPDATE day_counts d SET day_start = t_start, used = t_used + t_granted
            WHERE d.budget_key = p_keys[i];
        budget_key := p_keys[i]; day_start := t_start; granted := t_granted;
        used := t_used + t_granted;
        RETURN NEXT;
    END LOOP;
END $$;

-- One request slot for an IP on the server clock (store/cluster_rules.ip_retry_at): the
-- ip_gaps row lock serialises every grant of that IP, whichever worker asks.
CREATE FUNCTION courtier_acquire_ip_slot(p_ip text, p_owner text, p_cap integer,
                                         p_gap double precision, p_ttl double precision)
RETURNS TABLE (granted boolean, now double precision, token bigint,
               expires_at double precision, retry_at double precision)
LANGUAGE plpgsql AS $$
DECLARE
    t_now double precision;
    t_next double precision;
    t_token bigint;
    t_held integer;
    t_first double precision;
BEGIN
    INSERT INTO ip_gaps AS g (ip, next_allowed_at) VALUES (p_ip, '-infinity')
        ON CONFLICT DO NOTHING;
    SELECT g.next_allowed_at, g.last_token INTO t_next, t_token FROM ip_gaps g
        WHERE g.ip = p_ip FOR UPDATE;
    t_now := courtier_now();    -- read after the lock: grants of one IP are in clock order
    DELETE FROM ip_slots s WHERE s.ip = p_ip AND s.expires_at <= t_now;
    SELECT count(*), min(s.expires_at) INTO t_held, t_first FROM ip_slots s WHERE s.ip = p_ip;
    IF t_held < greatest(p_cap, 1) AND t_now >= t_next THEN
        UPDATE ip_gaps g SET next_allowed_at = t_now + p_gap, last_token = t_token + 1
            WHERE g.ip = p_ip;
        INSERT INTO ip_slots (ip, token, owner, expires_at)
            VALUES (p_ip, t_token + 1, p_owner, t_now + p_ttl);
        granted := true; now := t_now; token := t_token + 1; expires_at := t_now + p_ttl;
        retry_at := 0;
    ELSE
        granted := false; now := t_now; token := 0; expires_at := 0;
        retry_at := CASE WHEN t_held >= greatest(p_cap, 1) THEN greatest(t_next, t_first)
                         ELSE t_next END;
    END IF;
    RETURN NEXT;
END $$;
