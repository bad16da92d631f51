"""Shared helpers: run a real crawl of a test web and read the server's log."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from courtier.core.config import CrawlConfig, build_config
from courtier.crawl.app import crawl
from courtier.crawl.status import CrawlStatus
from courtier.testweb import RequestRecord, TestWebServer, WebSpec
from courtier.testweb.tls import TestCA

#: the schemes a crawl test of the test web runs over (issue 31: HTTPS too)
SCHEMES = ("http", "https")


def config_for(server: TestWebServer, data: Path, **extra: object) -> CrawlConfig:
    """A crawl of every host of ``server`` on loopback; ``extra`` overrides flags."""
    resolve = data.parent / f"{data.name}-hosts.txt"
    resolve.write_text(server.web.hosts_file_text())
    flags: dict[str, object] = {
        "data": data,
        "seeds": tuple(server.web.seeds()),
        "resolve": resolve,
        "allow_network": ("127.0.0.0/8",),
        "delay": 0.1,
        "progress": "none",
        "concurrency": 16,
        "linger": 0.0,
    }
    flags.update(extra)
    return build_config(flags)


def served_over(scheme: str, spec: WebSpec, directory: Path
                ) -> tuple[dict[str, object], dict[str, object]]:
    """Keyword arguments for :class:`TestWebServer` and for :func:`run_crawl` that serve
    ``spec`` over ``scheme``: for https a CA made now, a certificate naming every host,
    and the crawl's ``--ca-file`` (written under ``directory``); nothing for http."""
    if scheme == "http":
        return {}, {}
    ca = TestCA()
    directory.mkdir(parents=True, exist_ok=True)
    return ({"ssl_context": ca.server_context(h.name for h in spec.hosts)},
            {"ca_file": ca.write_pem(directory / "ca.pem")})


async def run_crawl(server: TestWebServer, data: Path, **extra: object) -> CrawlStatus:
    """Run the real crawl (no signal handlers) against ``server`` to its end."""
    return await crawl(config_for(server, data, **extra), install_signals=False)


def host_log(log: Sequence[RequestRecord], host: str) -> list[RequestRecord]:
    """One host's requests in order of their start."""
    return sorted((r for r in log if r.host == host), key=lambda r: r.start)


def pages(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """Requests that are not robots files nor their redirect hops."""
    return [r for r in records if not r.path_qs.startswith("/robots")]


def start_gaps(records: Sequence[RequestRecord]) -> list[float]:
    """Seconds between consecutive request starts."""
    return [b.start - a.start for a, b in itertools.pairwise(records)]
