"""The local full-text index: one SQLite file with an FTS5 table, and the feed cursor.

Exactly once, across crashes: the cursor (the per-shard cursor of the feed,
:class:`~courtier.core.shard_cursor.ShardCursor`, kept as its token) lives in the same
file as the pages, and :meth:`SearchIndex.apply` writes a batch's
pages *and* the cursor after them in one transaction. A crash (kill -9 included) leaves
either the whole batch with its cursor or neither, so a restart reads the feed again
from exactly the first event not yet indexed: nothing is skipped, and no event is taken
in twice. Each URL is at most one row (``url_key`` is unique): a later capture of the
URL replaces its text, an older one (a re-parse of an earlier version arriving late)
changes nothing. WAL with ``synchronous=NORMAL``: a commit survives a process crash; a
power cut may lose the last commits, but each with its cursor, so they are read again.

:meth:`apply` also checks that the cursor is still the one the batch was read from
(another ``courtier index`` on the same file may have moved it): if not, it changes
nothing and raises :class:`CursorMoved`, and the caller reads again from the new cursor.

Tables: ``pages`` (one row per indexed URL: url, title, payload digest, fetch time),
``page_text`` (FTS5: title and visible text, ``rowid`` = ``pages.id``), ``captures``
(the newest version of each URL applied), ``waiting`` (URLs whose page is a revisit of a
payload the index has not seen yet: they take its text when it arrives), ``meta``
(format and cursor).

Format 1 (courtier before issue 30's per-shard index feed) kept a crawl-wide cursor, the
integer position of ``read_events``. Such a file opens; :meth:`SearchIndex.legacy_position`
names its position, and :meth:`SearchIndex.convert` replaces it by the per-shard cursor the
store computes for it (``Store.shard_cursor_at``, in process or through the admin API's
``GET /v1/events/cursor``) and marks the file format 2, in one
transaction. Until then :meth:`SearchIndex.cursor` refuses (:class:`LegacyCursor`). A
format-1 file whose cursor is 0 (nothing read) is simply the empty per-shard cursor.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from courtier.core.errors import ConfigError, CourtierError
from courtier.core.shard_cursor import ShardCursor

__all__ = [
    "FORMAT", "Change", "CursorMoved", "LegacyCursor", "PageEntry", "Removal", "Reuse",
    "SearchIndex",
]

#: the ``meta`` row that marks a file as this index (bumped on an incompatible change)
FORMAT: Final = "courtier-search-index-2"
#: the format with a crawl-wide (integer) cursor, converted in place (module docstring)
FORMAT_CRAWL_WIDE: Final = "courtier-search-index-1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pages (
    id INTEGER PRIMARY KEY,
    url_key TEXT NOT NULL UNIQUE,
    url TEXT NOT NULL,
    title TEXT,
    payload_digest TEXT,
    fetched_at REAL
);
CREATE INDEX IF NOT EXISTS pages_by_digest ON pages (payload_digest);
CREATE VIRTUAL TABLE IF NOT EXISTS page_text USING fts5 (
    title, body, tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS captures (url_key TEXT PRIMARY KEY, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS waiting (
    url_key TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    fetched_at REAL
);
CREATE INDEX IF NOT EXISTS waiting_by_digest ON waiting (payload_digest);
"""


@dataclass(frozen=True, slots=True)
class PageEntry:
    """A page read from its own record: index its title and text under its URL."""

    url_key: str
    url: str
    version: int
    title: str | None
    text: str
    payload_digest: str | None
    fetched_at: float | None


@dataclass(frozen=True, slots=True)
class Reuse:
    """A page whose bytes the index may already hold under ``payload_digest`` (a revisit
    record, a 304): keep the URL's text, or copy the text of that payload, or wait for it."""

    url_key: str
    url: str
    version: int
    payload_digest: str | None
    fetched_at: float | None


@dataclass(frozen=True, slots=True)
class Removal:
    """The URL names no page to find any more (gone, redirected, noindex)."""

    url_key: str
    version: int


Change = PageEntry | Reuse | Removal


class CursorMoved(CourtierError):
    """The index's cursor is not the one the batch was read from: nothing was applied."""

    def __init__(self, expected: ShardCursor, found: ShardCursor) -> None:
        super().__init__(f"the index cursor moved from {expected.token()} to "
                         f"{found.token()} meanwhile (another `courtier index` on the same "
                         "file?)")
        self.found = found


class LegacyCursor(CourtierError):
    """The index holds a crawl-wide cursor (format 1) not converted yet."""

    def __init__(self, path: Path, position: int) -> None:
        super().__init__(
            f"the index {path} holds a crawl-wide cursor (event {position}) from an older "
            "courtier; the feed is read by shard now: `courtier index` converts it in "
            "place as it starts (over --data, --store or --api)")
        self.position = position


