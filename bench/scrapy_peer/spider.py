"""The spider: fetch the seeds, follow every http(s) link inside *.bench.test.

Link extraction is the cheap idiomatic path (``response.css("a::attr(href)")``
+ ``response.urljoin``), deduplication is Scrapy's default request
fingerprint dupefilter, and ``allowed_domains`` keeps the crawl on the
benchmark web. Each page yields one small item, like a typical spider. With
``html_only``, links ``LinkExtractor`` would drop by their extension are not followed
(``html_only.wanted_link``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import scrapy
from scrapy.http import HtmlResponse, Response

from scrapy_peer.html_only import wanted_link


class BenchSpider(scrapy.Spider):
    """Broad crawl of the benchmark web from a seeds file (one URL a line)."""

    name = "bench"
    allowed_domains = ["bench.test"]  # noqa: RUF012 - Scrapy's documented class attribute

    def __init__(self, seeds_file: str, *args: Any, html_only: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.html_only = html_only
        text = Path(seeds_file).read_text(encoding="utf-8")
        self.seeds = [line.strip() for line in text.splitlines() if line.strip()]

    async def start(self) -> AsyncIterator[Any]:
        """One request per seed URL."""
        for url in self.seeds:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        """Yield an item for the page and a request for each http(s) link on it."""
        if not isinstance(response, HtmlResponse):
            return
        yield {
            "url": response.url,
            "status": response.status,
            "title": response.css("title::text").get(),
        }
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href)
            if url.startswith(("http://", "https://")) and (
                    not self.html_only or wanted_link(url)):
                yield scrapy.Request(url, callback=self.parse)
