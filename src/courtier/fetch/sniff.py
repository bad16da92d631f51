"""Is this response HTML? The declared ``Content-Type`` first, the first bytes where it
says nothing useful.

A page fetch reads the body only of the types it accepts (``FetchRequest.only_types``,
HTML and XHTML unless ``--accept-type`` widens them). When the type is missing or
generic (:data:`GENERIC_TYPES`), or XML (which may be XHTML or a sitemap), the transport
reads the first :data:`SNIFF_BYTES` decoded bytes and asks :func:`sniff`; the body is
kept only if they look like HTML (or a sitemap, for an XML type or a generic one).

The HTML patterns are those of the WHATWG MIME Sniffing standard's "rules for
identifying an unknown MIME type" (a tag such as ``<html``, ``<!DOCTYPE HTML``,
``<head``, ``<script``, ``<p``, ``<!--`` after optional white space, followed by a space
or ``>``), plus an ``<html`` element after an XML declaration (XHTML). Pure functions.
"""

from __future__ import annotations

from typing import Final, Literal

#: decoded bytes read to decide (the sniff window)
SNIFF_BYTES: Final = 512

#: declared types that say nothing about the body: the body is sniffed
GENERIC_TYPES: Final = frozenset({
    "application/octet-stream", "application/unknown", "unknown/unknown", "binary/octet-stream",
    "*/*", "application/x-unknown-content-type"})

#: declared XML types: XHTML or a sitemap may hide behind them, so they are sniffed too
XML_TYPES: Final = frozenset({"application/xml", "text/xml"})

#: WHATWG "unknown MIME type" HTML patterns (case-insensitive), each followed by a
#: tag-terminating byte (space or ``>``)
_HTML_TAGS: Final = (
    b"<!doctype html", b"<html", b"<head", b"<script", b"<iframe", b"<h1", b"<div", b"<font",
    b"<table", b"<a", b"<style", b"<title", b"<b", b"<body", b"<br", b"<p", b"<!--")
_TERMINATORS: Final = frozenset(b" >\t\n\r\x0c")
_WHITESPACE: Final = b" \t\n\r\x0c"
_BOMS: Final = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe")

Verdict = Literal["html", "sitemap", "other"]


def media_type(content_type: str | None) -> str | None:
    """The media type of a Content-Type value, lower-case, parameters dropped; None when
    missing or empty."""
    if not content_type:
        return None
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind or None


def needs_sniff(kind: str | None) -> bool:
    """True when the declared media type ``kind`` (see :func:`media_type`) leaves the
    body to be sniffed: missing, generic or XML."""
    return kind is None or kind in GENERIC_TYPES or kind in XML_TYPES


def type_allowed(kind: str, allowed: frozenset[str]) -> bool:
    """True when ``kind`` is in ``allowed``, itself or as ``type/*``."""
    return kind in allowed or kind.split("/", 1)[0] + "/*" in allowed


def _looks_like_html(head: bytes) -> bool:
    text = head.lstrip(_WHITESPACE).lower()
    for tag in _HTML_TAGS:
        if text.startswith(tag) and len(text) > len(tag) and text[len(tag)] in _TERMINATORS:
            return True
    # XHTML: an XML declaration (or a doctype/comment) before the html element
    return text.startswith((b"<?xml", b"<!doctype")) and b"<html" in text


def sniff(head: bytes) -> Verdict:
    """What the first bytes of a body are: ``"html"``, ``"sitemap"`` (an XML ``urlset`` or
    ``sitemapindex`` root in the window) or ``"other"``. A byte-order mark is skipped; a
    UTF-16 body is read by its ASCII bytes (every other byte dropped)."""
    for bom in _BOMS:
        if head.startswith(bom):
            head = head[len(bom):]
            if bom != _BOMS[0]:
                head = head.replace(b"\x00", b"")
            break
    if _looks_like_html(head):
        return "html"
    lowered = head.lower()
    if lowered.lstrip(_WHITESPACE).startswith(b"<") and (
            b"<urlset" in lowered or b"<sitemapindex" in lowered):
        return "sitemap"
    return "other"


#: the ``type`` label of ``courtier_not_html_total``: a bounded set, whatever servers send
TYPE_LABELS: Final = ("pdf", "image", "video", "audio", "font", "xml", "json", "javascript",
                      "css", "text", "archive", "unknown", "other")
_LABEL_OF: Final = {
    "application/pdf": "pdf", "application/json": "json", "application/javascript": "javascript",
    "text/javascript": "javascript", "text/css": "css", "application/zip": "archive",
    "application/gzip": "archive", "application/x-gzip": "archive",
    "application/x-tar": "archive", "application/x-7z-compressed": "archive",
    "application/vnd.rar": "archive", "application/x-rar-compressed": "archive"}


def type_label(kind: str | None) -> str:
    """The metric label of a declared media type (one of :data:`TYPE_LABELS`)."""
    if kind is None or kind in GENERIC_TYPES:
        return "unknown"
    if kind in _LABEL_OF:
        return _LABEL_OF[kind]
    if kind in XML_TYPES or kind.endswith("+xml"):
        return "xml"
    if kind.endswith("+json"):
        return "json"
    top = kind.split("/", 1)[0]
    return top if top in ("image", "video", "audio", "font", "text") else "other"
