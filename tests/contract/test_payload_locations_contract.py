"""Store contract: the batched payload index lookup ``payload_locations``.

Runs against memory, SQLite and PostgreSQL (tests/contract/conftest.py), like the rest
of the contract suite; helpers come from tests/contract/test_store_contract.py.
"""

from __future__ import annotations

from courtier.store.base import Store
from tests.contract.conftest import T0, StoreMaker
from tests.contract.test_store_contract import done, new


async def _archive_copies(store: Store, copies: dict[str, tuple[str, str, int]]) -> None:
    """Commit one fetched URL per (url, warc_file, offset) with that payload digest."""
    await store.add_urls([new(url) for url, _, _ in copies.values()])
    await store.load_due([1], T0, 100, 100)
    await store.commit([
        done(url, payload_digest=digest, warc_file=file, warc_offset=offset, warc_length=9)
        for digest, (url, file, offset) in copies.items()])


async def test_payload_locations_answers_only_the_digests_found(store: Store) -> None:
    await _archive_copies(store, {
        "sha256:a": ("http://a.test/1", "w-0.warc.gz", 10),
        "sha256:b": ("http://b.test/2", "w-1.warc.gz", 20),
    })
    found = await store.payload_locations(["sha256:a", "sha256:missing", "sha256:b"])
    assert found == {
        "sha256:a": ("w-0.warc.gz", 10, "http://a.test/1", T0 + 1),
        "sha256:b": ("w-1.warc.gz", 20, "http://b.test/2", T0 + 1),
    }
    assert await store.payload_locations(["sha256:missing", "sha256:other"]) == {}


async def test_payload_locations_accepts_a_digest_more_than_once(store: Store) -> None:
    await _archive_copies(store, {"sha256:a": ("http://a.test/1", "w-0.warc.gz", 10)})
    found = await store.payload_locations(["sha256:a", "sha256:x", "sha256:a", "sha256:x"])
    assert found == {"sha256:a": ("w-0.warc.gz", 10, "http://a.test/1", T0 + 1)}


async def test_payload_locations_agrees_with_payload_location(store: Store) -> None:
    await _archive_copies(store, {
        f"sha256:{n}": (f"http://h{n}.test/", f"w-{n % 3}.warc.gz", 100 * n)
        for n in range(0, 12, 2)})
    digests = [f"sha256:{n}" for n in range(12)]
    found = await store.payload_locations(digests)
    assert set(found) == {f"sha256:{n}" for n in range(0, 12, 2)}
    for digest in digests:
        assert found.get(digest) == await store.payload_location(digest)


async def test_payload_locations_keeps_the_first_copy(store: Store) -> None:
    await store.add_urls([new("http://a.test/1"), new("http://b.test/2")])
    await store.load_due([1], T0, 10, 10)
    loc = {"payload_digest": "sha256:abc", "warc_file": "w-0.warc.gz", "warc_length": 9}
    await store.commit([done("http://a.test/1", warc_offset=120, **loc)])
    await store.commit([done("http://b.test/2", warc_offset=999, **loc)])
    assert await store.payload_locations(["sha256:abc"]) == {
        "sha256:abc": ("w-0.warc.gz", 120, "http://a.test/1", T0 + 1)}


async def test_payload_locations_of_many_digests_in_one_call(store: Store) -> None:
    await _archive_copies(store, {"sha256:7": ("http://a.test/7", "w.warc.gz", 7)})
    digests = [f"sha256:{n}" for n in range(1500)]  # over the 999 bound values of old SQLite builds
    assert await store.payload_locations(digests) == {
        "sha256:7": ("w.warc.gz", 7, "http://a.test/7", T0 + 1)}


async def test_payload_locations_of_nothing_does_not_ask_the_database(
    make_store: StoreMaker,
) -> None:
    unopened = make_store()  # a query on it would fail (no connection yet)
    assert await unopened.payload_locations([]) == {}
