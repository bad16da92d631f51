"""The embedded SQLite store (default for one process on one machine).

See :class:`SqliteStore`; the schema lives in numbered migrations under
``migrations/``.
"""

from courtier.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
