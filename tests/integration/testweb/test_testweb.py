"""The local multi-host test web: site model, oracle, server, access log, checker."""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import Mapping

import ada_url
import aiohttp
import pytest
from selectolax.lexbor import LexborHTMLParser

from courtier.core.errors import ConfigError
from courtier.testweb import (
    ROBOTS_KINDS,
    HostSpec,
    RequestRecord,
    TestWeb,
    TestWebServer,
    WebSpec,
    default_web,
    normalize_path,
    politeness_violations,
    serve_testweb,
)

PORT = 8123
UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def host_of(web: TestWeb, kind: str) -> str:
    return next(h.name for h in web.spec.hosts if h.robots == kind)


def canon(url: str) -> str:
    """Independent canonical form: WHATWG parse, no fragment, unreserved %XX decoded."""
    u = ada_url.URL(url)
    path = re.sub(
        r"%([0-9A-Fa-f]{2})",
        lambda m: chr(int(m.group(1), 16)) if chr(int(m.group(1), 16)) in UNRESERVED else m[0],
        u.pathname,
    )
    return f"{u.protocol}//{u.host}{path}{u.search}"


def html_links(page_url: str, body: bytes) -> list[tuple[str, str | None]]:
    """(resolved canonical URL, rel) of every <a href>, honouring <base href>."""
    tree = LexborHTMLParser(body)
    base = page_url
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        base = ada_url.join_url(page_url, base_node.attributes["href"] or "")
    return [
        (canon(ada_url.join_url(base, a.attributes["href"] or "")), a.attributes.get("rel"))
        for a in tree.css("a[href]")
    ]


# ------------------------------------------------------------------ spec / model


def test_default_web_has_every_robots_kind_among_first_six() -> None:
    spec = default_web()
    assert [h.name for h in spec.hosts[:2]] == ["h00.courtier.test", "h01.courtier.test"]
    assert {h.robots for h in spec.hosts[:6]} == set(ROBOTS_KINDS)
    assert all(h.pages == 20 for h in spec.hosts)


def test_spec_validation_raises_config_error() -> None:
    with pytest.raises(ConfigError):
        HostSpec(name="not a host")
    with pytest.raises(ConfigError):
        HostSpec(name="a.test", pages=0)
    with pytest.raises(ConfigError):
        WebSpec(hosts=[HostSpec(name="a.test"), HostSpec(name="A.test")])


def test_pages_are_deterministic_and_seed_dependent() -> None:
    a, b = TestWeb(default_web(seed=7), PORT), TestWeb(default_web(seed=7), PORT)
    c = TestWeb(default_web(seed=8), PORT)
    paths = ["/", "/p/0.html", "/p/3.html", "/p/19.html", "/files/2.pdf", "/img/2.png"]
    for path in paths:
        assert a.page("h01.courtier.test", path) == b.page("h01.courtier.test", path)
    assert (
        a.page("h01.courtier.test", "/p/5.html").body
        != c.page("h01.courtier.test", "/p/5.html").body
    )
    assert a.expected_fetches() == b.expected_fetches()


def test_page_size_is_configurable() -> None:
    small = TestWeb(default_web(page_bytes=500), PORT).page("h00.courtier.test", "/p/1.html")
    big = TestWeb(default_web(page_bytes=20_000), PORT).page("h00.courtier.test", "/p/1.html")
    assert len(small.body) < 2_500
    assert 20_000 <= len(big.body) < 21_000


def test_equivalent_spellings_map_to_one_page() -> None:
    web = TestWeb(default_web(), PORT)
    ref = web.page("h00.courtier.test", "/p/3.html")
    for spelling in ("/p/%33.html", "/p/3%2ehtml", "/p/./x/../3.html", "/p/3.html?x=1"):
        assert normalize_path(spelling) == "/p/3.html"
        assert web.page("H00.courtier.test", spelling) == ref
    assert normalize_path("/a/%2F/b") == "/a/%2F/b"
    assert web.page("h00.courtier.test", "/p/20.html").status == 404
    assert web.page("nowhere.test", "/").status == 404


