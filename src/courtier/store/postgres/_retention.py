"""PostgreSQL side of the outbox and audit-log retention (migration time_partitions; the
bookkeeping table is ``day_partitions`` since migration 0028): day partitions
made ahead, dropped whole once old enough, and bounded DELETEs in the default partition.

The sequencer (``courtier_sequence_events``) runs only when something is old enough to
be removed: a crawl younger than the retention never places its events for it (the
per-shard positions need no sequencer; ``read_events`` readers still run it).

A partition of ``events`` is dropped only under a lock that no writer holds (``ACCESS
EXCLUSIVE`` on the table, with a short ``lock_timeout``: a busy moment is skipped, not
waited for, and the next run tries again), after the sequencer has placed every
committed event, and only when it holds no unplaced event and no position above the
lowest registered consumer's. So an event whose transaction commits late is either
placed before the check, or still open and holding its own lock on the table (then the
drop waits for it, up to the timeout). ``consumer_cursors`` and ``shard_consumers`` are
locked in the same transaction, so a consumer registering meanwhile starts at the new
``pruned_through`` (per shard: the new ``pruned_pos``). An event a per-shard consumer has
not read in its shard is kept (``store/consumer_floors.py``), the same filter in the
bounded DELETE and in the check of a whole partition.

*By shard alone* (:func:`_prune_by_shard`): while no crawl-wide consumer is registered
(``consumer_cursors`` empty, checked under its lock) nothing needs the crawl-wide order,
so the sequencer does not run: a day partition goes once every per-shard consumer has
read all of it, then rows (of the default partition, or of an old day partition kept for
another shard's held rows) go by ``(shard, shard_pos)``, each shard's ``pruned_pos``
raised first, every statement a plain filter of the row or a join of two
tables co-located by shard (pushed down on Citus, no row to the coordinator).
``pruned_through`` is still kept for ``read_events`` readers: the highest ``read_pos``
removed, and when an event never placed was removed, a position burnt above every one
handed out (``last_position + 1``), so that any reader who could have expected it is
refused (:class:`EventsPruned`) instead of skipping it silently.
"""

from __future__ import annotations

import contextlib

import asyncpg

from courtier.core.errors import EventsPruned
from courtier.store.consumer_floors import floors, floors_json
from courtier.store.postgres import _shard_consumers
from courtier.store.postgres._citus import REPLICA_IDENTITIES
from courtier.store.postgres._rows import Conn

__all__ = ["DAYS_AHEAD", "PARTITIONS_PER_CALL", "add_partitions", "events_pruned",
           "prune_audit", "prune_events", "pruned_through"]

DAY = 86_400.0
#: day partitions made ahead of today (UTC), so a day's rows never land in the default
DAYS_AHEAD = 2
#: whole partitions one call drops at most, per table (each is a catalog change)
PARTITIONS_PER_CALL = 4
#: how long a drop or a new partition waits for its lock before it gives up until the
#: next run (writers queue behind a waiting ACCESS EXCLUSIVE request meanwhile)
LOCK_TIMEOUT = "2s"
#: the SQLSTATE ``courtier_read_events`` raises for a position below pruned_through
PRUNED_STATE = "CP410"
#: the sequencer's advisory lock (migration 0006)
_SEQUENCER_LOCK = (1129270868, 0)


def events_pruned(exc: BaseException, after: int) -> EventsPruned | None:
    """The :class:`EventsPruned` a driver error of ``courtier_read_events`` stands for."""
    if isinstance(exc, asyncpg.PostgresError) and \
            getattr(exc, "sqlstate", None) == PRUNED_STATE:
        return EventsPruned(after, int(str(getattr(exc, "detail", "0") or "0")))
    return None


async def pruned_through(conn: Conn) -> int:
    return int(await conn.fetchval("SELECT pruned_through FROM outbox_sequencer") or 0)


