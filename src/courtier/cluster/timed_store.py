"""A bound on every store call of a worker: a call that hangs becomes a StoreError.

A connection the server dropped mid-operation (a restart, a failover,
``pg_terminate_backend``) can leave a driver call waiting for an answer that
never comes, up to the driver's command timeout (minutes). The worker loop
treats a :class:`~courtier.core.errors.StoreError` as "pause, keep everything in
memory, retry" (worker.py), so turning a hang into one after ``seconds`` is
enough to make it go on. A write that timed out may still have been applied:
every write the worker makes is idempotent or fenced (a repeated commit is
stale and emits nothing; releases and resets name the epoch), so the retry is
safe.

The bound is an :func:`asyncio.timeout` around the call, not :func:`asyncio.wait_for`.
On Python 3.11, ``wait_for`` runs the call as a task of its own and, when its caller is
cancelled in the same loop iteration as that task finishes, returns the result and
drops the cancellation: the caller goes on as if never cancelled. The shard
coordinator's rounds task, cancelled by a stopping worker while a heartbeat was being
answered, kept running its rounds, and the worker waited for it forever (a graceful
stop that never ended, seen after connection cuts; tests/unit/cluster/test_timed_store.py).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, cast

from courtier.core.errors import StoreError
from courtier.store.base import Store

__all__ = ["STORE_CALL_TIMEOUT", "with_call_timeout"]

#: seconds one store call may take before the worker gives up on it and retries
STORE_CALL_TIMEOUT = 30.0

_UNBOUNDED = frozenset({"open", "close"})


class _TimedStore:
    def __init__(self, store: Store, seconds: float) -> None:
        self._store = store
        self._seconds = seconds

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name in _UNBOUNDED or not asyncio.iscoroutinefunction(attr):
            return attr
        return self._bounded(name, attr)

    def _bounded(self, name: str, call: Callable[..., Awaitable[Any]]) -> Any:
        seconds = self._seconds

        @functools.wraps(call)
        async def bounded(*args: Any, **kwargs: Any) -> Any:
            try:
                async with asyncio.timeout(seconds):
                    return await call(*args, **kwargs)
            except TimeoutError:
                raise StoreError(f"store call {name} took longer than {seconds:.0f} s; "
                                 "given up (retried later)") from None

        return bounded


def with_call_timeout(store: Store, seconds: float = STORE_CALL_TIMEOUT) -> Store:
    """``store`` with every call except open/close bounded by ``seconds``."""
    return cast(Store, _TimedStore(store, seconds))