def test_link_table_matches_the_html_written() -> None:
    """Resolving every href with a WHATWG parser gives the table's canonical target."""
    web = TestWeb(default_web(), PORT)
    hrefs: list[str] = []
    n_base = 0
    for spec in web.spec.hosts:
        paths = ["/", "/meta-nofollow.html", "/private/x.html"]
        paths += [f"/p/{i}.html" for i in range(spec.pages)]
        for path in paths:
            model = web.html_model(spec.name, path)
            assert model is not None
            n_base += model.base_href is not None
            body = web.page(spec.name, path).body
            found = html_links(web.url(spec.name, path), body)
            assert [t for t, _ in found] == [link.target for link in model.links], path
            assert [r for _, r in found] == [link.rel for link in model.links]
            hrefs += [link.href for link in model.links]
    assert n_base > 0
    joined = "\n".join(hrefs)
    for needle in ("HTTP://H0", f":0{PORT}/", "//h0", "%3", "%2e", "./", "../", "#top", " "):
        assert needle in joined, needle


def test_nofollow_links_and_meta_nofollow_page() -> None:
    web = TestWeb(default_web(), PORT)
    index = web.html_model("h00.courtier.test", "/")
    assert index is not None
    nofollow = [link for link in index.links if not link.follow]
    assert [link.target for link in nofollow] == [
        web.url("h00.courtier.test", "/nofollow-target.html")
    ]
    meta = web.html_model("h00.courtier.test", "/meta-nofollow.html")
    assert meta is not None and meta.meta_nofollow and meta.links
    body = web.page("h00.courtier.test", "/meta-nofollow.html").body
    assert b'<meta name="robots" content="nofollow">' in body


def test_expected_fetches_contains_and_excludes_the_right_urls() -> None:
    web = TestWeb(default_web(), PORT)
    exp = web.expected_fetches()
    allow = host_of(web, "allow_all")
    some = host_of(web, "disallow_some")
    broken = host_of(web, "500")
    for path in (
        "/",
        "/p/0.html",
        "/p/19.html",
        "/r/1",
        "/r/0",
        "/missing/0.html",
        "/files/1.pdf",
        "/img/2.png",
        "/loop/a",
        "/loop/b",
        "/private/x.html",
        "/secret/y.html",
        "/meta-nofollow.html",
    ):
        assert web.url(allow, path) in exp, path
    assert web.url(some, "/p/4.html") in exp
    assert not any("/private/" in u or "/secret" in u for u in exp if some in u)
    assert {u for u in exp if broken in u} == set()
    assert web.url(broken, "/") in web.expected_denied()
    assert not any(u.endswith(("/robots.txt", "/robots-real.txt")) for u in exp)
    assert not any("/nofollow-target.html" in u or "/hidden/" in u for u in exp)
    assert all(u == canon(u) and "#" not in u for u in exp)
    # another agent only obeys the '*' group: /secret is allowed for it
    other = web.expected_fetches("otherbot")
    assert web.url(some, "/secret/y.html") in other
    assert web.url(some, "/private/x.html") not in other
    assert web.url(some, "/secret/y.html") in web.expected_denied()


def test_seeds_and_hosts_file() -> None:
    web = TestWeb(default_web(n_hosts=3), PORT)
    assert web.seeds() == [f"http://h0{i}.courtier.test:{PORT}/" for i in range(3)]
    assert web.hosts_file_text("127.0.0.2").splitlines() == [
        f"127.0.0.2 h0{i}.courtier.test" for i in range(3)
    ]
    assert TestWeb(default_web(n_hosts=1), 80).seeds() == ["http://h00.courtier.test/"]


# ------------------------------------------------------------------ checker


def rec(host: str, start: float, end: float, path: str = "/") -> RequestRecord:
    return RequestRecord(host, path, "GET", start, end, 200, None)


def test_violation_checker_detects_overlap_and_short_gap() -> None:
    overlap = [rec("a", 0.0, 0.5), rec("a", 0.1, 0.3)]
    found = politeness_violations(overlap, delay=0.0, max_in_flight=1)
    assert len(found) == 1 and "2 requests in flight" in found[0]
    assert politeness_violations(overlap, delay=0.0, max_in_flight=2) == []
    close = [rec("a", 10.0, 10.01), rec("a", 10.1, 10.11)]
    found = politeness_violations(close, delay=1.0, max_in_flight=1)
    assert len(found) == 1 and "started 0.100s" in found[0]


