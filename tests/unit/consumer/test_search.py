"""Queries: ranking, the query language kept plain, the printed forms (consumer/search.py).

Checked by breaking it: with the title weight at 1.0 the title page no longer ranks
first; with the words passed to FTS5 unquoted, ``AND-`` and ``a:b`` raise a syntax error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from courtier.consumer.index_db import PageEntry, SearchIndex
from courtier.consumer.search import Hit, Hits, match_expression, render_json, render_text, search
from courtier.core.errors import ConfigError
from courtier.core.shard_cursor import ShardCursor

FILLER = "plain words about nothing much"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SearchIndex]:
    opened = SearchIndex.open(tmp_path / "search.db", create=True)
    entries = [
        PageEntry(f"{n:032x}", f"http://a.test/{n}", 1, title, text, f"sha256:{n}", 1.0)
        for n, (title, text) in enumerate([
            ("Gardening notes", f"{FILLER} tomato once {FILLER}"),
            ("Tomato harvest", f"{FILLER} {FILLER}"),
            ("Kitchen", f"{FILLER} tomato soup and tomato sauce {FILLER}"),
            (None, f"{FILLER} crawler etiquette {FILLER}"),
            *[(f"filler {k}", f"{FILLER} {FILLER}") for k in range(8)],
        ])
    ]
    opened.apply(entries, ShardCursor(), ShardCursor({0: len(entries)}))
    yield opened
    opened.close()


def test_a_title_match_ranks_above_text_matches(index: SearchIndex) -> None:
    found = search(index, "tomato")
    assert found.total == 3
    assert found.pages == 12
    assert found.hits[0].url == "http://a.test/1"  # in the title
    assert {h.url for h in found.hits[1:]} == {"http://a.test/0", "http://a.test/2"}
    scores = [h.score for h in found.hits]
    assert scores == sorted(scores, reverse=True)
    assert "[tomato]" in found.hits[1].snippet


def test_every_word_must_appear_and_prefixes_match(index: SearchIndex) -> None:
    assert [h.url for h in search(index, "tomato soup").hits] == ["http://a.test/2"]
    assert [h.url for h in search(index, "crawl*").hits] == ["http://a.test/3"]
    assert search(index, "tomato crawler").hits == []


def test_limit(index: SearchIndex) -> None:
    found = search(index, "tomato", limit=2)
    assert len(found.hits) == 2 and found.total == 3
    with pytest.raises(ConfigError, match="--limit 0"):
        search(index, "tomato", limit=0)


@pytest.mark.parametrize(("query", "urls"), [
    ("AND-", ["http://a.test/2"]),  # the word "and" of its text
    ("a:b", []), ('"unbalanced', []), ("NOT OR", []), ("x AND ( y", []),
])
def test_fts_operators_are_plain_words_never_a_syntax_error(index: SearchIndex, query: str,
                                                           urls: list[str]) -> None:
    assert [hit.url for hit in search(index, query).hits] == urls


@pytest.mark.parametrize("query", ["", "   ", "!!!", "- * ()"])
def test_a_query_without_words_is_refused(query: str) -> None:
    with pytest.raises(ConfigError, match="no word to search for"):
        match_expression(query)


def test_match_expression_quotes_each_word() -> None:
    assert match_expression('polite crawl* say "hi"') == '"polite" "crawl"* "say" """hi"""'


def test_printed_forms() -> None:
    found = Hits("tomato", 2, 12, [Hit("http://a.test/1", "Tomato harvest", 2.5, "x"),
                                   Hit("http://a.test/3", None, 1.0, "y")])
    assert render_text(found) == ("http://a.test/1  Tomato harvest\n"
                                  "http://a.test/3  (no title)\n")
    data = json.loads(render_json(found))
    assert data["query"] == "tomato" and data["total"] == 2 and data["pages"] == 12
    assert data["hits"][0] == {"url": "http://a.test/1", "title": "Tomato harvest",
                               "score": 2.5, "snippet": "x"}
