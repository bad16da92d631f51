-- courtier PostgreSQL schema, migration 11: reserved for another branch's step (no-op here).
-- Replace this file with that step when the branches merge.
SELECT 1;
