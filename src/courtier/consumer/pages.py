"""A page's title and text, read from the crawl's archive at the location its event names.

An event's ``warc`` is ``{file, offset, length}`` relative to the WARC root the crawl
wrote to: ``DATA/warc`` for one process, ``DATA/worker-I/warc`` for each worker of
``crawl --workers N`` (file names are unique across workers), or ``--archive``. The
reader is given every root that may hold the file and remembers which one did. The
record is read with :func:`courtier.archive.reader.read_response` (one gzip member,
no scan) in a thread, and parsed by the crawler's own parser
(:class:`courtier.parse.offload.OffLoopParser`: inline when small, a thread or a child
process with a time budget otherwise), so neither stalls the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from courtier.archive.reader import StoredResponse, read_response
from courtier.archive.warc import WarcLocation
from courtier.consumer.index_db import PageEntry
from courtier.core.errors import ArchiveError
from courtier.parse.html import parse_html
from courtier.parse.offload import OffLoopParser

__all__ = ["ArchivedPages", "archive_roots"]


def archive_roots(data: Path) -> list[str]:
    """The WARC folders of the crawl in ``data``: ``warc`` and each ``worker-*/warc``."""
    found = [data / "warc", *sorted(data.glob("worker-*/warc"))]
    return [str(path) for path in found if path.is_dir()]


class ArchivedPages:
    """Turns an event into the :class:`PageEntry` of its page (see the module docstring).

    ``roots``: WARC roots (folders or fsspec URLs) in the order they are tried;
    ``parser``: the off-loop parser (its pools belong to the caller, who closes it);
    ``agent``: the product token whose robots ``<meta>`` applies (as in the crawl)."""

    def __init__(self, roots: Sequence[str], parser: OffLoopParser,
                 agent: str = "courtier") -> None:
        if not roots:
            raise ValueError("at least one WARC root is needed")
        self.roots = list(roots)
        self.parser = parser
        self.agent = agent
        self._root_of: dict[str, str] = {}  # WARC file name -> the root that holds it

    async def entry(self, event: dict[str, Any]) -> PageEntry:
        """The page of an event decided ``read`` (``decide.py``); raises ArchiveError when
        no root holds its record."""
        payload = event["payload"]
        warc = payload["warc"]
        location = WarcLocation(str(warc["file"]), int(warc["offset"]), int(warc["length"]))
        stored = await asyncio.to_thread(self._read, location)
        url = payload.get("url") or stored.url
        content_type = stored.header("content-type")
        robots_header = stored.header("x-robots-tag")
        parsed = await self.parser.html(stored.body, url, content_type, robots_header,
                                        self.agent)
        if parsed is False:  # small: parsed here, in a few milliseconds
            parsed = parse_html(stored.body, url, content_type, robots_header,
                                agent_token=self.agent)
        title = payload.get("title") if parsed is None else parsed.title
        text = "" if parsed is None else parsed.text  # None: over its parse budget
        return PageEntry(url_key=str(event["url_key"]), url=url, version=int(event["version"]),
                         title=title, text=text, payload_digest=payload.get("payload_digest"),
                         fetched_at=payload.get("fetched_at"))

    def _read(self, location: WarcLocation) -> StoredResponse:
        known = self._root_of.get(location.file)
        roots = [known] if known is not None else self.roots
        problems: list[str] = []
        for root in roots:
            try:
                stored = read_response(root, location)
            except ArchiveError as exc:
                missing = isinstance(exc.__cause__, FileNotFoundError)
                problems.append(f"{root}: {'no such file' if missing else exc}")
                continue
            self._root_of[location.file] = root
            return stored
        raise ArchiveError(f"record {location.file}@{location.offset}: "
                           f"{'; '.join(problems)} (--archive names the folder the crawl "
                           "wrote to)")
