-- courtier PostgreSQL schema, migration 31: outbox positions per shard, assigned at commit
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
-- Who takes positions: on plain PostgreSQL a row trigger of events (every writer: the
-- commit, whose statement inserts in (shard, url_key) order, and the re-parse, which
-- takes its positions first, in shard order, and names them); on Citus, where a trigger
-- of a distributed table would run on the node without the coordinator's transaction,
-- the writers name the positions themselves (citus/commit.sql, the re-parse) and this
-- migration makes no trigger. outbox_heads is distributed by shard beside events
-- (store/postgres/_citus.py): the increment is a router statement on the shard's node.
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
CREATE FUNCTION courtier_take_shard_pos(p_shard integer, p_count integer) RETURNS bigint
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

CREATE FUNCTION courtier_event_shard_pos() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.shard_pos IS NULL THEN  -- a writer that named its position keeps it
        NEW.shard_pos := courtier_take_shard_pos(NEW.shard, 1);
    END IF;
    RETURN NEW;
END;
$$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        CREATE TRIGGER events_shard_pos BEFORE INSERT ON events
            FOR EACH ROW EXECUTE FUNCTION courtier_event_shard_pos();
    END IF;
END $$;
