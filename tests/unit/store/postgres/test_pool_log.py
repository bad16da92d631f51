"""asyncpg's pool warning during a server outage is one line with its reason.

Seen red with ``install`` made a no-op: the handler's text held the traceback (the
"Traceback (most recent call last)" header and the ``ConnectionRefusedError`` frame lines),
so the first assertion failed.
"""

from __future__ import annotations

import io
import logging

from courtier.store.postgres.pool_log import ASYNCPG_POOL_LOGGER, install


def _emit_like_asyncpg(logger: logging.Logger) -> None:
    try:
        raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")
    except ConnectionRefusedError:
        logger.warning("Failed to restore the pool connection floor; retrying", exc_info=True)


def test_the_floor_warning_is_one_line_naming_the_error_and_others_pass() -> None:
    logger = logging.getLogger(ASYNCPG_POOL_LOGGER)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    logger.addHandler(handler)
    try:
        install()
        install()  # idempotent: one filter, one line
        _emit_like_asyncpg(logger)
        logger.warning("something else %s", "entirely")
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert lines == [
        "WARNING asyncpg.pool Failed to restore the pool connection floor (reconnecting to"
        " the PostgreSQL server): ConnectionRefusedError: [Errno 111] Connect call failed"
        " ('127.0.0.1', 5432)",
        "WARNING asyncpg.pool something else entirely",
    ]