def test_violation_checker_accepts_compliant_sequences() -> None:
    log = [rec("a", 0.0, 0.2), rec("a", 1.0, 1.5), rec("a", 1.995, 2.1), rec("b", 0.0, 0.1)]
    log.append(rec("b", 0.5, 0.6))  # other host: its own budget, but too close for delay 1
    assert politeness_violations(log, 1.0, 1, host_delays={"b": 0.5}) == []
    assert len(politeness_violations(log, 1.0, 1)) == 1
    # [start, end) intervals: back-to-back requests do not overlap
    assert politeness_violations([rec("c", 0, 1), rec("c", 1, 2)], 0.0, 1) == []


# ------------------------------------------------------------------ server


async def get(
    session: aiohttp.ClientSession, server: TestWebServer, host: str, path: str, **headers: str
) -> tuple[int, Mapping[str, str], bytes]:
    """GET ``path`` from the server with ``Host: host``; headers are case-insensitive."""
    url = f"http://127.0.0.1:{server.port}{path}"
    async with session.get(url, headers={"Host": host, **headers}, allow_redirects=False) as r:
        return r.status, r.headers.copy(), await r.read()


async def test_server_serves_hosts_and_robots_variants() -> None:
    timeout = aiohttp.ClientTimeout(total=5)
    async with (
        TestWebServer(default_web(pages_per_host=5)) as server,
        aiohttp.ClientSession(timeout=timeout) as session,
    ):
        web = server.web
        assert server.port > 0 and server.base_url("h01.courtier.test").endswith(f":{server.port}")
        for host in ("h00.courtier.test", "h01.courtier.test", "h05.courtier.test"):
            status, headers, body = await get(session, server, host, "/p/1.html")
            assert status == 200 and headers["Content-Type"].startswith("text/html")
            assert body == web.page(host, "/p/1.html").body
            assert f"{host} page 1".encode() in body
        robots = {h.robots: h.name for h in web.spec.hosts}
        status, _, body = await get(session, server, robots["allow_all"], "/robots.txt")
        assert status == 200 and b"User-agent: *" in body
        status, _, body = await get(session, server, robots["disallow_some"], "/robots.txt")
        assert status == 200 and b"Disallow: /private/" in body and b"Disallow: /secret" in body
        assert (await get(session, server, robots["404"], "/robots.txt"))[0] == 404
        assert (await get(session, server, robots["500"], "/robots.txt"))[0] == 500
        status, _, body = await get(session, server, robots["crawl_delay"], "/robots.txt")
        assert status == 200 and b"Crawl-delay: 2\n" in body
        status, headers, _ = await get(session, server, robots["redirect"], "/robots.txt")
        assert status == 301
        assert headers["Location"] == server.url(robots["redirect"], "/robots-real.txt")
        status, _, body = await get(session, server, robots["redirect"], "/robots-real.txt")
        assert status == 200 and b"Allow: /" in body
        # other resources
        status, headers, _ = await get(session, server, "h00.courtier.test", "/r/2")
        assert (status, headers["Location"]) == (301, "/p/2.html")
        status, headers, _ = await get(session, server, "h00.courtier.test", "/loop/a")
        assert (status, headers["Location"]) == (302, "/loop/b")
        status, headers, body = await get(session, server, "h00.courtier.test", "/img/3.png")
        assert status == 200 and headers["Content-Type"] == "image/png"
        assert body.startswith(b"\x89PNG\r\n\x1a\n")
        status, headers, body = await get(session, server, "h00.courtier.test", "/files/3.pdf")
        assert headers["Content-Type"] == "application/pdf" and body.startswith(b"%PDF-")
        assert (await get(session, server, "h00.courtier.test", "/missing/1.html"))[0] == 404
        assert (await get(session, server, "unknown.test", "/"))[0] == 404
        status, headers, _ = await get(session, server, "h00.courtier.test", "/p/2.html")
        etag = headers["ETag"]
        status, _, body = await get(
            session, server, "h00.courtier.test", "/p/2.html", **{"If-None-Match": etag}
        )
        assert (status, body) == (304, b"")
        url = f"http://127.0.0.1:{server.port}/p/2.html"
        async with session.head(url, headers={"Host": "h00.courtier.test"}) as resp:
            assert resp.status == 200 and await resp.read() == b""
    assert server.log[-1].method == "HEAD" and server.log[-1].path_qs == "/p/2.html"
    assert server.log[0].host == "h00.courtier.test" and server.log[0].path_qs == "/p/1.html"
    assert [r.status for r in server.log if r.path_qs == "/robots.txt"] == [
        200,
        200,
        404,
        500,
        200,
        301,
    ]


