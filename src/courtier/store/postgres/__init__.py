"""The PostgreSQL store (asyncpg): the shared, partitioned store of a scaled-out crawl."""

from courtier.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
