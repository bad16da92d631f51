-- courtier PostgreSQL schema, migration 11: trap template statistics follow the shard.
-- One row per host: its TemplateTracker state as an opaque, versioned blob
-- (frontier/trap_state.py), saved by the host's owner on handover and periodically,
-- read by the next owner when it registers the host (store/cluster.py). Keyed like
-- host_clocks: the shard the host key names comes first.
CREATE TABLE trap_stats (
    shard    integer          NOT NULL,
    host_key text             NOT NULL,
    data     bytea            NOT NULL,
    saved_at double precision NOT NULL,
    PRIMARY KEY (shard, host_key)
);
