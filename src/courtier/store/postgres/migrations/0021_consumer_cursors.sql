-- courtier PostgreSQL schema, migration 21: registered consumer cursors. A consumer of
-- the event feed (`courtier events --consumer NAME`, `courtier index --consumer NAME`)
-- keeps its position here: the read position (the event id of the feed) of the last
-- event it has consumed. A position only moves forward (the store keeps the larger of
-- the old and the new one). It is what a future pruning of the outbox must not cut
-- below (not built yet: docs/events.md).
CREATE TABLE consumer_cursors (
    name       text             PRIMARY KEY,
    position   bigint           NOT NULL,
    updated_at double precision NOT NULL
);
