"""The PostgreSQL store (asyncpg): the shared, partitioned store of a scaled-out crawl.

``PostgresStore`` (and with it asyncpg) loads on first use, so that importing
``courtier.store.postgres.dsn`` (the CLI does, to parse ``--store``) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from courtier.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        from courtier.store.postgres.store import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
