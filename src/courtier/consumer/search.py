"""Queries over the index: words in, the best pages out (URL, title, a snippet).

A query is a list of words, every one of which must appear in the page (title or
text); a word ending in ``*`` matches as a prefix (``crawl*``). Each word is passed to
FTS5 as a quoted string, so punctuation and FTS5's own operators (``AND``, ``-``,
``:``) are plain text, never a syntax error; a word with no letter or digit is
dropped, and a query left with none is refused (a ConfigError: one line, exit 2).
Ranking is FTS5's BM25 with the title weighing :data:`TITLE_WEIGHT` times the text,
ties by URL, so the same query on the same index answers the same list.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Final

from courtier.consumer.index_db import SearchIndex
from courtier.core.errors import ConfigError

__all__ = ["TITLE_WEIGHT", "Hit", "Hits", "match_expression", "render_json", "render_text",
           "search"]

#: BM25 weight of a title word over a word of the text
TITLE_WEIGHT: Final = 10.0


@dataclass(frozen=True, slots=True)
class Hit:
    url: str
    title: str | None
    score: float        # higher is better (minus FTS5's bm25)
    snippet: str        # words around the first match, matches in [brackets]


@dataclass(frozen=True, slots=True)
class Hits:
    query: str
    total: int          # pages matching, of which ``hits`` are the best
    pages: int          # pages in the index
    hits: list[Hit]


def match_expression(query: str) -> str:
    """The FTS5 MATCH text of a user's query (see the module docstring)."""
    terms = []
    for word in query.split():
        prefix = word.endswith("*")
        word = word.rstrip("*")
        if not any(ch.isalnum() for ch in word):
            continue
        quoted = '"' + word.replace('"', '""') + '"'
        terms.append(quoted + ("*" if prefix else ""))
    if not terms:
        raise ConfigError(f"search: no word to search for in {query!r} "
                          "(give words, e.g. courtier search polite crawler)")
    return " ".join(terms)


def search(index: SearchIndex, query: str, limit: int = 10) -> Hits:
    """The ``limit`` best pages for ``query``."""
    if limit < 1:
        raise ConfigError(f"--limit {limit}: give a positive number of hits")
    match = match_expression(query)
    rows = index.db.execute(
        "SELECT p.url, p.title, bm25(page_text, ?, 1.0) AS rank, "
        "snippet(page_text, 1, '[', ']', '…', 12) "
        "FROM page_text JOIN pages AS p ON p.id = page_text.rowid "
        "WHERE page_text MATCH ? ORDER BY rank, p.url LIMIT ?",
        (TITLE_WEIGHT, match, limit)).fetchall()
    total = index.db.execute("SELECT count(*) FROM page_text WHERE page_text MATCH ?",
                             (match,)).fetchone()[0]
    hits = [Hit(url, title, round(-rank, 6), snippet) for url, title, rank, snippet in rows]
    return Hits(query, int(total), index.page_count(), hits)


def render_text(found: Hits) -> str:
    """One line per hit: the URL, two spaces, the title."""
    return "".join(f"{hit.url}  {hit.title or '(no title)'}\n" for hit in found.hits)


def render_json(found: Hits) -> str:
    return json.dumps(asdict(found), indent=2, ensure_ascii=False) + "\n"
