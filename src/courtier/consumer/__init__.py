"""A reference consumer of the event feed: a local full-text index (SQLite FTS5).

* :mod:`~courtier.consumer.decide` — which events are indexable pages (pure);
* :mod:`~courtier.consumer.pages` — a page's title and text from its archived record;
* :mod:`~courtier.consumer.index_db` — the index file, its cursor written in the same
  transaction as the pages (exactly once across crashes);
* :mod:`~courtier.consumer.indexer` — the loop: feed → changes → one transaction a batch;
* :mod:`~courtier.consumer.search` — queries: URLs and titles, best first.

The command line (``courtier index``, ``courtier search``) is
:mod:`courtier.cli.index_commands`; the feed itself is described in ``docs/events.md``.
"""

from courtier.consumer.decide import Decision, decide
from courtier.consumer.index_db import SearchIndex
from courtier.consumer.indexer import Indexer, IndexReport
from courtier.consumer.pages import ArchivedPages, archive_roots
from courtier.consumer.search import Hits, search

__all__ = ["ArchivedPages", "Decision", "Hits", "IndexReport", "Indexer", "SearchIndex",
           "archive_roots", "decide", "search"]
