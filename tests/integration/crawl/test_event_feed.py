"""The indexer feed of a real crawl of the local test web: every event valid against the
published schema, and the links of the events equal to the test web's own link graph."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import pytest

from courtier.crawl.app import crawl
from courtier.events import load_schema
from courtier.store.sqlite import SqliteStore
from courtier.testweb import TestWebServer, default_web
from courtier.testweb.site import TestWeb
from tests.integration.crawl.test_crawl_testweb import config_for
from tests.integration.outbox import outbox_events
from tests.integration.serve import loopback_crawl, serve


def expected_links(web: TestWeb, url: str) -> dict[str, tuple[bool, str]]:
    """canonical target → (nofollow, first anchor) of the page's link table."""
    parts = urlsplit(url)
    model = web.html_model(parts.hostname or "", parts.path or "/")
    assert model is not None, url
    if model.meta_nofollow:
        return {}
    out: dict[str, tuple[bool, str]] = {}
    for n, link in enumerate(model.links):
        if link.href.startswith("#"):
            continue  # fragment-only: the page itself, never reported
        nofollow, anchor = out.get(link.target, (True, f"link {n}"))
        out[link.target] = (nofollow and not link.follow, anchor)
    return out


@pytest.mark.timeout(120)
async def test_every_event_validates_and_links_equal_the_test_web_graph(tmp_path: Path) -> None:
    async with TestWebServer(default_web(n_hosts=3, pages_per_host=6, crawl_delay=0.3)) as server:
        data = tmp_path / "data"
        await crawl(config_for(server, data), install_signals=False)  # type: ignore[arg-type]
        web = server.web
        events = await outbox_events(data)
        validator = jsonschema.Draft202012Validator(load_schema())
        for event in events:
            validator.validate(event.payload)
        html = [e.payload for e in events
                if e.payload["outcome"] == "ok" and e.payload["mime"] == "text/html"]
        assert len(html) >= 10
        for payload in html:
            got = {link["url"]: (link["nofollow"], link["anchor"]) for link in payload["links"]}
            assert got == expected_links(web, payload["url"]), payload["url"]
        outcomes = {e.payload["outcome"] for e in events}
        assert {"ok", "redirect", "gone", "robots_denied"} <= outcomes
        assert any(e.payload["links"] == [] and e.payload["robots"]["nofollow"]
                   for e in events if e.payload["mime"] == "text/html")
        assert all(e.payload["gone"] for e in events if e.payload["outcome"] == "gone")


@pytest.mark.timeout(120)
async def test_a_page_reached_through_redirects_carries_its_chain(tmp_path: Path) -> None:
    """/start → 301 → /hop1 → 302 → /hop2 → 307 → /page, as the server answered them."""
    from aiohttp import web

    hops = {"/start": (301, "/hop1"), "/hop1": (302, "/hop2"), "/hop2": (307, "/page")}
    answered: list[tuple[str, int]] = []

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(status=404)
        if request.path in hops:
            status, location = hops[request.path]
            answered.append((request.path, status))
            return web.Response(status=status, headers={"Location": location})
        answered.append((request.path, 200))
        return web.Response(text="<html><title>end</title><body>end</body></html>",
                            content_type="text/html")

    async with serve(handle) as port:
        base = f"http://hops.test:{port}"
        await crawl(loopback_crawl(tmp_path, "hops.test", (base + "/start",)),
                    install_signals=False)
    store = SqliteStore(tmp_path / "data" / "courtier.db")
    await store.open()
    try:
        events = [e.payload for e in await store.read_events(0, 100)]
    finally:
        await store.close()
    validator = jsonschema.Draft202012Validator(load_schema())
    for payload in events:
        validator.validate(payload)
    (page,) = [p for p in events if p["outcome"] == "ok"]
    # the chain is the server's own sequence of answers before the page
    assert answered[-1] == ("/page", 200)
    expected = [{"url": base + path, "status": status} for path, status in answered[:-1]]
    assert page["final_url"] == page["url"] == base + "/page"
    assert page["redirect_chain"] == expected and len(expected) == 3
    assert page["redirect_hops"] == 3 and page["redirect_chain_dropped"] == 0
    # each redirect event carries the part of the chain before it
    by_url = {p["url"]: p for p in events}
    assert by_url[base + "/hop2"]["redirect_chain"] == expected[:2]
    assert by_url[base + "/start"]["redirect_chain"] == []