class SearchIndex:
    """One index file (see the module docstring). Not shared between threads at once:
    the indexer calls it from one worker thread at a time."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self.db = connection
        self.path = path

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, path: Path, *, create: bool, flag: str = "--index") -> SearchIndex:
        """Open the index at ``path``; ``create``: make it when missing (``courtier index``),
        else a missing file is a :class:`ConfigError` (``courtier search``). A file that
        is not such an index is a ConfigError naming ``flag``."""
        if path.is_dir():
            raise ConfigError(f"{flag} {path}: is a folder, not an index file")
        if not path.exists():
            if not create:
                raise ConfigError(f"{flag} {path}: no search index here (build it first: "
                                  "courtier index --data DIR)")
            if not path.parent.is_dir():
                raise ConfigError(f"{flag} {path}: folder {path.parent} does not exist")
        try:
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise ConfigError(f"{flag} {path}: cannot open: {exc}") from None
        index = cls(db, path)
        try:
            index._prepare(create, flag)
        except sqlite3.DatabaseError as exc:
            db.close()
            raise ConfigError(f"{flag} {path}: not a courtier search index ({exc})") from None
        except BaseException:
            db.close()
            raise
        return index

    def _prepare(self, create: bool, flag: str) -> None:
        self.db.execute("PRAGMA busy_timeout = 30000")
        tables = {row[0] for row in self.db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" in tables:
            row = self.db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if row is None or row[0] not in (FORMAT, FORMAT_CRAWL_WIDE):
                found = row[0] if row else "none"
                raise ConfigError(f"{flag} {self.path}: not a courtier search index "
                                  f"(format {found}, expected {FORMAT})")
        elif tables or not create:
            raise ConfigError(f"{flag} {self.path}: not a courtier search index")
        if not create:
            return
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):  # no executescript: it commits first
                if statement.strip():
                    self.db.execute(statement)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('cursor', ?)",
                            (ShardCursor().token(),))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ reading
    def cursor(self) -> ShardCursor:
        """The feed's per-shard cursor after the last event taken in (empty: none yet);
        :class:`LegacyCursor` while the file holds a crawl-wide cursor above 0."""
        text = self._cursor_text()
        position = _crawl_wide(text)
        if position is None:
            return ShardCursor.from_token(text)
        if position:
            raise LegacyCursor(self.path, position)
        return ShardCursor()

    def legacy_position(self) -> int | None:
        """The crawl-wide position a format-1 file's cursor holds (None: a per-shard one,
        or 0, nothing read)."""
        return _crawl_wide(self._cursor_text()) or None

    def convert(self, position: int, cursor: ShardCursor) -> None:
        """Replace the crawl-wide cursor ``position`` by ``cursor`` (the store's
        ``shard_cursor_at(position)``) and mark the file format 2, in one transaction;
        :class:`CursorMoved` (nothing changed) when the file no longer holds ``position``."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            found = self._cursor_text()
            if _crawl_wide(found) != position:
                raise CourtierError(f"the index {self.path} cursor changed while it was "
                                    "converted (another `courtier index` on the same file?)")
            self._set_cursor(cursor)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _cursor_text(self) -> str:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'cursor'").fetchone()
        return str(row[0]) if row else "0"

    def _set_cursor(self, cursor: ShardCursor) -> None:
        """The cursor, and the format that reads it (an older courtier then refuses the
        file instead of misreading a token as an event id)."""
        self.db.execute("UPDATE meta SET value = ? WHERE key = 'cursor'", (cursor.token(),))
        self.db.execute("UPDATE meta SET value = ? WHERE key = 'format'", (FORMAT,))

    def page_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM pages").fetchone()[0])

    # ------------------------------------------------------------------ writing
    def apply(self, changes: Sequence[Change], start: ShardCursor,
              end: ShardCursor) -> Counter[str]:
        """Apply ``changes`` (the events after ``start`` up to ``end``, in feed order) and
        set the cursor to ``end``, in one transaction. Raises :class:`CursorMoved` (and
        changes nothing) when the cursor is no longer ``start``. Returns what was done:
        ``indexed``, ``copied``, ``kept``, ``waiting``, ``removed`` (a page that was in the
        index), ``stale``, ``unknown payload``."""
        done: Counter[str] = Counter()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            found = self.cursor()
            if found != start:
                raise CursorMoved(start, found)
            for change in changes:
                if not self._newest(change.url_key, change.version):
                    done["stale"] += 1
                elif isinstance(change, PageEntry):
                    self._put(change.url_key, change.url, change.title, change.text,
                              change.payload_digest, change.fetched_at)
                    done["indexed"] += 1
                    if copied := self._release_waiting(change):
                        done["copied"] += copied
                elif isinstance(change, Reuse):
                    done[self._reuse(change)] += 1
                elif self._remove(change.url_key):
                    done["removed"] += 1
            self._set_cursor(end)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return done

    def _newest(self, url_key: str, version: int) -> bool:
        """True (and the version recorded) unless a newer capture of the URL was applied."""
        row = self.db.execute("SELECT version FROM captures WHERE url_key = ?",
                              (url_key,)).fetchone()
        if row is not None and row[0] > version:
            return False
        self.db.execute("INSERT INTO captures VALUES (?, ?) ON CONFLICT (url_key) "
                        "DO UPDATE SET version = excluded.version", (url_key, version))
        return True

    def _put(self, url_key: str, url: str, title: str | None, text: str,
             digest: str | None, fetched_at: float | None) -> None:
        row = self.db.execute("SELECT id FROM pages WHERE url_key = ?", (url_key,)).fetchone()
        if row is None:
            page_id = self.db.execute(
                "INSERT INTO pages (url_key, url, title, payload_digest, fetched_at) "
                "VALUES (?, ?, ?, ?, ?)", (url_key, url, title, digest, fetched_at)).lastrowid
        else:
            page_id = row[0]
            self.db.execute("UPDATE pages SET url = ?, title = ?, payload_digest = ?, "
                            "fetched_at = ? WHERE id = ?",
                            (url, title, digest, fetched_at, page_id))
            self.db.execute("DELETE FROM page_text WHERE rowid = ?", (page_id,))
        self.db.execute("INSERT INTO page_text (rowid, title, body) VALUES (?, ?, ?)",
                        (page_id, title or "", text))
        self.db.execute("DELETE FROM waiting WHERE url_key = ?", (url_key,))

    def _text_of(self, digest: str) -> tuple[str | None, str] | None:
        """(title, text) of an indexed page with this payload, or None."""
        row = self.db.execute(
            "SELECT p.title, t.body FROM pages AS p JOIN page_text AS t ON t.rowid = p.id "
            "WHERE p.payload_digest = ? LIMIT 1", (digest,)).fetchone()
        return None if row is None else (row[0], row[1])

    def _release_waiting(self, page: PageEntry) -> int:
        """Index the URLs that waited for this page's payload; how many."""
        if page.payload_digest is None:
            return 0
        rows = self.db.execute("SELECT url_key, url, fetched_at FROM waiting "
                               "WHERE payload_digest = ?", (page.payload_digest,)).fetchall()
        for url_key, url, fetched_at in rows:
            self._put(url_key, url, page.title, page.text, page.payload_digest, fetched_at)
        return len(rows)

    def _reuse(self, change: Reuse) -> str:
        own = self.db.execute("SELECT id, payload_digest FROM pages WHERE url_key = ?",
                              (change.url_key,)).fetchone()
        if own is not None and (change.payload_digest is None
                                or own[1] == change.payload_digest):
            self.db.execute("UPDATE pages SET url = ?, fetched_at = ? WHERE id = ?",
                            (change.url, change.fetched_at, own[0]))
            return "kept"
        source = None if change.payload_digest is None else self._text_of(change.payload_digest)
        if source is not None:
            self._put(change.url_key, change.url, source[0], source[1], change.payload_digest,
                      change.fetched_at)
            return "copied"
        removed = self._remove(change.url_key)  # its old text is not this capture's
        if change.payload_digest is None:
            return "removed" if removed else "unknown payload"
        self.db.execute("INSERT INTO waiting VALUES (?, ?, ?, ?) ON CONFLICT (url_key) DO "
                        "UPDATE SET url = excluded.url, payload_digest = excluded.payload_digest,"
                        " fetched_at = excluded.fetched_at",
                        (change.url_key, change.url, change.payload_digest, change.fetched_at))
        return "waiting"

    def _remove(self, url_key: str) -> bool:
        """Drop the URL's page (or its wait for a payload); whether there was one."""
        row = self.db.execute("SELECT id FROM pages WHERE url_key = ?", (url_key,)).fetchone()
        if row is not None:
            self.db.execute("DELETE FROM page_text WHERE rowid = ?", (row[0],))
            self.db.execute("DELETE FROM pages WHERE id = ?", (row[0],))
        waited = self.db.execute("DELETE FROM waiting WHERE url_key = ?", (url_key,)).rowcount
        return row is not None or waited > 0


def _crawl_wide(text: str) -> int | None:
    """The integer a format-1 cursor holds; None for a per-shard token."""
    return int(text) if text.strip().isdigit() else None
