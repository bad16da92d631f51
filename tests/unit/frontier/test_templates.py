"""URL templates: the abstraction of a path and query, session aliases, facet atoms and
the distinct counter behind the template statistics."""

from __future__ import annotations

import random

import pytest

from courtier.frontier.templates import (
    DistinctCounter,
    facet_atoms,
    session_alias,
    url_template,
)


@pytest.mark.parametrize(
    ("path", "template"),
    [
        ("/", "/"),
        ("/cal/2026/11", "/cal/{n}/{n}"),
        ("/news/2026-11-03/story", "/news/{date}/story"),
        ("/log_2026_1_2.txt", "/log_{date}.txt"),
        ("/page-12.html", "/page-{n}.html"),
        ("/o/3f2b1c4d-1111-2222-3333-444455556666", "/o/{uuid}"),
        ("/o/9F86D081884C7D65", "/o/{hex}"),
        ("/deadbeef/cafe", "/deadbeef/cafe"),
        ("/t/Zx81_pQ-7rTTbb0ab", "/t/{id}"),
        ("/about-our-company-history", "/about-our-company-history"),
        ("/p;jsessionid=ABC123/x", "/p;jsessionid=*/x"),
        ("/shop?sort=p&color=red&size=m&color=blue", "/shop?color&size&sort"),
        ("/s?sid=Ab12Cd34Ef56Gh78&n=1", "/s?n&sid"),
        ("/x?f3=1&f12=2", "/x?f{n}"),
        ("/x?&&", "/x"),
        ("/x#frag?a=1", "/x"),
    ],
)
def test_url_template(path: str, template: str) -> None:
    assert url_template(path) == template


def test_urls_of_one_kind_share_a_template() -> None:
    a = url_template("/item/12?ref=home&sid=x1")
    b = url_template("/item/999999?sid=Qq99ZZ00aa11bb22cc&ref=mail")
    assert a == b
    assert url_template("/item/12") != url_template("/items/12")
    assert url_template("/a/1") != url_template("/a/1/2"), "segment count is kept"


def test_template_length_is_bounded() -> None:
    long_path = "/" + "/".join(f"word{chr(97 + i % 26)}x" for i in range(200))
    template = url_template(long_path)
    assert len(template) <= 256 + 17
    assert template != url_template(long_path + "/more"), "the hash keeps long ones apart"


def test_session_alias() -> None:
    assert session_alias("/a?x=1") is None
    assert session_alias("/a?x=1&PHPSESSID=abc&y=2") == "/a?x=1&y=2"
    assert session_alias("/a;jsessionid=ZZ9?x=1") == "/a?x=1"
    assert session_alias("/s/3?sid=q") == "/s/3"


def test_facet_atoms() -> None:
    assert facet_atoms("cat=shoes&page=3") is None, "numbers are not facets"
    assert facet_atoms("q=hello") is None
    combo, atoms = facet_atoms("color=red,blue&size=m&sort=new") or ("", [])
    assert atoms == ["color=blue", "color=red", "size=m", "sort=new"]
    assert combo == "&".join(atoms)
    again = facet_atoms("sort=new&size=m&color=blue&color=red")
    assert again is not None and again[0] == combo, "order and repetition do not matter"


def test_distinct_counter_accuracy() -> None:
    rng = random.Random(5)
    for n, tolerance in [(0, 0), (1, 0), (10, 1), (100, 10), (1000, 250), (20_000, 5000)]:
        counter = DistinctCounter()
        values = [rng.getrandbits(64) for _ in range(n)]
        for v in values + values:  # adding twice changes nothing
            counter.add(v)
        assert abs(counter.count() - n) <= tolerance, (n, counter.count())
