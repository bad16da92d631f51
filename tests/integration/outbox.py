"""The outbox of an embedded crawl, read back whole (what the feed served)."""

from __future__ import annotations

from pathlib import Path

from courtier.core.records import Event
from courtier.store.sqlite import SqliteStore


async def outbox_events(data: Path, limit: int = 100_000) -> list[Event]:
    """Every event of the SQLite store under ``data`` (up to ``limit``), in id order."""
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        return await store.read_events(0, limit)
    finally:
        await store.close()
