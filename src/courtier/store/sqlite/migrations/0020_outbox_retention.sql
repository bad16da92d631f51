-- courtier SQLite schema, migration outbox_retention: the retention of the outbox and the audit log
-- (docs/scale-out.md "Bounded growth"). Old events and audit rows are removed in
-- bounded batches, oldest id first; pruned_through is the highest event id removed, so
-- a reader below it is told its position was pruned instead of skipping events, and a
-- newly registered consumer starts there.
CREATE TABLE outbox_retention (
    only_row       INTEGER PRIMARY KEY CHECK (only_row = 1),
    pruned_through INTEGER NOT NULL
);
INSERT INTO outbox_retention (only_row, pruned_through) VALUES (1, 0);