async def add_partitions(conn: Conn, now: float, on_citus: bool = False) -> int:
    """Make today's and :data:`DAYS_AHEAD` following days' partitions of both tables
    (those missing); a partition whose lock is busy is left for the next run, one another
    process made meanwhile is taken as made. Called when the store opens (so a new
    store's first day is a partition too: a day's rows already in the default partition
    keep that day's partition from being made, and the retention then removes them row by
    row instead of dropping a partition) and by every retention run. On Citus
    (``on_citus``) the new partitions get their replica identity (``_citus``)."""
    made = 0
    today = int(now // DAY)
    for table in ("events", "fetch_log"):
        for day in range(today, today + DAYS_AHEAD + 1):
            if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{table}_d{day}"):
                continue
            try:
                async with conn.transaction():
                    await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                    made += bool(await conn.fetchval(
                        "SELECT courtier_add_day_partition($1, $2)", table, day))
            except (asyncpg.LockNotAvailableError, asyncpg.DuplicateTableError):
                continue  # busy, or made by another process meanwhile: nothing to do
    if made and on_citus:
        await conn.execute(REPLICA_IDENTITIES)
    return made


#: an event every per-shard consumer has read ({floors}: their floors as a JSON object,
#: NULL when none is registered; ``store/consumer_floors.py``): a plain expression of the
#: row, so on Citus it runs on every worker with the rest of the filter
_READ_BY_SHARD = ("({floors}::jsonb IS NULL"
                  " OR shard_pos <= coalesce(({floors}::jsonb ->> shard::text)::bigint, 0))")
#: the oldest placed events of the default partition, at most $3, up to position $2,
#: read by every per-shard consumer ($4)
_DELETE_EVENTS = (
    "WITH doomed AS (SELECT ctid FROM events_default"
    " WHERE created_at < $1 AND read_pos IS NOT NULL AND read_pos <= $2"
    " AND " + _READ_BY_SHARD.format(floors="$4") + " ORDER BY read_pos LIMIT $3),"
    " gone AS (DELETE FROM events_default e USING doomed d WHERE e.ctid = d.ctid"
    " RETURNING e.read_pos, e.shard, e.shard_pos)"
    " SELECT count(*), max(read_pos), array_agg(shard), array_agg(shard_pos) FROM gone")
#: the same on Citus, by (shard, read_pos): a row address (ctid) is one Citus shard's, and
#: the rows chosen across Citus shards are collected on the coordinator before the DELETE
#: runs on every Citus shard, where the same ctid names another row (read_pos is unique:
#: the sequencer hands each position out once)
_DELETE_EVENTS_CITUS = (
    "WITH doomed AS (SELECT shard, read_pos FROM events_default"
    " WHERE created_at < $1 AND read_pos IS NOT NULL AND read_pos <= $2"
    " AND " + _READ_BY_SHARD.format(floors="$4") + " ORDER BY read_pos LIMIT $3),"
    " gone AS (DELETE FROM events_default e USING doomed d"
    " WHERE e.shard = d.shard AND e.read_pos = d.read_pos"
    " RETURNING e.read_pos, e.shard, e.shard_pos)"
    " SELECT count(*), max(read_pos), array_agg(shard), array_agg(shard_pos) FROM gone")
#: each shard's highest position among the events about to be removed ({source}: the
#: rows, as ``g(shard, shard_pos)``) raises its head's ``pruned_pos``: a per-shard reader
#: below it is refused (``shard_reads.check_unpruned``) instead of skipping them
_MARK_PRUNED = (
    "UPDATE outbox_heads h SET pruned_pos = greatest(h.pruned_pos, m.top)"
    " FROM (SELECT g.shard, max(g.shard_pos) AS top FROM {source}"
    " WHERE g.shard_pos IS NOT NULL GROUP BY g.shard) AS m WHERE h.shard = m.shard")
#: an event of the default partition older than the cut $1 (one index-less probe: the
#: default partition holds only rows no day partition took)
_HAS_OLD_DEFAULT = "SELECT EXISTS (SELECT 1 FROM events_default WHERE created_at < $1)"
#: the oldest audit rows of the default partition, at most $2
_DELETE_AUDIT = (
    "DELETE FROM fetch_log_default WHERE ctid IN (SELECT ctid FROM fetch_log_default"
    " WHERE fetched_at < $1 ORDER BY fetched_at LIMIT $2)")
#: the same on Citus, by (shard, id) (ids come from one sequence: unique)
_DELETE_AUDIT_CITUS = (
    "DELETE FROM fetch_log_default f USING (SELECT shard, id FROM fetch_log_default"
    " WHERE fetched_at < $1 ORDER BY fetched_at LIMIT $2) AS d"
    " WHERE f.shard = d.shard AND f.id = d.id")

#: a partition never analysed (nor vacuumed) of fewer pages than this is counted
#: exactly when dropped; a larger one counts as its estimate
_COUNT_BELOW_PAGES = 1_000


async def _old_partitions(conn: Conn, table: str, before: float) -> list[tuple[str, float]]:
    """Up to :data:`PARTITIONS_PER_CALL` partitions of ``table`` wholly before ``before``,
    oldest first, each with its row count (PostgreSQL's estimate for a large one)."""
    rows = await conn.fetch(
        "SELECT t.name, c.reltuples, c.relpages, c.reltuples < 0 OR coalesce("
        " a.last_analyze IS NULL AND a.last_autoanalyze IS NULL AND a.last_vacuum IS NULL"
        " AND a.last_autovacuum IS NULL, true) FROM day_partitions t"
        " JOIN pg_class c ON c.relname = t.name"
        " LEFT JOIN pg_stat_user_tables a ON a.relid = c.oid"
        " WHERE t.parent = $1 AND t.hi <= $2 ORDER BY t.hi LIMIT $3",
        table, before, PARTITIONS_PER_CALL)
    out: list[tuple[str, float]] = []
    for name, estimate, pages, unanalysed in rows:
        # never analysed: reltuples is -1, or what an index build saw (migration 0032's)
        if unanalysed and pages < _COUNT_BELOW_PAGES:
            estimate = await conn.fetchval(f'SELECT count(*) FROM "{name}"')
        out.append((str(name), max(0.0, float(estimate))))
    return out


async def _has_old(conn: Conn, table: str, before: float) -> bool:
    return bool(await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM day_partitions WHERE parent = $1 AND hi <= $2)",
        table, before))


