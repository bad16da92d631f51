"""The parse budget: pathological pages are parsed in a child that is killed on overrun."""

from __future__ import annotations

import random
import re
import time

import pytest

from courtier.parse.guard import GUARD_TAG_BYTES, GUARD_TAGS, GuardedParser, needs_guard
from courtier.parse.html import ParsedPage


def never_finishes(body: bytes, url: str, content_type: str | None,
                   x_robots_tag: str | None, agent: str) -> ParsedPage:
    time.sleep(3600)  # stands for a parse that would take an hour
    raise AssertionError("unreachable")


def test_only_pages_with_very_many_tags_are_guarded() -> None:
    assert not needs_guard(b"<p>" * GUARD_TAGS)
    assert needs_guard(b"<p>" * (GUARD_TAGS + 1))


async def test_a_parse_within_the_budget_returns_the_page() -> None:
    parser = GuardedParser(timeout=60.0)
    try:
        page = await parser.parse(b'<a href="/x">x</a>', "http://a.test/", "text/html", None,
                                  "courtier")
    finally:
        parser.close()
    assert page is not None and [link.url for link in page.links] == ["http://a.test/x"]


async def test_an_overrun_kills_the_child_and_gives_no_page() -> None:
    parser = GuardedParser(timeout=0.5, target=never_finishes)
    try:
        assert await parser.parse(b"<div>", "http://a.test/", "text/html", None, "x") is None
        assert parser.timeouts == 1
        # a fresh child serves the next page (a budget that starting a new process on a
        # loaded machine cannot exhaust)
        parser.target = GuardedParser().target
        parser.timeout = 60.0
        page = await parser.parse(b"<title>t</title>", "http://a.test/", "text/html", None, "x")
        assert page is not None and page.title == "t"
    finally:
        parser.close()


def test_one_tag_with_thousands_of_attributes_is_guarded() -> None:
    # issue 14: 50,000 distinct attributes on one tag parsed inline for 8 s because only
    # "<" was counted
    page = b"<html><body><div " + b" ".join(b"a%d" % i for i in range(50_000)) + b">x</div>"
    assert page.count(b"<") < GUARD_TAGS
    assert needs_guard(page)
    # long attribute values spread over ordinary tags are not pathological
    assert not needs_guard(b"".join(b'<p title="%s">x</p>' % (b"v" * 4000) for _ in range(50)))


@pytest.mark.parametrize("seed", range(40))
def test_long_tag_check_equals_the_plain_regex(seed: int) -> None:
    # the block pre-check only skips the regex; the answer is the regex's, runs of
    # non-bracket bytes placed anywhere (block edges included) and of every length near
    # the limit
    rng = random.Random(seed)
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice([b"<", b">", b"<a>", b"x" * rng.randint(0, 64)]))
        if rng.random() < 0.5:
            parts.append(b"y" * (GUARD_TAG_BYTES + rng.randint(-3, 3)))
    body = b"".join(parts)
    expected = body.count(b"<") > GUARD_TAGS or (
        len(body) > GUARD_TAG_BYTES
        and re.search(b"<[^<>]{%d}" % GUARD_TAG_BYTES, body) is not None)
    assert needs_guard(body) == expected


def test_a_long_tag_across_block_edges_is_guarded() -> None:
    for lead in (0, 1, GUARD_TAG_BYTES // 2 - 1, GUARD_TAG_BYTES // 2, GUARD_TAG_BYTES - 1):
        body = b">" * lead + b"<" + b"a" * GUARD_TAG_BYTES + b">" + b"<p>" * 10
        assert needs_guard(body), lead
        assert not needs_guard(b">" * lead + b"<" + b"a" * (GUARD_TAG_BYTES - 1) + b">")


def allocates_too_much(body: bytes, url: str, content_type: str | None,
                       x_robots_tag: str | None, agent: str) -> ParsedPage:
    hoard = [bytearray(64 * 1024 * 1024) for _ in range(64)]  # 4 GiB: past the cap
    raise AssertionError(f"unreachable {len(hoard)}")


async def test_a_parse_past_the_memory_budget_gives_no_page() -> None:
    parser = GuardedParser(timeout=60.0, target=allocates_too_much,
                           memory_bytes=768 * 1024 * 1024)
    try:
        assert await parser.parse(b"<div>", "http://a.test/", "text/html", None, "x") is None
        assert parser.failures == 1
    finally:
        parser.close()
