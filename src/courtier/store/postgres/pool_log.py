"""asyncpg's pool warning at a server outage, made one line.

While the server is down or restarting, asyncpg's pool tries to bring its connections back
up to its minimum size every few seconds and logs each failed try as a WARNING *with the
whole traceback* (``Failed to restore the pool connection floor; retrying``): a screenful
of driver frames a try, which buries the worker's own account of the outage (its pause,
its fence, its reconnect) in the log an operator reads. The filter here keeps the warning
and its reason, on one line, and drops the traceback; every other record of the
``asyncpg.pool`` logger passes unchanged.
"""

from __future__ import annotations

import logging

__all__ = ["ASYNCPG_POOL_LOGGER", "OneLineFloorWarnings", "install"]

#: the logger asyncpg's pool writes to
ASYNCPG_POOL_LOGGER = "asyncpg.pool"

_FLOOR_WARNING = "Failed to restore the pool connection floor"


class OneLineFloorWarnings(logging.Filter):
    """Rewrites the pool's floor warning to one line naming the error; passes the rest."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith(_FLOOR_WARNING)):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        reason = f"{type(exc).__name__}: {exc}" if exc is not None else "unknown error"
        record.msg = f"{_FLOOR_WARNING} (reconnecting to the PostgreSQL server): {reason}"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


def install() -> None:
    """Put the filter on asyncpg's pool logger once per process (idempotent)."""
    logger = logging.getLogger(ASYNCPG_POOL_LOGGER)
    if not any(isinstance(f, OneLineFloorWarnings) for f in logger.filters):
        logger.addFilter(OneLineFloorWarnings())
