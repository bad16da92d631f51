"""The indexer feed of a real crawl of the local test web: every event valid against the
published schema, and the links of the events equal to the test web's own link graph."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import pytest

from courtier.app import crawl
from courtier.events import load_schema
from courtier.store.sqlite import SqliteStore
from courtier.testweb import TestWebServer, default_web
from courtier.testweb.site import TestWeb
from tests.integration.crawl.test_crawl_testweb import config_for


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
        store = SqliteStore(data / "courtier.db")
        await store.open()
        try:
            events = await store.read_events(0, 10_000)
        finally:
            await store.close()
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
