"""Citus's own account of what a store call does with rows: its planner messages.

:func:`watching` wraps a :class:`~courtier.store.postgres.PostgresStore`'s calls so that
every statement they send (and every statement inside the PL/pgSQL functions those
call) runs with ``client_min_messages = debug2``; the coordinator's messages land in
a list, each prefixed by the store operation (``[commit] …``).

:func:`pulls` reads them. Citus runs a subquery or CTE it cannot push down as a
*subplan*: "generating subplan 42_1 for CTE done: UPDATE public.urls … RETURNING …"; its
rows are collected on the coordinator as an intermediate result (``42_1``), and the
rest of the statement, replanned ("Plan 42 query after replacing subqueries and CTEs:
…"), reads them with ``read_intermediate_result('42_1', …)``. A *pull* is rows of a
distributed table that go node → coordinator → node that way: a subplan that reads a
distributed table (``FROM`` / ``JOIN public.urls``) or returns rows it wrote
(``… public.urls … RETURNING``), whose intermediate result a later statement sends to
the nodes again (a statement that reads or writes a distributed table). A subplan
whose rows only the coordinator reads (an aggregate of them into the statement's
result, a function's variables) is the statement's own result coming back, as a
multi-shard SELECT's rows do, and is not counted.

Not seen here: rows a PL/pgSQL function carries in variables from one statement to
the next (the refill's walk, the intake's known keys); each statement is judged alone.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from courtier.store.postgres import PostgresStore, _citus

#: tables distributed by shard or digest (their rows live on the worker nodes)
DISTRIBUTED = tuple(p.table for p in _citus.PLAN if p.kind == "distributed")
_MESSAGE = re.compile(r"\[(\w+)\] (.*)", re.S)
_SUBPLAN = re.compile(r"generating subplan (\d+)_(\d+) for (subquery|CTE (\w+):) (.*)", re.S)
_REPLANNED = re.compile(r"Plan (\d+) query after replacing subqueries and CTEs: (.*)", re.S)
_ROUTED = ("Creating router plan", "Router planner cannot handle multi-shard",
           "distributed statement:", "Distributed planning for a fast-path router query",
           "Deferred pruning for a fast-path router query")


@dataclass(frozen=True, order=True)
class Pull:
    """Rows of ``table`` collected on the coordinator by a store call ``op`` and sent to
    the nodes again; ``via`` names the subplan (its CTE, or "subquery")."""

    op: str
    table: str
    via: str


def watching(store: PostgresStore, level: str = "debug2", remote: bool = False) -> list[str]:
    """Start collecting the planner messages of ``store``'s calls; the list they go to.
    ``remote``: Citus's log of the commands it sends to the nodes instead
    (``citus.log_remote_commands``; each message ends with `` @@ `` and its detail,
    which names the node), read by :func:`nodes_written`."""
    messages: list[str] = []
    run = store._run  # the one place every call's connection passes
    setting = ("citus.log_remote_commands", "on") if remote else ("client_min_messages", level)

    async def watched_run(op: str, fn: Callable[[Any], Awaitable[Any]],
                          *args: Any, **kwargs: Any) -> Any:
        async def watched(conn: Any) -> Any:
            def listener(_conn: Any, message: Any) -> None:
                detail = f" @@ {getattr(message, 'detail', '')}" if remote else ""
                messages.append(f"[{op}] {message.message}{detail}")

            conn.add_log_listener(listener)
            await conn.execute(f"SET {setting[0]} = {setting[1]}")
            try:
                return await fn(conn)
            finally:
                await conn.execute(f"RESET {setting[0]}")
                conn.remove_log_listener(listener)

        return await run(op, watched, *args, **kwargs)

    store._run = watched_run  # type: ignore[method-assign]
    return messages


def _reads_distributed(sql: str) -> set[str]:
    return {t for t in DISTRIBUTED if re.search(rf"\b(?:FROM|JOIN) \(*public\.{t}\b", sql)}


def _writes_distributed(sql: str) -> set[str]:
    return {t for t in DISTRIBUTED
            if re.search(rf"^\s*(?:UPDATE|DELETE FROM|INSERT INTO) public\.{t}\b", sql)}


def pulls(messages: list[str]) -> set[Pull]:
    """The pulls (see the module's docstring) the planner messages show."""
    sources: dict[str, tuple[str, str, set[str]]] = {}  # subplan id -> op, via, tables
    consumers: list[tuple[str, str]] = []  # (statement sent to the nodes, its op)
    for line in messages:
        tagged = _MESSAGE.match(line)
        if tagged is None:
            continue
        op, message = tagged.groups()
        subplan = _SUBPLAN.match(message)
        if subplan is not None:
            plan, nth, _, cte, sql = subplan.groups()
            body = sql.lstrip("( ")
            tables = _reads_distributed(body) if body.upper().startswith("SELECT") else (
                _writes_distributed(body) if " RETURNING " in body else set())
            sources[f"{plan}_{nth}"] = (op, cte or "subquery", tables)
            if _reads_distributed(sql) or _writes_distributed(body):
                consumers.append((sql, op))
            continue
        replanned = _REPLANNED.match(message)
        if replanned is not None:
            sql = replanned.group(2)
            if _reads_distributed(sql) or _writes_distributed(sql):
                consumers.append((sql, op))
    found: set[Pull] = set()
    for ident, (op, via, tables) in sources.items():
        used = f"read_intermediate_result('{ident}'"
        if tables and any(used in sql for sql, _ in consumers):
            found |= {Pull(op, table, via) for table in tables}
    return found


def planned(messages: list[str], op: str) -> bool:
    """True when Citus planned at least one distributed statement of ``op`` (so an empty
    :func:`pulls` means something: the messages were seen)."""
    return any(line.startswith(f"[{op}] ") and any(m in line for m in _ROUTED)
               for line in messages)


_TAGGED = re.compile(r"\[(\w+)\] issuing (.*) @@ .*on server \S+@(\S+)", re.S)
_WRITE = re.compile(
    rf"(?:INSERT INTO|UPDATE|DELETE FROM|COPY) public\.({'|'.join(DISTRIBUTED)})_\d+\b")


def nodes_written(messages: list[str], op: str) -> dict[str, set[str]]:
    """The worker nodes (``host:port``) on which the calls ``op`` wrote each distributed
    table (messages of :func:`watching` with ``remote``)."""
    written: dict[str, set[str]] = {}
    for line in messages:
        tagged = _TAGGED.match(line)
        if tagged is None or tagged.group(1) != op:
            continue
        for table in _WRITE.findall(tagged.group(2)):  # a CTE's writes too (WITH … UPDATE)
            written.setdefault(table, set()).add(tagged.group(3))
    return written
