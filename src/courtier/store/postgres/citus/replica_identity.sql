-- Citus only: a replica identity for every partition of the outbox and the fetch log.
--
-- The rebalancer moves a Citus shard by logical replication (citus_rebalance_start,
-- citus_move_shard_placement with shard_transfer_mode 'force_logical' or 'auto'): the
-- source node publishes the shard's changes while its rows are copied. PostgreSQL
-- refuses an UPDATE or DELETE of a published table that has no replica identity
-- ("cannot update table ... because it does not have a replica identity and publishes
-- updates"), and the time partitions of events and fetch_log (migration 23) have no
-- primary key, so without this the outbox sequencer's UPDATE of read_pos and the
-- retention's DELETEs failed on every Citus shard being moved. Events partitions are
-- identified by their unique key (shard, url_key, version, kind): an update logs those
-- columns only. Fetch-log partitions have no unique key and are never updated, so FULL
-- (a DELETE logs the whole row; an INSERT logs the same either way).
--
-- Run by the store's Citus step at every open and after the retention adds a day
-- partition; changes only partitions still without one. Returns how many it changed.
CREATE OR REPLACE FUNCTION courtier_replica_identities() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    v_changed integer := 0;
BEGIN
    FOR r IN
        SELECT c.relname AS name, p.relname AS parent
        FROM pg_inherits i
        JOIN pg_class c ON c.oid = i.inhrelid
        JOIN pg_class p ON p.oid = i.inhparent
        WHERE p.relname IN ('events', 'fetch_log') AND c.relkind = 'r'
          AND p.relnamespace = current_schema()::regnamespace
          AND c.relreplident = 'd'
          AND NOT EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = c.oid AND x.indisprimary)
        ORDER BY c.relname
    LOOP
        IF r.parent = 'events' AND to_regclass(quote_ident(r.name || '_key')) IS NOT NULL THEN
            EXECUTE format('ALTER TABLE %I REPLICA IDENTITY USING INDEX %I', r.name,
                           r.name || '_key');
        ELSE
            EXECUTE format('ALTER TABLE %I REPLICA IDENTITY FULL', r.name);
        END IF;
        v_changed := v_changed + 1;
    END LOOP;
    RETURN v_changed;
END;
$$;