async def _drop(conn: Conn, name: str) -> None:
    await conn.execute(f'DROP TABLE "{name}"')
    await conn.execute("DELETE FROM day_partitions WHERE name = $1", name)


async def prune_events(conn: Conn, before: float, limit: int, now: float,
                       on_citus: bool = False) -> int:
    """See ``Store.prune_events``: whole day partitions first, then at most ``limit``
    rows of the default partition (``on_citus``: by key, see :data:`_DELETE_EVENTS_CITUS`);
    by shard alone, without the sequencer, while no crawl-wide consumer is registered
    (the module docstring)."""
    await add_partitions(conn, now, on_citus)
    old_partitions = await _has_old(conn, "events", before)
    if not old_partitions and not await conn.fetchval(_HAS_OLD_DEFAULT, before):
        return 0  # nothing old enough: no need to place the events (the sequencer)
    if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM consumer_cursors)"):
        return await _prune_by_shard(conn, before, limit, old_partitions)
    async with conn.transaction():
        await conn.fetchval("SELECT courtier_sequence_events()")
    removed = 0
    if old_partitions:
        with contextlib.suppress(asyncpg.LockNotAvailableError):  # busy: the next run
            removed += await _drop_event_partitions(conn, before)
    async with conn.transaction():
        lowest, by_shard = await _lock_consumers(conn)
        row = await conn.fetchrow(
            _DELETE_EVENTS_CITUS if on_citus else _DELETE_EVENTS,
            before, 2**63 - 1 if lowest is None else int(lowest), max(0, limit), by_shard)
        if row is not None and row[0]:
            removed += int(row[0])
            await conn.execute("UPDATE outbox_sequencer"
                               " SET pruned_through = greatest(pruned_through, $1)", row[1])
            await conn.execute(_MARK_PRUNED.format(
                source="unnest($1::integer[], $2::bigint[]) AS g(shard, shard_pos)"),
                row[2], row[3])
    return removed


