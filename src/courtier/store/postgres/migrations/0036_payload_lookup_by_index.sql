-- courtier PostgreSQL schema, migration 36: the payload look-up always probes the
-- payloads key, never scans the table.
--
-- Every fetched 2xx page asks where its digest was archived first, batched up to 256
-- digests a statement (dedup/payload_lookups.py). As one plain statement,
-- "digest = ANY($1)" let the planner choose a sequential scan of payloads whenever it
-- costed that below one key probe a digest (by hand: 500 digests on 12,000 rows).
-- The scan compares every row with the digests: on the realistic 1,000 x 20 bench
-- web a crawl on main ran 333 such scans reading 1.4 M rows in its first 50 s, and
-- perf found a quarter of the backends' CPU in that statement's texteq calls for a
-- minute of another crawl (bench/README.md, "Where PostgreSQL's CPU goes"). Probes
-- cost O(digests x log rows) whatever the statistics say.
--
-- The look-up becomes a function that turns sequential scans off for its one
-- statement (the commit functions of migrations 16 and 30 fix their plans the same
-- way). The Citus store keeps the plain statement (Citus's planner cannot make a
-- distributed plan with sequential scans off); the function exists there too, unused.
CREATE OR REPLACE FUNCTION courtier_payload_locations(p_digests text[])
RETURNS TABLE (digest text, warc_file text, warc_offset bigint, url text,
               fetched_at double precision)
LANGUAGE sql STABLE SET enable_seqscan = off AS $$
    SELECT p.digest, p.warc_file, p.warc_offset, p.url, p.fetched_at
    FROM payloads p WHERE p.digest = ANY(p_digests)
$$;
