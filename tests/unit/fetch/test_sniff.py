"""courtier.fetch.sniff: which first bytes count as HTML, which declared types are sniffed."""

from __future__ import annotations

import gzip

import pytest

from courtier.fetch.sniff import (
    SNIFF_BYTES,
    TYPE_LABELS,
    media_type,
    needs_sniff,
    sniff,
    type_allowed,
    type_label,
)


@pytest.mark.parametrize("head", [
    b"<!DOCTYPE html><html><body>x</body></html>",
    b"\n\t  <HTML lang=en>",
    b"<head>\n<title>t</title>",
    b"<p>short",
    b"<!-- a comment --><div>",
    b"\xef\xbb\xbf<!doctype html>\n<html>",
    "\ufeff<html>".encode("utf-16-le"),
    b'<?xml version="1.0"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0//EN" "x">\n'
    b'<html xmlns="http://www.w3.org/1999/xhtml">',
])
def test_html_is_recognised(head: bytes) -> None:
    assert sniff(head) == "html"


@pytest.mark.parametrize("head", [
    b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj",
    b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom",   # an MP4 video
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    gzip.compress(b"<html></html>", mtime=0),              # bytes, not text
    b"PK\x03\x04\x14\x00\x06\x00",                         # a zip archive
    b'{"html": "<p>not a page</p>"}',
    b"<pre-formatted>",                                    # <p not followed by space or >
    b"<abbr>x</abbr>",                                     # <a not followed by space or >
    b'<?xml version="1.0"?><rss version="2.0"><channel>',   # a feed, not HTML
    b"",
])
def test_other_bytes_are_not_html(head: bytes) -> None:
    assert sniff(head) == "other"


def test_a_sitemap_root_in_the_window_is_a_sitemap() -> None:
    head = (b'<?xml version="1.0" encoding="UTF-8"?>\n<!-- generated -->\n'
            b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url>')
    assert sniff(head) == "sitemap"
    assert sniff(b'<?xml version="1.0"?><sitemapindex xmlns="x">') == "sitemap"
    assert sniff(b"plain text that mentions <urlset") == "other"


def test_declared_types() -> None:
    assert media_type("Text/HTML; charset=UTF-8") == "text/html"
    assert media_type("") is None and media_type(None) is None and media_type(" ;x") is None
    assert needs_sniff(None) and needs_sniff("application/octet-stream")
    assert needs_sniff("application/xml") and needs_sniff("text/xml")
    assert not needs_sniff("application/pdf") and not needs_sniff("text/html")
    allowed = frozenset({"text/html", "image/*"})
    assert type_allowed("text/html", allowed) and type_allowed("image/png", allowed)
    assert not type_allowed("text/plain", allowed) and not type_allowed("video/mp4", allowed)
    assert SNIFF_BYTES == 512


def test_metric_labels_are_a_bounded_set() -> None:
    seen = {type_label(kind) for kind in (
        None, "application/octet-stream", "application/pdf", "image/png", "video/mp4",
        "audio/ogg", "font/woff2", "application/rss+xml", "text/xml", "application/ld+json",
        "text/css", "text/javascript", "text/plain", "application/zip",
        "application/x-evil-" + "x" * 100, "made/up")}
    assert seen == set(TYPE_LABELS)
    assert type_label("application/pdf") == "pdf" and type_label(None) == "unknown"
    assert type_label("video/mp4") == "video" and type_label("made/up") == "other"
