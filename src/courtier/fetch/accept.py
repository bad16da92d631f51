"""What a request says it wants: the ``Accept`` header of a page fetch.

Pages ask for HTML first (``PAGE_ACCEPT``); robots.txt and sitemap fetches send no
``Accept`` of their own (any type, as before). A URL is taken for a sitemap file by
its name, since a sitemap is queued like a page: a last path segment that names a
sitemap (``sitemap*.xml``, ``*.xml.gz``, ``sitemap*.txt``) or ends in ``.xml``.
The request builder (``Worker._request``) asks :func:`page_accept` for each page
lease; the transport sends headers as given.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

#: HTML first, XHTML next, anything else last (a server may still answer another type)
PAGE_ACCEPT: Final = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"


def looks_like_sitemap_url(url: str) -> bool:
    """True for a URL whose name says it is a sitemap (or robots.txt-like text) file."""
    path = urlsplit(url).path.lower()
    last = path.rsplit("/", 1)[-1]
    if last == "robots.txt":
        return True
    if last.endswith((".xml", ".xml.gz")):
        return True
    return "sitemap" in last and last.endswith((".txt", ".gz"))


def page_accept(url: str) -> str | None:
    """The ``Accept`` value of a page fetch of ``url``; None for a sitemap-like URL
    (sent without one)."""
    return None if looks_like_sitemap_url(url) else PAGE_ACCEPT