#: the shard-only prune's filter of an event ``e`` joined with its head ``h``: old enough
#: ($1: only the partitions before it and the default one are read), read by every
#: per-shard consumer ($2), at most at the head's ``pruned_pos`` ({window}: that plus the
#: call's bound per shard, $3). Rows of a day partition that must stay whole (another
#: shard's rows in it are held) go this way too.
_BY_SHARD_ROWS = ("e.shard = h.shard AND e.created_at < $1 AND e.shard_pos <= {window}"
                  " AND ($2::jsonb IS NULL"
                  " OR e.shard_pos <= coalesce(($2::jsonb ->> e.shard::text)::bigint, 0))")
#: each shard's ``pruned_pos`` rises to its highest removable row in a window of $3
#: positions above it (a bound on one call's work in each shard)
_MARK_BY_SHARD = (
    "UPDATE outbox_heads t SET pruned_pos = m.top FROM (SELECT e.shard, max(e.shard_pos)"
    " AS top FROM events e JOIN outbox_heads h ON "
    + _BY_SHARD_ROWS.format(window="h.pruned_pos + $3") + " GROUP BY e.shard) AS m"
    " WHERE t.shard = m.shard AND m.top > t.pruned_pos")
_TO_REMOVE = _BY_SHARD_ROWS.format(window="h.pruned_pos")
#: what the rows about to be removed mean for ``read_events`` readers
_REMOVED_POSITIONS = ("SELECT max(e.read_pos), coalesce(bool_or(e.read_pos IS NULL), false)"
                      " FROM events e JOIN outbox_heads h ON " + _TO_REMOVE)
_DELETE_BY_SHARD = "DELETE FROM events e USING outbox_heads h WHERE " + _TO_REMOVE
#: ``pruned_through`` after removing events up to ``read_pos`` $1, and ($2) events
#: never placed: a position burnt above every one handed out
_RAISE_PRUNED_THROUGH = (
    "UPDATE outbox_sequencer SET last_position = last_position + $2::boolean::int,"
    " pruned_through = greatest(pruned_through, coalesce($1, 0),"
    " CASE WHEN $2 THEN last_position + 1 ELSE 0 END)")


async def _prune_by_shard(conn: Conn, before: float, limit: int,
                          old_partitions: bool) -> int:
    """Whole day partitions every per-shard consumer has read, then old rows by shard
    (module docstring); each part in a transaction of its
    own that first checks, under the consumers' lock, that no crawl-wide consumer was
    registered meanwhile (then it removes nothing: the next run takes the crawl-wide
    way)."""
    removed = 0
    if old_partitions:
        with contextlib.suppress(asyncpg.LockNotAvailableError):  # busy: the next run
            removed += await _drop_partitions_by_shard(conn, before)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", *_SEQUENCER_LOCK)
        lowest, by_shard = await _lock_consumers(conn)
        if lowest is not None:
            return removed
        await conn.execute(_MARK_BY_SHARD, before, by_shard, max(1, limit))
        row = await conn.fetchrow(_REMOVED_POSITIONS, before, by_shard)
        top, unplaced = (row[0], bool(row[1])) if row is not None else (None, False)
        status = await conn.execute(_DELETE_BY_SHARD, before, by_shard)
        count = int(status.rsplit(" ", 1)[-1])
        if count:
            await conn.execute(_RAISE_PRUNED_THROUGH, top, unplaced)
        removed += count
    return removed


