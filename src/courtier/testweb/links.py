"""The link table of the test web and the HTML written from it.

Every HTML page is generated from a list of :class:`Link` values. A link
carries the ``href`` exactly as written into the page (one of many
equivalent spellings) and the canonical URL it resolves to, so the expected
crawl can be computed from the table without parsing HTML. The spellings
cover relative paths, ``./`` and ``../``, dot segments, percent-encoded
unreserved characters, fragments, upper-case scheme and host, scheme-relative
URLs, a zero-padded port (or the explicit default port when the server runs
on port 80) and surrounding white space.

Contract: resolving ``href`` against the page's base (its ``<base href>``
when present, else the page URL) with a WHATWG parser, then lower-casing,
dropping the default port and fragment and decoding percent-encoded
unreserved characters in the path, yields ``target``.
"""

from __future__ import annotations

import html
import posixpath
import random
from collections.abc import Sequence
from dataclasses import dataclass

_WORDS = (
    "courtier",
    "polite",
    "crawler",
    "archive",
    "frontier",
    "robots",
    "delay",
    "host",
    "queue",
    "lease",
    "shard",
    "harbour",
    "lantern",
    "meadow",
    "copper",
    "violet",
    "orchard",
    "quarry",
    "saddle",
    "thimble",
    "walnut",
    "anchor",
    "bramble",
    "cinder",
    "drizzle",
    "ember",
    "fennel",
    "garnet",
    "hollow",
    "indigo",
    "juniper",
    "kestrel",
    "lichen",
    "marble",
    "nettle",
    "oyster",
    "pebble",
    "quince",
    "russet",
    "sorrel",
    "tinder",
    "umber",
    "vellum",
)


@dataclass(frozen=True, slots=True)
class Link:
    """One ``<a>`` of a generated page.

    ``href`` is the attribute value before HTML escaping; ``target`` the
    canonical absolute URL; ``follow`` is False for ``rel=nofollow`` links.
    """

    href: str
    target: str
    follow: bool = True
    rel: str | None = None


@dataclass(frozen=True, slots=True)
class HtmlPage:
    """An HTML page model: its links, optional ``<base href>`` and meta robots."""

    title: str
    links: tuple[Link, ...]
    base_href: str | None = None
    meta_robots: str | None = None

    @property
    def meta_nofollow(self) -> bool:
        """True when ``<meta name=robots>`` says nofollow: no link may be followed."""
        return self.meta_robots is not None and "nofollow" in self.meta_robots.lower()


def _pct_first_char(path: str) -> str:
    """Percent-encode (upper-case hex) the first character of the last segment."""
    head, _, last = path.rpartition("/")
    if not last:
        return path
    return f"{head}/%{ord(last[0]):02X}{last[1:]}"


def _dot_segments(path: str) -> str:
    """Insert ``./x/../`` before the last segment (same path after resolution)."""
    head, _, last = path.rpartition("/")
    return f"{head}/./x/../{last}"


def _pct_dot(path: str) -> str:
    """Percent-encode (lower-case hex) the last '.' of the path, if any."""
    idx = path.rfind(".")
    if idx <= path.rfind("/"):
        return path
    return f"{path[:idx]}%2e{path[idx + 1 :]}"


class LinkWriter:
    """Spells links to canonical targets in many equivalent ways.

    ``host`` is the page's own host, ``port`` the server port and ``base_dir``
    the directory every relative href is resolved against (the directory of
    the page URL, or of its ``<base href>``); ``start`` offsets the rotation of
    spellings so that different pages use different ones.
    """

    def __init__(self, scheme: str, host: str, port: int, base_dir: str, start: int = 0) -> None:
        self.scheme = scheme
        self.host = host
        self.port = port
        self.base_dir = base_dir
        self._counter = start

    def authority(self, host: str) -> str:
        default = 80 if self.scheme == "http" else 443
        return host if self.port == default else f"{host}:{self.port}"

    def canonical(self, host: str, path: str) -> str:
        return f"{self.scheme}://{self.authority(host)}{path}"

    def _absolute_forms(self, host: str, path: str) -> list[str]:
        auth = self.authority(host)
        default = 80 if self.scheme == "http" else 443
        forms = [
            f"{self.scheme}://{auth}{path}",
            f"{self.scheme.upper()}://{auth.upper()}{path}",
            f"//{auth}{path}",
        ]
        if self.port == default:
            forms.append(f"{self.scheme}://{host}:{default}{path}")
        else:
            forms.append(f"{self.scheme}://{host}:0{self.port}{path}")
        forms.append(f"{self.scheme}://{auth}{path}#section-2")
        return forms

    def _local_forms(self, path: str) -> list[str]:
        rel = posixpath.relpath(path, self.base_dir)
        if path.endswith("/") and not rel.endswith("/"):
            rel += "/"
        forms = [
            rel,
            "./" + rel,
            path,
            f" {rel} ",
            _pct_first_char(path),
            _pct_dot(path),
            _dot_segments(path),
        ]
        if self.base_dir != "/":
            forms.append("../" + posixpath.relpath(path, posixpath.dirname(self.base_dir[:-1])))
        forms.append(rel + "#top")
        return forms + self._absolute_forms(self.host, path)

    def link(self, host: str, path: str, *, rel: str | None = None) -> Link:
        """A link to ``host`` + ``path``; the spelling rotates on every call."""
        forms = self._local_forms(path) if host == self.host else self._absolute_forms(host, path)
        href = forms[self._counter % len(forms)]
        self._counter += 1
        follow = rel is None or "nofollow" not in rel.lower().split()
        return Link(href=href, target=self.canonical(host, path), follow=follow, rel=rel)

    def self_fragment(self, page_path: str) -> Link:
        """A fragment-only link (``#top``) to the page itself (no <base> allowed)."""
        return Link(href="#top", target=self.canonical(self.host, page_path))


def render_html(page: HtmlPage, rng: random.Random, size: int) -> bytes:
    """The page's bytes: head (base, meta robots), links, then text up to ``size`` bytes."""
    parts = [
        "<!DOCTYPE html>\n<html lang=en>\n<head>\n<meta charset=utf-8>\n",
        f"<title>{html.escape(page.title)}</title>\n",
    ]
    if page.base_href is not None:
        parts.append(f'<base href="{html.escape(page.base_href)}">\n')
    if page.meta_robots is not None:
        parts.append(f'<meta name="robots" content="{html.escape(page.meta_robots)}">\n')
    parts.append(f'</head>\n<body>\n<h1 id="top">{html.escape(page.title)}</h1>\n<ul>\n')
    for n, link in enumerate(page.links):
        rel = f' rel="{html.escape(link.rel)}"' if link.rel else ""
        parts.append(f'<li><a href="{html.escape(link.href)}"{rel}>link {n}</a></li>\n')
    parts.append("</ul>\n")
    body = "".join(parts)
    used = len(body.encode())
    text: list[str] = []
    while used < size:
        sentence = " ".join(rng.choice(_WORDS) for _ in range(12)) + "."
        para = f"<p>{sentence.capitalize()}</p>\n"
        text.append(para)
        used += len(para)
    return (body + "".join(text) + '<p id="section-2">end</p>\n</body>\n</html>\n').encode()


def leaf_page(title: str, writer: LinkWriter) -> HtmlPage:
    """A small page linking only back to the host's index."""
    return HtmlPage(title=title, links=(writer.link(writer.host, "/"),))


def join_links(*groups: Sequence[Link]) -> tuple[Link, ...]:
    """Concatenate link groups, preserving order."""
    out: list[Link] = []
    for group in groups:
        out.extend(group)
    return tuple(out)
