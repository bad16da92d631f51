"""Generate the static test web that both crawlers fetch in the benchmark.

Layout on disk (served by nginx with ``root <ROOT>/$host``)::

    <ROOT>/h0000.bench.test/index.html        page 0, the seed ("/")
    <ROOT>/h0000.bench.test/p/1.html … p/<N-1>.html
    <ROOT>/h0000.bench.test/private/secret.html   exists, but robots.txt disallows it
    <ROOT>/h0000.bench.test/robots.txt         "User-agent: *" / "Disallow: /private/"
    <ROOT>/manifest.json                       what exists (see :class:`SiteManifest`)

Every page is about ``page_bytes`` of HTML with about ``links`` anchors:

* a link to the next page of the chain, so every page is reachable from "/";
* most links go to random pages of the same host, written in the usual forms
  (root-relative, document-relative, absolute URL, with a ``#fragment``);
* a few go to pages of other hosts of the web (absolute URLs with the port);
* one goes to ``/private/secret.html`` (robots-disallowed: a polite crawler never
  fetches it) and a couple go to ``*.invalid`` hosts outside the web (never
  resolvable, so a crawler that strays cannot reach any real network);
* a ``mailto:`` and a ``javascript:`` link, which crawlers must ignore.

Contract: the generated web is a pure function of ``(hosts, pages, port, seed,
page_bytes, links)``; :func:`generate` returns the manifest of pages that exist
and are allowed, which is the denominator of the coverage figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

DOMAIN = "bench.test"
ROBOTS_TXT = "User-agent: *\nDisallow: /private/\n"
PRIVATE_PATH = "/private/secret.html"

_WORDS = (
    "courtier polite crawler frontier host delay robots archive record page link "
    "anchor fetch queue lease shard store commit version epoch digest simhash "
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
    "november oscar papa quebec romeo sierra tango uniform victor whiskey xray "
    "yankee zulu river mountain valley forest meadow harbour lantern compass "
    "orchard granite willow ember silver copper amber cedar maple thistle heron"
)
_VOCAB = tuple(_WORDS.split())


@dataclass(frozen=True)
class SiteManifest:
    """What the generated web contains.

    ``pages`` maps each host name to the request URIs of its pages that exist
    and that robots.txt allows (``"/"`` and ``"/p/<k>.html"``);
    ``disallowed`` lists the URIs that exist but robots.txt forbids.
    """

    root: str
    port: int
    hosts: list[str]
    pages: dict[str, list[str]]
    disallowed: list[str]
    page_bytes: int
    links_per_page: int

    @property
    def total_pages(self) -> int:
        """Number of pages a complete, polite crawl fetches (robots.txt excluded)."""
        return sum(len(v) for v in self.pages.values())

    def seeds(self) -> list[str]:
        """One seed URL per host: its home page."""
        return [f"http://{h}:{self.port}/" for h in self.hosts]

    def save(self) -> Path:
        """Write ``manifest.json`` into the web root and return its path."""
        return save_manifest(self.root, asdict(self))

    @classmethod
    def load(cls, root: str | Path) -> SiteManifest:
        """Read the manifest written by :meth:`save`."""
        return cls(**read_manifest(root))


def save_manifest(root: str | Path, fields: dict[str, Any]) -> Path:
    """Write a manifest's fields as ``manifest.json`` in ``root`` and return its path."""
    path = Path(root) / "manifest.json"
    path.write_text(json.dumps(fields), encoding="utf-8")
    return path


def read_manifest(root: str | Path) -> dict[str, Any]:
    """The fields :func:`save_manifest` wrote in ``root``."""
    fields: dict[str, Any] = json.loads((Path(root) / "manifest.json").read_text("utf-8"))
    return fields


class CrawlableWeb(Protocol):
    """What the seed and hosts files need of a web's manifest (either generator's)."""

    root: str
    hosts: list[str]

    @property
    def total_pages(self) -> int: ...

    def seeds(self) -> list[str]: ...


def host_name(index: int) -> str:
    """Name of host number ``index`` (``h0007.bench.test``)."""
    return f"h{index:04d}.{DOMAIN}"


def page_uri(k: int) -> str:
    """Request URI of page ``k`` of a host; page 0 is the home page ``/``."""
    return "/" if k == 0 else f"/p/{k}.html"


def _link_forms(rng: random.Random, here: int, target: int, host: str, port: int,
                scheme: str = "http") -> str:
    """One href to ``target`` written as a page at ``here`` of ``host`` might write it."""
    uri = page_uri(target)
    form = rng.randrange(10)
    if form < 4:
        href = uri
    elif form < 7:
        if target == 0:
            href = "../" if here != 0 else "./"
        elif here == 0:
            href = f"p/{target}.html"
        else:
            href = f"{target}.html"
    elif form < 9:
        href = f"{scheme}://{host}:{port}{uri}"
    else:
        href = f"{uri}#s{rng.randrange(20)}"
    return href


def _paragraph(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(_VOCAB, k=words)).capitalize() + "."


