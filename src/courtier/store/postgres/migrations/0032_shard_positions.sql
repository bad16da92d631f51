-- courtier PostgreSQL schema, migration 32: outbox positions per shard, assigned at commit
-- (docs/scale-out.md, "The outbox cursor"; Store.read_events_by_shard).
--
-- Every event gets shard_pos, the next position of its shard, taken from that shard's
-- row of outbox_heads inside the transaction that writes the event. The row stays locked
-- until that transaction ends, so a second writer of the shard waits: the positions of
-- one shard are handed out in commit order, every position up to a head that a reader
-- sees is committed (or was rolled back with the head), and a reader that has passed a
-- position never misses an event at or below it. No sequencer runs for this order (the
-- crawl-wide read_pos of migration 6 still does, for read_events).
--
-- Who takes positions: every writer names them. The commit (courtier_commit, rewritten
-- below from its own definition) upserts the heads of the shards of a round's applied
-- rows in one statement, in shard order, and numbers the round's events from the heads'
-- new values, in (shard, url_key) order: one row update a shard and round, no trigger.
-- The re-parse takes its positions first, all its shards in one statement in shard order
-- (courtier_take_shard_pos). On Citus the commit's form (citus/commit.sql) does the same
-- with router VALUES lists. shard_pos is NOT NULL: a writer that forgot would fail, not
-- write an event no per-shard reader sees. outbox_heads is distributed by shard beside
-- events (store/postgres/_citus.py): the increment is a router statement on the node.
-- The retention raises pruned_pos before it removes a shard's events, so a per-shard
-- reader below it is told instead of skipping them (store/postgres/_retention.py).
CREATE TABLE outbox_heads (
    shard      integer PRIMARY KEY,
    last_pos   bigint  NOT NULL,
    pruned_pos bigint  NOT NULL DEFAULT 0  -- the highest position the retention removed
);

ALTER TABLE events ADD COLUMN shard_pos bigint;

-- The events kept so far, numbered per shard in the crawl-wide order (placed ones first,
-- then the rest by id). The ALTER above waited for every writer of events and locks
-- them out until this migration commits: every event here is committed.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM events) THEN
        UPDATE events e SET shard_pos = n.pos
        FROM (SELECT shard, id, row_number() OVER (PARTITION BY shard
                                                   ORDER BY read_pos NULLS LAST, id) AS pos
              FROM events) AS n
        WHERE e.shard = n.shard AND e.id = n.id;
        INSERT INTO outbox_heads (shard, last_pos)
            SELECT shard, max(shard_pos) FROM events GROUP BY shard;
    END IF;
END $$;

CREATE INDEX events_shard_pos ON events (shard, shard_pos);

-- the last of p_count positions taken for p_shard (the first is the result - p_count + 1)
CREATE OR REPLACE FUNCTION courtier_take_shard_pos(p_shard integer, p_count integer) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
BEGIN
    UPDATE outbox_heads SET last_pos = last_pos + p_count WHERE shard = p_shard
    RETURNING last_pos INTO v_last;
    IF NOT FOUND THEN
        INSERT INTO outbox_heads AS h (shard, last_pos) VALUES (p_shard, p_count)
        ON CONFLICT (shard) DO UPDATE SET last_pos = h.last_pos + EXCLUDED.last_pos
        RETURNING h.last_pos INTO v_last;
    END IF;
    RETURN v_last;
END;
$$;

ALTER TABLE events ALTER COLUMN shard_pos SET NOT NULL;

-- The commit: its round's events take their positions from the heads (see the header).
-- Rewritten from its definition, as citus/commit.sql does (one source of the body). A
-- Citus coordinator whose courtier_commit is already the Citus form (no such insert: its
-- events go through courtier_log_applied) is left alone: citus/commit.sql, changed with
-- this migration, rebuilds it from the plain fragment below at the next open.
DO $$
DECLARE
    v_fn regprocedure := ('courtier_commit(courtier_commit[], courtier_new_url[],'
                          || ' courtier_host_delta[], double precision)')::regprocedure;
    v_def text := pg_get_functiondef(v_fn);
    v_old text := E'        ), logged_events AS (\n'
        || E'            INSERT INTO events (shard, url_key, version, created_at, payload)\n'
        || E'            SELECT d.shard, d.url_key, d.version + 1, p_now, d.payload FROM done d\n'
        || E'            ORDER BY d.shard, d.url_key\n'
        || E'            ON CONFLICT DO NOTHING\n';
    v_new text := E'        ), counted AS (\n'
        || E'            SELECT d.shard, count(*) AS n FROM done d GROUP BY d.shard\n'
        || E'        ), heads AS (  -- the events\' shard positions (migration 32)\n'
        || E'            INSERT INTO outbox_heads AS h (shard, last_pos)\n'
        || E'            SELECT c.shard, c.n FROM counted c ORDER BY c.shard\n'
        || E'            ON CONFLICT (shard) DO UPDATE SET last_pos = h.last_pos + EXCLUDED.last_pos\n'
        || E'            RETURNING h.shard, h.last_pos\n'
        || E'        ), head_list AS (  -- one row: no join of the events with the heads\n'
        || E'            SELECT array_agg(hd.shard) AS s, array_agg(hd.last_pos) AS l FROM heads hd\n'
        || E'        ), logged_events AS (\n'
        || E'            INSERT INTO events (shard, url_key, version, created_at, payload, shard_pos)\n'
        || E'            SELECT d.shard, d.url_key, d.version + 1, p_now, d.payload,\n'
        || E'                   hl.l[array_position(hl.s, d.shard)] - d.n + d.nth\n'
        || E'            FROM (SELECT x.*, count(*) OVER (PARTITION BY x.shard) AS n,\n'
        || E'                         row_number() OVER (PARTITION BY x.shard ORDER BY x.url_key) AS nth\n'
        || E'                  FROM done x) AS d, head_list hl\n'
        || E'            ORDER BY d.shard, d.url_key\n'
        || E'            ON CONFLICT DO NOTHING\n';
BEGIN
    IF position(v_old IN v_def) > 0 THEN
        EXECUTE replace(v_def, v_old, v_new);
    ELSIF position(v_new IN v_def) = 0 AND NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'migration 32: courtier_commit has no events insert to replace';
    END IF;
END $$;