async def test_log_records_start_end_and_latency() -> None:
    spec = WebSpec(hosts=[HostSpec("slow.test", pages=2, latency=0.15), HostSpec("fast.test")])
    async with TestWebServer(spec) as server, aiohttp.ClientSession() as session:
        await get(session, server, "fast.test", "/")
        await get(session, server, "slow.test", "/p/0.html")
    fast, slow = server.log
    assert (fast.host, fast.method, fast.status) == ("fast.test", "GET", 200)
    assert fast.peer_port is not None and fast.peer_port > 0
    assert fast.end >= fast.start
    assert slow.end - slow.start >= 0.15
    assert fast.end <= slow.start


async def test_a_held_response_waits_for_its_release() -> None:
    """Red with the hold skipped in the handler: the response comes before the release."""
    spec = WebSpec(hosts=[HostSpec("a.test", pages=3), HostSpec("b.test")])
    async with TestWebServer(spec) as server, aiohttp.ClientSession() as session:
        held = server.hold_next("a.test")  # any page, never robots.txt
        await get(session, server, "a.test", "/robots.txt")
        await get(session, server, "b.test", "/")
        assert not held.arrived.is_set()
        pending = asyncio.create_task(get(session, server, "a.test", "/p/1.html"))
        await held.arrived.wait()
        await get(session, server, "a.test", "/p/2.html")  # only the next one is held
        assert not pending.done()
        assert held.user_agent.startswith("Python")
        held.release()
        await pending
    _, _, second, first = server.log  # robots.txt and b.test's index came first
    assert (first.path_qs, second.path_qs) == ("/p/1.html", "/p/2.html")
    assert first.end >= second.end
    assert not held.cut


async def test_a_held_response_ends_when_its_client_gives_up() -> None:
    """The client's cancelled request ends in the log when the connection closes (the
    hold never released): red with the hold waiting for the release only (timeout)."""
    spec = WebSpec(hosts=[HostSpec("a.test", pages=3)])
    async with TestWebServer(spec) as server, aiohttp.ClientSession() as session:
        held = server.hold_next("a.test", "/p/1.html")
        pending = asyncio.create_task(get(session, server, "a.test", "/p/1.html"))
        await held.arrived.wait()
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending

        async with asyncio.timeout(10.0):
            # the end is logged once the server notices the close (the log is a plain list)
            while not server.log:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    (cut,) = server.log
    assert (cut.path_qs, cut.status) == ("/p/1.html", 499)
    assert held.cut


async def test_checker_sees_concurrent_and_too_close_real_requests() -> None:
    spec = WebSpec(hosts=[HostSpec("slow.test", pages=3, latency=0.2)])
    async with TestWebServer(spec) as server, aiohttp.ClientSession() as session:
        await asyncio.gather(
            get(session, server, "slow.test", "/p/0.html"),
            get(session, server, "slow.test", "/p/1.html"),
        )
    assert len(server.log) == 2
    found = politeness_violations(server.log, delay=1.0, max_in_flight=1)
    assert any("in flight" in f for f in found)
    assert any("started" in f for f in found)
    assert politeness_violations(server.log, delay=0.0, max_in_flight=2) == []


async def test_serve_testweb_runs_until_cancelled() -> None:
    ready: asyncio.Queue[TestWebServer] = asyncio.Queue()
    task = asyncio.create_task(serve_testweb(default_web(n_hosts=2), on_ready=ready.put_nowait))
    server = await asyncio.wait_for(ready.get(), 5)
    async with aiohttp.ClientSession() as session:
        assert (await get(session, server, "h01.courtier.test", "/"))[0] == 200
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            await get(session, server, "h01.courtier.test", "/")


# ------------------------------------------------------------------ oracle vs a real crawl


