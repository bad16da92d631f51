"""The HTML-only policy a Scrapy user would write, given to the peer with ``--html-only``.

courtier fetches only HTML: it asks for it (``Accept``), and a response whose declared
type is another stops after its headers, one without a useful type after its first 512
bytes (``courtier.fetch.sniff``). Scrapy has no such setting; a Scrapy user who wants
HTML only does what Scrapy's own parts offer:

* links whose path ends in one of ``scrapy.linkextractors.IGNORED_EXTENSIONS`` (``.pdf``,
  ``.jpg``, ``.mp4``, ``.xls``… what ``LinkExtractor`` drops by default) are not requested
  at all (:func:`wanted_link`, called by the spider);
* a response whose ``Content-Type`` is declared and is not HTML stops after its headers,
  and one without a type, or with a generic one, stops after its first bytes unless they
  start like markup (:class:`HtmlOnlyDownloads`: the ``headers_received`` and
  ``bytes_received`` signals raising ``StopDownload(fail=False)``, Scrapy's documented way
  to stop a download; the partial response reaches the spider, which yields nothing for
  a response that is not ``HtmlResponse``).

robots.txt is left alone (Scrapy's robots middleware downloads it through the same
downloader).
"""

from __future__ import annotations

from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import StopDownload
from scrapy.http import Headers, Request
from scrapy.linkextractors import IGNORED_EXTENSIONS
from scrapy.utils.url import url_has_any_extension

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: declared types that say nothing about the body (as courtier's sniffer reads them)
GENERIC_TYPES = frozenset({"application/octet-stream", "binary/octet-stream",
                           "application/unknown", "unknown/unknown"})
_SKIPPED = {f".{e}" for e in IGNORED_EXTENSIONS}
_SNIFF = "html_only_sniff"


def wanted_link(url: str) -> bool:
    """False for a link ``LinkExtractor`` would drop by its extension."""
    return not url_has_any_extension(url, _SKIPPED)


def _media_type(headers: Headers) -> str | None:
    raw = headers.get(b"Content-Type")
    kind = raw.decode("latin-1").split(";", 1)[0].strip().lower() if raw else ""
    return kind or None


class HtmlOnlyDownloads:
    """Stops non-HTML downloads after the headers (declared type) or the first bytes."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> HtmlOnlyDownloads:
        ext = cls()
        crawler.signals.connect(ext.headers_received, signal=signals.headers_received)
        crawler.signals.connect(ext.bytes_received, signal=signals.bytes_received)
        return ext

    def headers_received(self, headers: Headers, body_length: int, request: Request,
                         spider: Any) -> None:
        """A declared type other than HTML stops the download; a missing or generic one
        leaves the decision to the first bytes."""
        if request.url.endswith("/robots.txt"):
            return
        kind = _media_type(headers)
        if kind is None or kind in GENERIC_TYPES:
            request.meta[_SNIFF] = True
        elif kind not in HTML_TYPES:
            raise StopDownload(fail=False)

    def bytes_received(self, data: bytes, request: Request, spider: Any) -> None:
        """The first bytes of an untyped body: stop unless they start like markup."""
        if request.meta.pop(_SNIFF, False) and not data.lstrip()[:1] == b"<":
            raise StopDownload(fail=False)
