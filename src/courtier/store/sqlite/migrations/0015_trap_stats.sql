-- courtier SQLite schema, migration 15: trap template statistics follow the shard.
-- One row per host: its TemplateTracker state as an opaque, versioned blob
-- (frontier/trap_state.py), saved by the host's owner on handover and periodically,
-- read by the next owner when it registers the host (store/cluster.py).
CREATE TABLE trap_stats (
    host_key TEXT    PRIMARY KEY,
    shard    INTEGER NOT NULL,
    data     BLOB    NOT NULL,
    saved_at REAL    NOT NULL
) WITHOUT ROWID;