def robots_rules(status: int, body: bytes, agent: str) -> list[str] | None:
    """Disallow prefixes for ``agent``; None = host off limits. Enough for the test web."""
    if status >= 500:
        return None
    if status >= 400:
        return []
    groups: dict[str, list[str]] = {}
    current: list[str] = []
    agents: list[str] = []
    for line in body.decode().splitlines():
        key, _, value = (p.strip() for p in line.split("#")[0].partition(":"))
        if key.lower() == "user-agent":
            if not agents or current:
                agents, current = [], []
            agents.append(value.lower())
            for a in agents:
                groups[a] = current
        elif key.lower() == "disallow" and value:
            current.append(value)
    return groups.get(agent, groups.get("*", []))


async def mini_crawl(server: TestWebServer, delay: float, limit: int = 400) -> set[str]:
    """A tiny polite crawler: one task per host, sequential, ``delay`` between starts.

    Ends when no live host has queued URLs and no fetch is in progress.
    """
    fetched: set[str] = set()
    seen = set(server.web.seeds())
    queues: dict[str, deque[str]] = {h.name: deque() for h in server.spec.hosts}
    for seed in seen:
        queues[ada_url.URL(seed).hostname].append(seed)
    live = set(queues)
    busy = 0

    async def fetch(
        session: aiohttp.ClientSession, url: str
    ) -> tuple[int, Mapping[str, str], bytes]:
        u = ada_url.URL(url)
        return await get(session, server, u.hostname, u.pathname)

    def idle() -> bool:
        return busy == 0 and not any(queues[h] for h in live)

    async def host_task(session: aiohttp.ClientSession, host: str) -> None:
        nonlocal busy
        busy += 1
        status, headers, body = await fetch(session, server.url(host, "/robots.txt"))
        for _ in range(5):
            if status not in (301, 302):
                break
            await asyncio.sleep(delay)
            status, headers, body = await fetch(session, headers["Location"])
        busy -= 1
        rules = robots_rules(status, body, "courtier")
        if rules is None:
            live.discard(host)
            return
        while len(fetched) < limit:
            if not queues[host]:
                if idle():
                    return
                await asyncio.sleep(0.01)
                continue
            url = queues[host].popleft()
            if any(ada_url.URL(url).pathname.startswith(p) for p in rules):
                continue
            busy += 1
            await asyncio.sleep(delay)
            fetched.add(url)
            status, headers, body = await fetch(session, url)
            found: list[str] = []
            if status in (301, 302):
                found.append(canon(ada_url.join_url(url, headers["Location"])))
            elif headers.get("Content-Type", "").startswith("text/html") and (
                b'name="robots" content="nofollow"' not in body
            ):
                found += [
                    t for t, rel in html_links(url, body) if "nofollow" not in (rel or "").lower()
                ]
            for target in found:
                if target not in seen:
                    seen.add(target)
                    queues[ada_url.URL(target).hostname].append(target)
            busy -= 1

    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await asyncio.wait_for(asyncio.gather(*(host_task(session, h) for h in queues)), timeout=20)
    return fetched


async def test_expected_fetches_equals_what_a_polite_crawler_fetches() -> None:
    spec = default_web(n_hosts=6, pages_per_host=6, page_bytes=800)
    async with TestWebServer(spec) as server:
        fetched = await mini_crawl(server, delay=0.02)
    assert fetched == server.web.expected_fetches()
    gets = {r.host for r in server.log}
    assert server.fetched_urls() >= fetched
    assert [r.path_qs for r in server.log if r.host == host_of(server.web, "500")] == [
        "/robots.txt"
    ]
    assert gets == {h.name for h in spec.hosts}
    assert politeness_violations(server.log, delay=0.02, max_in_flight=1) == []


def test_expected_archived_leaves_out_the_files_that_are_not_html() -> None:
    web = TestWeb(WebSpec(hosts=[HostSpec("a.test", pages=6, sitemap_pages=2)]), PORT)
    expected, archived = web.expected_fetches(), web.expected_archived()
    left_out = {web.url("a.test", p) for p in ("/files/1.pdf", "/files/5.pdf", "/img/0.png",
                                                 "/img/2.png")}
    assert left_out <= expected and not left_out & archived
    for path in ("/", "/p/1.html", "/r/1", "/missing/0.html", "/sitemaps/index.xml",
                 "/sitemaps/pages.xml.gz", "/s/0.html"):
        assert web.url("a.test", path) in archived, path
    assert archived <= expected
    assert all(re.search(r"/(files/\d+\.pdf|img/\d+\.png)$", url) for url in expected - archived)
