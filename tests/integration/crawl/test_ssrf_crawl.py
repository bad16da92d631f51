"""SSRF end to end: the real AddressGuard, in a real crawl, refuses every way in.

A page links to a host outside ``--allow-network`` (by name and by IP
literal), redirects to it, and the site's robots.txt names a sitemap on it.
That host is a second test server on 127.0.0.2; the crawl allows only
127.0.0.1/32. Judged from the target server's own log: it sees nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from courtier.core.config import build_config
from courtier.core.urls import canonicalize
from courtier.crawl.app import crawl
from courtier.store.sqlite import SqliteStore
from courtier.testweb import HostSpec, TestWebServer, WebSpec


async def outcomes(data: Path, urls: list[str]) -> dict[str, str | None]:
    """Outcome of each URL that is in the store (absent URLs are left out)."""
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        rows = {u: await store.get_url(canonicalize(u).url_key) for u in urls}
    finally:
        await store.close()
    return {u: row["outcome"] for u, row in rows.items() if row is not None}


@pytest.mark.timeout(120)
async def test_guard_refuses_link_redirect_and_sitemap_outside_allow_network(
    tmp_path: Path,
) -> None:
    target_spec = WebSpec(hosts=[HostSpec("target.test", pages=2)])
    async with TestWebServer(target_spec, host="127.0.0.2") as target:
        by_name = f"http://target.test:{target.port}"
        by_ip = f"http://127.0.0.2:{target.port}"
        blocked = [f"{by_name}/from-link", f"{by_ip}/from-literal",
                   f"{by_name}/from-redirect", f"{by_name}/from-sitemap.xml"]
        site = HostSpec("site.test", pages=2, extra_links=tuple(blocked[:2]),
                        redirect_out=(blocked[2],), extra_sitemaps=(blocked[3],))
        async with TestWebServer(WebSpec(hosts=[site])) as server:
            hosts = tmp_path / "hosts.txt"
            hosts.write_text("127.0.0.1 site.test\n127.0.0.2 target.test\n")
            data = tmp_path / "data"
            config = build_config({
                "data": data, "seeds": (server.url("site.test", "/"),), "resolve": hosts,
                "allow_network": ("127.0.0.1/32",), "scope": "any", "delay": 0.05,
                "progress": "none", "linger": 0.0,
            }, environ={})
            status = await asyncio.wait_for(crawl(config, install_signals=False), 90)
            site_paths = {r.path_qs for r in server.log}
    assert target.log == []  # not one request reached the host outside --allow-network
    # the crawl did meet all four ways in (scope "any" let them through) ...
    assert {"/", "/out/0", "/robots.txt"} <= site_paths
    assert status.stop_reason == "nothing due"
    # ... queued them (so no scope rule dropped them), and never fetched one: the guard
    # refused the target's robots.txt before connecting, and every URL of the host ended
    # as "blocked" (not handed back to be retried)
    found = await outcomes(data, blocked)
    assert found == dict.fromkeys(blocked, "blocked")
