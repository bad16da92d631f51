"""Every store reads its outbox URL by URL (``events_by_url``, what ``courtier archive gc``
walks) and names the WARC files URL rows point into (``warc_files_in_use``).

Seen red: with SQLite's ``events_by_url`` ordering by id only, the pages split URLs and
came in commit order (the concatenation differed from the sorted truth)."""

from __future__ import annotations

from courtier.store.base import Store
from tests.contract.conftest import T0
from tests.contract.test_store_contract import done, key, new

URLS = [f"http://a.test/{n}" for n in range(7)]


async def two_fetches_each(store: Store) -> None:
    await store.add_urls([new(url) for url in URLS])
    for version in (0, 1):
        leases = await store.load_due([1], T0 + 10, 100, 100)
        assert len(leases) == len(URLS)
        result = await store.commit([
            done(url, version=version, next_fetch_at=T0 + 5, warc_file=f"{n}-{version}.warc",
                 warc_offset=0) for n, url in enumerate(URLS)])
        assert result.applied == len(URLS)


async def test_events_by_url_pages_whole_urls_in_key_then_position_order(store: Store) -> None:
    await two_fetches_each(store)
    every = await store.read_events(0, 100)
    truth = sorted((e.url_key, e.id) for e in every)
    seen: list[tuple[bytes, int]] = []
    after: bytes | None = None
    pages = 0
    while page := await store.events_by_url(after, 3):
        pages += 1
        keys = [e.url_key for e in page]
        assert len(set(keys)) <= 3
        assert not seen or keys[0] > seen[-1][0]  # a URL never spans two pages
        seen += [(e.url_key, e.id) for e in page]
        after = keys[-1]
    assert seen == truth and pages == 3
    assert {e.version for e in every} == {1, 2}


async def test_warc_files_in_use_are_those_rows_point_into(store: Store) -> None:
    await two_fetches_each(store)
    asked = [f"{n}-{v}.warc" for n in range(7) for v in (0, 1)] + ["other.warc"]
    assert await store.warc_files_in_use(asked) == {f"{n}-1.warc" for n in range(7)}
    assert await store.warc_files_in_use([]) == set()
    row = await store.get_url(key(URLS[0]))
    assert row is not None and row["warc_file"] == "0-1.warc"
