-- courtier SQLite schema, migration 18: registered consumer cursors. A consumer of the
-- event feed (`courtier events --consumer NAME`, `courtier index --consumer NAME`) keeps
-- its position here: the id of the last event it has consumed. A position only moves
-- forward (the store keeps the larger of the old and the new one). It is what a future
-- pruning of the outbox must not cut below (not built yet: docs/events.md).
CREATE TABLE consumer_cursors (
    name       TEXT    PRIMARY KEY,
    position   INTEGER NOT NULL,
    updated_at REAL    NOT NULL
) WITHOUT ROWID;
