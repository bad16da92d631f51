"""Recrawl with conditional GET: a 304 becomes a WARC revisit (server-not-modified)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from courtier.crawl.app import crawl
from courtier.testweb import TestWebServer, default_web
from tests.integration.crawl.test_crawl_testweb import config_for
from tests.integration.outbox import outbox_events


@pytest.mark.timeout(120)
async def test_due_pages_are_refetched_conditionally_and_archived_as_revisits(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    spec = default_web(n_hosts=2, pages_per_host=3, crawl_delay=0.2)
    async with TestWebServer(spec) as server:
        config = config_for(server, data, recrawl_interval=1.0)
        await crawl(config, install_signals=False)  # type: ignore[arg-type]
        first = len(server.log)
        await asyncio.sleep(2.5)  # every page is due again (interval ≈ 1 s)
        await crawl(config, install_signals=False)  # type: ignore[arg-type]
        second = server.log[first:]
    not_modified = [r for r in second if r.status == 304]
    assert not_modified, "the recrawl sent no conditional request the server could answer"
    events = await outbox_events(data)
    assert any(e.payload["outcome"] == "not_modified" and e.version >= 2 for e in events)
    profiles = []
    for path in sorted((data / "warc").rglob("*.warc.gz")):
        with path.open("rb") as handle:
            for record in ArchiveIterator(handle, check_digests="raise"):
                if record.rec_type == "revisit":
                    profiles.append(record.rec_headers.get_header("WARC-Profile"))
    assert any(p.endswith("/revisit/server-not-modified") for p in profiles)