def render_page(
    rng: random.Random,
    hosts: list[str],
    host_index: int,
    k: int,
    pages: int,
    port: int,
    page_bytes: int,
    links: int,
) -> str:
    """HTML of page ``k`` of host ``hosts[host_index]`` (about ``page_bytes`` long)."""
    host = hosts[host_index]
    hrefs: list[str] = [_link_forms(rng, k, (k + 1) % pages, host, port)]
    n_cross = min(6, len(hosts) - 1) if len(hosts) > 1 else 0
    n_same = max(0, links - 1 - n_cross - 5)
    hrefs += [_link_forms(rng, k, rng.randrange(pages), host, port) for _ in range(n_same)]
    for _ in range(n_cross):
        other = rng.randrange(len(hosts) - 1)
        other += other >= host_index
        hrefs.append(f"http://{hosts[other]}:{port}{page_uri(rng.randrange(pages))}")
    hrefs += [
        PRIVATE_PATH,
        f"http://ext{rng.randrange(1000)}.invalid/away.html",
        f"https://ext{rng.randrange(1000)}.invalid/",
        "mailto:webmaster@example.invalid",
        "javascript:void(0)",
    ]
    rng.shuffle(hrefs)
    return html_page(rng, f"{host} page {k}", hrefs, page_bytes)


def html_page(rng: random.Random, title: str, hrefs: list[str], page_bytes: int) -> str:
    """An HTML page titled ``title`` of about ``page_bytes`` carrying one anchor per href,
    in order, spread over paragraphs of random words."""
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title>"
        '<meta name="viewport" content="width=device-width">'
        "<style>body{font-family:sans-serif;max-width:60em}nav a{margin:0 .3em}</style>"
        "</head><body>\n"
        f"<header><h1>{title}</h1></header>\n<main>\n"
    )
    parts: list[str] = [head]
    size = len(head)
    per_par = max(1, len(hrefs) // 10)
    i = 0
    budget = page_bytes - 200
    while i < len(hrefs) or size < budget:
        text = _paragraph(rng, rng.randrange(40, 90))
        anchors = "".join(
            f' <a href="{h}">{rng.choice(_VOCAB)} {j}</a>'
            for j, h in enumerate(hrefs[i : i + per_par], start=i)
        )
        i += per_par
        par = f"<p>{text}{anchors}</p>\n"
        parts.append(par)
        size += len(par)
    parts.append("</main>\n<footer><p>generated for the courtier benchmark</p></footer>\n")
    parts.append("</body></html>\n")
    return "".join(parts)


def generate(
    root: str | Path,
    hosts: int = 200,
    pages: int = 30,
    port: int = 8080,
    seed: int = 1,
    page_bytes: int = 30_000,
    links: int = 50,
) -> SiteManifest:
    """Write the whole web under ``root`` and return (and save) its manifest.

    ``pages`` counts the home page; each host also gets a robots.txt and one
    disallowed page. Existing files under ``root`` are overwritten.
    """
    if hosts < 1 or pages < 1:
        raise ValueError("hosts and pages must be >= 1")
    root_path = Path(root)
    names = [host_name(i) for i in range(hosts)]
    pages_by_host: dict[str, list[str]] = {}
    for hi, host in enumerate(names):
        rng = random.Random(seed * 1_000_003 + hi)
        base = root_path / host
        (base / "p").mkdir(parents=True, exist_ok=True)
        (base / "private").mkdir(exist_ok=True)
        (base / "robots.txt").write_text(ROBOTS_TXT, encoding="utf-8")
        (base / "private" / "secret.html").write_text(
            "<!DOCTYPE html><html><body><p>robots.txt disallows this page.</p>"
            '<a href="/private/more.html">more</a></body></html>\n',
            encoding="utf-8",
        )
        for k in range(pages):
            html = render_page(rng, names, hi, k, pages, port, page_bytes, links)
            target = base / "index.html" if k == 0 else base / "p" / f"{k}.html"
            target.write_text(html, encoding="utf-8")
        pages_by_host[host] = [page_uri(k) for k in range(pages)]
    manifest = SiteManifest(
        root=str(root_path.resolve()),
        port=port,
        hosts=names,
        pages=pages_by_host,
        disallowed=[PRIVATE_PATH],
        page_bytes=page_bytes,
        links_per_page=links,
    )
    manifest.save()
    return manifest


def write_seeds(manifest: CrawlableWeb, path: str | Path) -> Path:
    """Write the seed URLs, one per line, and return the path."""
    out = Path(path)
    out.write_text("".join(s + "\n" for s in manifest.seeds()), encoding="utf-8")
    return out


def write_hosts_file(manifest: CrawlableWeb, path: str | Path, addr: str = "127.0.0.1") -> Path:
    """Write an /etc/hosts-style file mapping every host of the web to ``addr``."""
    out = Path(path)
    out.write_text("".join(f"{addr} {h}\n" for h in manifest.hosts), encoding="utf-8")
    return out


def web_arguments(description: str | None, hosts: int, pages: int) -> argparse.ArgumentParser:
    """The command-line flags every web generator has (root, hosts, pages, port, seed)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("root")
    ap.add_argument("--hosts", type=int, default=hosts)
    ap.add_argument("--pages", type=int, default=pages)
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--seed", type=int, default=1)
    return ap


def write_crawl_files(manifest: CrawlableWeb, root: str) -> None:
    """Write ``seeds.txt`` and ``hosts.txt`` beside the web and say what was made."""
    write_seeds(manifest, os.path.join(root, "seeds.txt"))
    write_hosts_file(manifest, os.path.join(root, "hosts.txt"))
    print(f"{len(manifest.hosts)} hosts, {manifest.total_pages} pages under {manifest.root}")


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python bench/static_web.py ROOT [--hosts N --pages N --port P]``."""
    ap = web_arguments(__doc__.splitlines()[0] if __doc__ else None, 200, 30)
    ap.add_argument("--page-bytes", type=int, default=30_000)
    ap.add_argument("--links", type=int, default=50)
    args = ap.parse_args(argv)
    m = generate(
        args.root, args.hosts, args.pages, args.port, args.seed, args.page_bytes, args.links
    )
    write_crawl_files(m, args.root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
