-- courtier PostgreSQL schema, migration 13: a level's earliest due row from urls_queued_rank.
--
-- The two functions that recompute a (host, priority level)'s next_due_at after rows
-- left it (courtier_levels_refresh: every refill; courtier_queue_refresh: every
-- commit) are those of migration 10 with one change: the seek is ordered by the
-- whole urls_queued_rank key (priority DESC, next_fetch_at, depth, url_key), which
-- with the priority fixed gives the same first next_fetch_at. Ordered by
-- next_fetch_at alone, the planner took urls_queued_host_due and filtered the
-- priority on the heap (a heap page per row of the host's other levels); now it is
-- an index-only range of urls_queued_rank.

-- host_queue rows of these hosts from their host_levels. Both callers have locked (or
-- created) these rows first, so a plain UPDATE by key does what migration 10's upsert
-- did, without its speculative insertion and conflict check per host.
CREATE OR REPLACE FUNCTION courtier_queue_from_levels(p_shards integer[], p_hosts text[])
RETURNS void LANGUAGE sql AS $$
    WITH t AS (
        SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts) AS t(s, h)
    ), agg AS (
        SELECT t.s, t.h, max(l.priority) AS best, min(l.next_due_at) AS due
        FROM t LEFT JOIN host_levels l ON l.shard = t.s AND l.host_key = t.h
        GROUP BY t.s, t.h
    ), emptied AS (
        DELETE FROM host_queue q USING agg a
        WHERE q.shard = a.s AND q.host_key = a.h AND a.best IS NULL
    )
    UPDATE host_queue q SET next_due_at = a.due, best_priority = a.best
    FROM agg a
    WHERE q.shard = a.s AND q.host_key = a.h AND a.best IS NOT NULL
      AND (q.next_due_at <> a.due OR q.best_priority <> a.best);
$$;

CREATE OR REPLACE FUNCTION courtier_levels_refresh(p_shards integer[], p_hosts text[],
                                        p_priority integer[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM host_queue q
    JOIN (SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts) AS t(s, h)) AS t
      ON q.shard = t.s AND q.host_key = t.h
    ORDER BY q.shard, q.host_key FOR UPDATE OF q;
    WITH t AS (
        SELECT DISTINCT s, h, p FROM unnest(p_shards, p_hosts, p_priority) AS t(s, h, p)
    ), fresh AS (
        SELECT t.s, t.h, t.p,
               (SELECT u.next_fetch_at FROM urls u
                 WHERE u.shard = t.s AND u.host_key = t.h AND u.state = 0 AND u.priority = t.p
                   AND u.next_fetch_at IS NOT NULL
                 ORDER BY u.priority DESC, u.next_fetch_at, u.depth, u.url_key LIMIT 1) AS due
        FROM t
    ), emptied AS (
        DELETE FROM host_levels l USING fresh f
        WHERE l.shard = f.s AND l.host_key = f.h AND l.priority = f.p AND f.due IS NULL
    )
    INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
    SELECT s, h, p, due FROM fresh WHERE due IS NOT NULL ORDER BY s, h, p
    ON CONFLICT (shard, host_key, priority) DO UPDATE SET next_due_at = EXCLUDED.next_due_at
        WHERE l.next_due_at <> EXCLUDED.next_due_at;
    PERFORM courtier_queue_from_levels(p_shards, p_hosts);
END;
$$;

-- A commit's hosts: their levels rediscovered by a skip scan of urls_queued_rank in
-- which each step's first row gives both the level and its earliest due time (rank
-- order inside a level is next_fetch_at first, NULLs last), one seek per level
-- instead of two; host_levels is then brought to that by difference (levels gone
-- deleted, changed due times updated, the rest untouched) instead of deleting and
-- re-inserting every level of the host.
CREATE OR REPLACE FUNCTION courtier_queue_refresh(p_shards integer[], p_hosts text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM courtier_queue_lock(p_shards, p_hosts);
    WITH RECURSIVE t AS (
        SELECT DISTINCT s, h FROM unnest(p_shards, p_hosts) AS t(s, h)
    ), lv(s, h, p, due) AS (
        SELECT t.s, t.h, f.priority, f.next_fetch_at FROM t CROSS JOIN LATERAL (
            SELECT u.priority, u.next_fetch_at FROM urls u
            WHERE u.shard = t.s AND u.host_key = t.h AND u.state = 0
            ORDER BY u.priority DESC, u.next_fetch_at, u.depth, u.url_key LIMIT 1) AS f
        UNION ALL
        SELECT lv.s, lv.h, f.priority, f.next_fetch_at FROM lv CROSS JOIN LATERAL (
            SELECT u.priority, u.next_fetch_at FROM urls u
            WHERE u.shard = lv.s AND u.host_key = lv.h AND u.state = 0 AND u.priority < lv.p
            ORDER BY u.priority DESC, u.next_fetch_at, u.depth, u.url_key LIMIT 1) AS f
    ), fresh AS (
        SELECT s, h, p, due FROM lv WHERE due IS NOT NULL
    ), gone AS (
        DELETE FROM host_levels l USING t
        WHERE l.shard = t.s AND l.host_key = t.h
          AND NOT EXISTS (SELECT 1 FROM fresh f
                          WHERE f.s = l.shard AND f.h = l.host_key AND f.p = l.priority)
    )
    INSERT INTO host_levels AS l (shard, host_key, priority, next_due_at)
    SELECT s, h, p, due FROM fresh ORDER BY s, h, p
    ON CONFLICT (shard, host_key, priority) DO UPDATE SET next_due_at = EXCLUDED.next_due_at
        WHERE l.next_due_at <> EXCLUDED.next_due_at;
    PERFORM courtier_queue_from_levels(p_shards, p_hosts);
END;
$$;

-- With the seeks above nothing reads urls_queued_host_due any more (a host's earliest
-- due row is host_levels' business, a shard's is urls_queued_due's); every intake,
-- commit and release paid an entry in it.
DROP INDEX urls_queued_host_due;
