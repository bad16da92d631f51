"""Page requests ask for HTML first; robots.txt and sitemap-named URLs keep no Accept.
Checked red by returning PAGE_ACCEPT for every URL (the sitemap cases failed)."""

from __future__ import annotations

import pytest

from courtier.fetch.accept import PAGE_ACCEPT, page_accept


def test_the_page_accept_value() -> None:
    assert PAGE_ACCEPT == "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"


@pytest.mark.parametrize("url", [
    "https://a.test/", "https://a.test/page.html", "https://a.test/sitemap-of-the-city",
    "https://a.test/docs/xml-guide", "https://a.test/a.txt?x=sitemap.xml"])
def test_pages_ask_for_html_first(url: str) -> None:
    assert page_accept(url) == PAGE_ACCEPT


@pytest.mark.parametrize("url", [
    "https://a.test/robots.txt", "https://a.test/sitemap.xml", "https://a.test/SITEMAP.XML",
    "https://a.test/s/news.xml.gz", "https://a.test/sitemap_index.xml?page=2",
    "https://a.test/sitemap-urls.txt", "https://a.test/sitemap1.gz"])
def test_sitemaps_and_robots_keep_no_accept(url: str) -> None:
    assert page_accept(url) is None
