-- courtier PostgreSQL schema, migration 11: left empty on this branch (the number is
-- reserved for another change developed in parallel; the loader wants no gaps).
SELECT 1;
