"""Only HTML is downloaded: a crawl of a host whose index links a 16 MiB PDF and a 16 MiB
video. Judged from the test server's log (the request was made, and the server wrote
less of the body than the 10 MiB page cap, which a downloading client takes at least:
what it wrote went to the socket buffers, a few MiB on loopback, before the client
closed), the WARC files (no record of either) and ``courtier url`` (outcome
``not_html`` with the declared type).
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from courtier.cli.main import build_parser
from courtier.cli.query import run_query
from courtier.testweb import HostSpec, RequestRecord, TestWebServer, WebSpec
from tests.integration.politeness.helpers import SCHEMES, run_crawl, served_over

MEDIA = 16 << 20  # bytes of the PDF and of the video
PAGE_CAP = 10 << 20  # the default --max-body-bytes: what a download takes at least
HOST = "media.test"
DAY = 86400.0


def warc_targets(data: Path) -> set[str]:
    targets: set[str] = set()
    for path in (data / "warc").rglob("*.warc*"):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                uri = record.rec_headers.get_header("WARC-Target-URI")
                if uri:
                    targets.add(uri)
    return targets


def url_state(data: Path, url: str) -> dict[str, Any]:
    out = io.StringIO()
    code = run_query(build_parser().parse_args(["url", url, "--data", str(data)]), out)
    assert code == 0
    answer: dict[str, Any] = json.loads(out.getvalue())
    return answer


def crawl_media_web(data: Path, scheme: str = "http", **extra: object
                    ) -> tuple[dict[str, RequestRecord], dict[str, str]]:
    """Crawl a host whose index links a PDF and a video of :data:`MEDIA` bytes over
    ``scheme``; the server's log by request target, and the URLs of the PDF, the video
    and a page."""
    spec = WebSpec(hosts=[HostSpec(HOST, pages=2, media_bytes=MEDIA)])
    log: list[RequestRecord] = []
    urls: dict[str, str] = {}
    server_tls, crawl_tls = served_over(scheme, spec, data.parent / "tls")

    async def scenario() -> None:
        async with TestWebServer(spec, **server_tls) as server:  # type: ignore[arg-type]
            await asyncio.wait_for(run_crawl(server, data, delay=0.05, **crawl_tls, **extra),
                                   90)
            log.extend(server.log)
            for path in ("/files/0.pdf", "/video/0.mp4", "/p/0.html"):
                urls[path] = server.url(HOST, path)

    asyncio.run(scenario())
    return {r.path_qs: r for r in log}, urls


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_pdf_and_video_links_are_not_downloaded(tmp_path: Path, scheme: str) -> None:
    """Over HTTPS too. This test server stops writing when the client's close_notify
    arrives, so it passed even while a cut response's TLS connection was closed
    gracefully; nginx writes on, and the crawler read the body off the socket for up to
    30 s: ``tests/integration/fetch/test_tls.py``'s cut-body test, with a server that
    writes like nginx, is the one that was red."""
    data = tmp_path / "d"
    by_path, urls = crawl_media_web(data, scheme)
    for path in ("/files/0.pdf", "/video/0.mp4"):
        record = by_path[path]  # the server saw the request...
        assert record.status == 200
        # ...and the client closed the connection long before the page cap was written
        # (a download takes 10 MiB of the 16 before it is cut; what the server did write
        # went to the socket buffers, which on loopback hold a few megabytes)
        assert not record.whole and record.body_sent < PAGE_CAP, record
    page = by_path["/p/0.html"]
    assert page.whole and page.body_sent > 0
    targets = warc_targets(data)
    assert urls["/p/0.html"] in targets
    assert urls["/files/0.pdf"] not in targets and urls["/video/0.mp4"] not in targets
    for path, kind in (("/files/0.pdf", "application/pdf"), ("/video/0.mp4", "video/mp4")):
        row = url_state(data, urls[path])["url"]
        assert (row["outcome"], row["status"], row["content_type"]) == ("not_html", 200, kind)
        assert row["warc_file"] is None and row["payload_digest"] is None
        # not fetched again soon: after the longest recrawl interval (30 days by default)
        assert row["next_fetch_at"] - row["last_fetch_at"] >= 30 * DAY


@pytest.mark.timeout(120)
def test_accept_type_widens_what_is_downloaded(tmp_path: Path) -> None:
    """``--accept-type application/pdf``: the PDF is taken whole and archived; the video
    still is not."""
    data = tmp_path / "d"
    by_path, urls = crawl_media_web(data, accept_types=("application/pdf",),
                                    max_body_bytes=2 * MEDIA, max_decoded_bytes=2 * MEDIA)
    assert by_path["/files/0.pdf"].whole and by_path["/files/0.pdf"].body_sent == MEDIA
    video = by_path["/video/0.mp4"]
    assert not video.whole and video.body_sent < PAGE_CAP, video
    targets = warc_targets(data)
    assert urls["/files/0.pdf"] in targets and urls["/video/0.mp4"] not in targets
    assert url_state(data, urls["/files/0.pdf"])["url"]["outcome"] == "ok"
    assert url_state(data, urls["/video/0.mp4"])["url"]["outcome"] == "not_html"