async def _drop_partitions_by_shard(conn: Conn, before: float) -> int:
    """The day partitions wholly before ``before`` that every per-shard consumer has read,
    oldest first, under the lock no writer holds (every event in them committed); the
    sequencer's lock too, so that it places nothing meanwhile from a stale position."""
    removed = 0
    async with conn.transaction():
        await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", *_SEQUENCER_LOCK)
        lowest, by_shard = await _lock_consumers(conn)
        if lowest is not None:
            return 0
        await conn.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
        top: int | None = None
        unplaced = False
        for name, estimate in await _old_partitions(conn, "events", before):
            if await conn.fetchval(f'SELECT EXISTS (SELECT 1 FROM "{name}" WHERE NOT '
                                   f'{_READ_BY_SHARD.format(floors="$1")})', by_shard):
                break  # newer partitions wait for this one: removal stays oldest first
            row = await conn.fetchrow(
                f'SELECT max(read_pos), coalesce(bool_or(read_pos IS NULL), false)'
                f' FROM "{name}"')
            high, never = (row[0], row[1]) if row is not None else (None, False)
            await conn.execute(_MARK_PRUNED.format(source=f'"{name}" AS g'))
            await _drop(conn, name)
            removed += int(estimate)
            top = high if top is None or (high is not None and high > top) else top
            unplaced = unplaced or bool(never)
        if removed or top is not None or unplaced:
            await conn.execute(_RAISE_PRUNED_THROUGH, top, unplaced)
    return removed


async def _lock_consumers(conn: Conn) -> tuple[int | None, str | None]:
    """In the pruning transaction: lock both consumer tables against new registrations
    and advances; the lowest crawl-wide position (None: no such consumer) and the
    per-shard consumers' floors as JSON (None: no such consumer)."""
    await conn.execute("LOCK TABLE consumer_cursors, shard_consumers"
                       " IN SHARE ROW EXCLUSIVE MODE")
    lowest = await conn.fetchval("SELECT min(position) FROM consumer_cursors")
    cursors = await _shard_consumers.all_cursors(conn)
    return lowest, floors_json(floors(cursors.values()))


async def _drop_event_partitions(conn: Conn, before: float) -> int:
    removed = 0
    async with conn.transaction():
        await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", *_SEQUENCER_LOCK)
        lowest, by_shard = await _lock_consumers(conn)
        await conn.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
        through = await pruned_through(conn)
        for name, estimate in await _old_partitions(conn, "events", before):
            held = await conn.fetchval(
                f'SELECT EXISTS (SELECT 1 FROM "{name}" WHERE read_pos IS NULL'
                f' OR NOT {_READ_BY_SHARD.format(floors="$1")})', by_shard)
            top = await conn.fetchval(f'SELECT max(read_pos) FROM "{name}"')
            if held or (lowest is not None and top is not None and top > lowest):
                break  # newer partitions wait for this one: removal stays oldest first
            await conn.execute(_MARK_PRUNED.format(source=f'"{name}" AS g'))
            await _drop(conn, name)
            removed += int(estimate)
            if top is not None:
                through = max(through, int(top))
        await conn.execute("UPDATE outbox_sequencer SET pruned_through = $1", through)
    return removed


async def prune_audit(conn: Conn, before: float, limit: int, now: float,
                      on_citus: bool = False) -> int:
    """See ``Store.prune_audit``: whole day partitions, then at most ``limit`` rows of the
    default partition (``on_citus``: by key)."""
    await add_partitions(conn, now, on_citus)
    removed = 0
    if await _has_old(conn, "fetch_log", before):
        with contextlib.suppress(asyncpg.LockNotAvailableError):  # busy: the next run
            async with conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                await conn.execute("LOCK TABLE fetch_log IN ACCESS EXCLUSIVE MODE")
                for name, estimate in await _old_partitions(conn, "fetch_log", before):
                    await _drop(conn, name)
                    removed += int(estimate)
    status = await conn.execute(_DELETE_AUDIT_CITUS if on_citus else _DELETE_AUDIT,
                                before, max(0, limit))
    return removed + int(status.rsplit(" ", 1)[-1])
