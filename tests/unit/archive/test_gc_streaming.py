"""``courtier archive gc`` over a pruned outbox, read URL by URL (archive/retention.py).

Seen red: without the ``warc_files_in_use`` check, the shared file of the first test was
deleted (``files_deleted == ['shared.warc.gz']``) although URL x's row points into it;
with ``URLS_PER_PAGE`` ignored (one call for everything), the second test's store saw a
call for all 9 URLs (``max(asked) == 9``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.archive import retention
from courtier.archive.retention import Consumed, RetentionRule, collect_garbage
from courtier.core.clock import VirtualClock
from courtier.core.outcome import Outcome
from courtier.store.base import Event, FetchCommit, NewUrl
from courtier.store.memory import MemoryStore

T0 = 1_700_000_000.0
DAY = 86_400.0


def url_key(name: str) -> bytes:
    return name.encode().ljust(16, b"\0")


async def capture(store: MemoryStore, name: str, version: int, file: str, offset: int,
                  digest: str) -> None:
    """A fetch of ``name`` (its version ``version`` → ``version + 1``) recorded at
    ``file``/``offset``: the row points there, the event names it."""
    key = url_key(name)
    if version == 0:
        await store.add_urls([NewUrl(key, f"http://{name}.test/", f"{name}.test", 1, 0, 0,
                                     T0, T0)])
    await store.load_due([1], T0 + 100 * DAY, 100, 100)
    fetched_at = store.clock.now()
    commit = FetchCommit(
        url_key=key, url=f"http://{name}.test/", host_key=f"{name}.test", shard=1,
        version=version, epoch=0, outcome=Outcome.OK, fetched_at=fetched_at,
        next_fetch_at=T0, status=200, warc_file=file, warc_offset=offset, warc_length=10,
        payload_digest=digest,
        event={"kind": "fetch", "fetched_at": fetched_at, "payload_digest": digest,
               "warc": {"file": file, "offset": offset, "length": 10, "revisit": False}})
    assert (await store.commit([commit])).applied == 1


def files(root: Path, *names: str) -> str:
    root.mkdir()
    for name in names:
        (root / name).write_bytes(b"")
    return str(root)


async def test_a_file_a_row_points_into_stays_when_its_event_was_pruned(
        tmp_path: Path) -> None:
    clock = VirtualClock(T0)
    store = MemoryStore(clock=clock)
    root = files(tmp_path / "warc", "shared.warc.gz", "newer.warc.gz")
    await capture(store, "x", 0, "shared.warc.gz", 0, "dx")      # x's only capture
    # expired below; the same payload as x's, so not the payload index's first copy
    await capture(store, "y", 0, "shared.warc.gz", 100, "dx")
    clock.advance(DAY)
    await capture(store, "y", 1, "newer.warc.gz", 0, "dy2")
    assert await store.prune_events(T0 + 1, 1) == 1  # x's event goes, its record stays
    report = await collect_garbage(store, root, RetentionRule(keep_last=1), clock.now(),
                                   Consumed(up_to=10))
    assert report.files_deleted == []
    assert (tmp_path / "warc" / "shared.warc.gz").exists()
    assert report.captures_expired == 1 and report.kept_live == 1


async def test_the_outbox_is_read_a_page_of_urls_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = VirtualClock(T0)
    store = MemoryStore(clock=clock)
    names = [f"u{n}" for n in range(9)]
    root = files(tmp_path / "warc", *(f"{n}-{v}.warc.gz" for n in names for v in (1, 2)))
    for name in names:
        await capture(store, name, 0, f"{name}-1.warc.gz", 0, f"{name}-a")
    clock.advance(DAY)
    for name in names:
        await capture(store, name, 1, f"{name}-2.warc.gz", 0, f"{name}-b")
    asked: list[int] = []
    real = store.events_by_url

    async def counting(after: bytes | None, urls: int) -> list[Event]:
        found = await real(after, urls)
        asked.append(len({e.url_key for e in found}))
        return found

    store.events_by_url = counting  # type: ignore[method-assign]
    monkeypatch.setattr(retention, "URLS_PER_PAGE", 2)
    report = await collect_garbage(store, root, RetentionRule(keep_last=1), clock.now(),
                                   Consumed(up_to=100))
    assert sorted(report.files_deleted) == [f"{n}-1.warc.gz" for n in names]
    assert max(asked) == 2 and sum(asked) == 9
