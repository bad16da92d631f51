"""Building the indexer-facing fields of an outbox event (schema ``event-v1.json``).

The processor gives :func:`fetch_event` what it knows about one fetch; the
store then adds ``url_key``, ``url``, ``version`` and ``outcome``. Every key
of the schema is always present (``null`` when it does not apply), so a
consumer never has to guess whether a field is missing or empty.

Links are reported canonicalized (fragment dropped, the form the crawler
queues), folded by canonical URL in first-seen order: a URL is ``nofollow``
only if every occurrence is, its anchor is the first non-empty one and its
``rel`` tokens those of its first occurrence. A page whose robots directives
say ``nofollow`` reports ``[]`` (its links were not read); a page that was not
parsed (not HTML, truncated, over the parse budget) reports ``null``.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from courtier.core.errors import InvalidURL
from courtier.crawl.link_memo import canonicalize_link
from courtier.parse.html import Link, ParsedPage

__all__ = ["EVENT_VERSION", "fetch_event", "link_entries", "load_schema", "page_fields"]

#: version of the event payload; bumped on any incompatible change (new file event-vN.json)
EVENT_VERSION = 1
_REL_FLAGS = ("nofollow", "sponsored", "ugc")


@cache
def load_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of an event payload of :data:`EVENT_VERSION`."""
    text = resources.files("courtier.events").joinpath(
        f"schema/event-v{EVENT_VERSION}.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def link_entries(links: list[Link]) -> list[dict[str, Any]]:
    """The event form of a page's out-links (see the module docstring)."""
    out: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for link in links:
        try:
            url = canonicalize_link(link.url).url
        except InvalidURL:
            continue
        at = index.get(url)
        if at is not None:
            entry = out[at]
            entry["nofollow"] = entry["nofollow"] and link.nofollow
            if not entry["anchor"] and link.anchor:
                entry["anchor"] = link.anchor
            continue
        index[url] = len(out)
        tokens = link.rel.split() if link.rel else []
        out.append({
            "url": url, "anchor": link.anchor, "tag": link.tag, "rel": tokens,
            "nofollow": link.nofollow,
            "sponsored": "sponsored" in tokens, "ugc": "ugc" in tokens,
        })
    return out


def media_type(content_type: str | None) -> str | None:
    """``text/html`` of ``text/html; charset=utf-8`` (lower-cased), or None."""
    if not content_type:
        return None
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime or None


def header_charset(content_type: str | None) -> str | None:
    """The ``charset`` parameter of a Content-Type header, lower-cased, or None."""
    if not content_type:
        return None
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower() or None
    return None


def page_fields(page: ParsedPage | None, x_robots_tag: str | None) -> dict[str, Any]:
    """The fields that come from parsing HTML (all None when the page was not parsed)."""
    if page is None:
        return {"title": None, "canonical": None, "lang": None, "links": None,
                "robots": None, "charset_detected": None}
    return {
        "title": page.title,
        "canonical": page.canonical,
        "lang": page.lang,
        "links": [] if page.meta_nofollow else link_entries(page.links),
        "robots": {"noindex": page.meta_noindex, "nofollow": page.meta_nofollow,
                   "meta": page.robots_meta, "header": x_robots_tag},
        "charset_detected": page.encoding,
    }


def fetch_event(
    *, kind: str, outcome: str, status: int | None, fetched_at: float, url: str,
    content_type: str | None, content_language: str | None, content_length: int | None,
    payload_digest: str | None, simhash: int | None, near_dup_of: str | None,
    redirect_to: str | None, redirect_hops: int, changed: bool | None,
    warc: dict[str, Any] | None, error_kind: str | None, page: dict[str, Any],
    redirect_chain: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One event payload without the store's keys (see ``schema/event-v1.json``).

    ``redirect_chain``: the hops that led to ``url`` (``events/redirects.py``)."""
    chain = list(redirect_chain or ())
    detected = page.pop("charset_detected", None)
    unchanged = outcome == "not_modified" or (outcome == "ok" and changed is False)
    return {
        "event_version": EVENT_VERSION,
        "kind": kind,
        "status": status,
        "fetched_at": fetched_at,
        "final_url": url,
        "redirect_to": redirect_to,
        "redirect_hops": redirect_hops,
        "redirect_chain": chain,
        "redirect_chain_dropped": max(0, redirect_hops - len(chain)),
        "content_type": content_type,
        "mime": media_type(content_type),
        "charset": header_charset(content_type) or detected,
        "content_language": content_language,
        "content_length": content_length,
        "payload_digest": payload_digest,
        "simhash": None if simhash is None else f"{simhash:016x}",
        "near_dup_of": near_dup_of,
        "changed": changed,
        "unchanged": unchanged,
        "gone": outcome == "gone",
        "error_kind": error_kind,
        "warc": warc,
        **page,
    }
