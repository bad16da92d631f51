"""The test web's politeness behaviours themselves: robots variants, busy and slow hosts,
the Retry-After rule of the log checker, and the overlap counter."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from urllib.parse import urljoin, urlsplit

import aiohttp
import pytest

from courtier.core.errors import ConfigError
from courtier.testweb import (
    ALL_ROBOTS_KINDS,
    ROBOTS_KINDS,
    HostSpec,
    RequestRecord,
    TestWeb,
    TestWebServer,
    WebSpec,
    max_overlap,
    politeness_violations,
    render_retry_after,
)

PORT = 8123


def web_of(*kinds: str) -> TestWeb:
    hosts = [HostSpec(f"k{i}.test", pages=2, robots=k) for i, k in enumerate(kinds)]  # type: ignore[arg-type]
    return TestWeb(WebSpec(hosts=[*hosts, HostSpec("rules.test", robots="disallow_some")]), PORT)


def test_new_kinds_are_not_in_default_web_cycle() -> None:
    assert len(ROBOTS_KINDS) == 6 and set(ROBOTS_KINDS) < set(ALL_ROBOTS_KINDS)
    assert {"401", "403", "429", "503", "redirect_chain", "redirect_loop"} < set(ALL_ROBOTS_KINDS)


def test_robots_chain_and_rules_per_kind() -> None:
    kinds = ("401", "403", "429", "503", "redirect_chain", "redirect_loop", "redirect_cross_host")
    web = web_of(*kinds)
    chains = {k: web.robots_chain(f"k{i}.test") for i, k in enumerate(kinds)}
    for i, status in enumerate((401, 403, 429, 503)):
        assert chains[kinds[i]] == [(web.robots_url(f"k{i}.test"), status)]
    assert [s for _, s in chains["redirect_chain"]] == [301, 302, 307, 200]
    assert chains["redirect_chain"][-1][0] == web.url("k4.test", "/robots-real.txt")
    assert [s for _, s in chains["redirect_loop"]] == [301] + [302] * 5
    assert chains["redirect_cross_host"] == [
        (web.robots_url("k6.test"), 301),
        (web.robots_url("rules.test"), 200),
    ]
    rules = {k: web.robots_rules(f"k{i}.test") for i, k in enumerate(kinds)}
    assert rules == {
        "401": (),
        "403": (),
        "429": None,
        "503": None,
        "redirect_chain": ("/private/",),
        "redirect_loop": (),
        "redirect_cross_host": ("/private/", "/secret"),
    }


def test_expected_fetches_follow_the_robots_outcome() -> None:
    web = web_of("403", "503", "redirect_chain", "redirect_cross_host")
    exp, denied = web.expected_fetches(), web.expected_denied()
    assert web.url("k0.test", "/private/x.html") in exp
    assert not any("k1.test" in u for u in exp) and web.url("k1.test", "/") in denied
    assert web.url("k2.test", "/secret/y.html") in exp
    assert web.url("k2.test", "/private/x.html") in denied
    assert web.url("k3.test", "/secret/y.html") in denied


def test_cross_host_target_and_validation() -> None:
    spec = WebSpec(
        hosts=[
            HostSpec("a.test", robots="redirect_cross_host", robots_target="c.test"),
            HostSpec("b.test", robots="disallow_some"),
            HostSpec("c.test"),
        ]
    )
    assert spec.robots_target(spec.hosts[0]).name == "c.test"
    with pytest.raises(ConfigError):
        WebSpec(hosts=[HostSpec("a.test", robots="redirect_cross_host")])
    with pytest.raises(ConfigError):
        WebSpec(hosts=[HostSpec("a.test", robots="redirect_cross_host", robots_target="a.test")])
    for bad in (
        {"busy_status": 500},
        {"busy_every": -1},
        {"slow_latency": -0.1},
        {"retry_after": "http-date+x"},
    ):
        with pytest.raises(ConfigError):
            HostSpec("a.test", **bad)


def test_busy_and_slow_schedules() -> None:
    spec = HostSpec("a.test", busy_every=3, slow_after=2, slow_latency=0.5, latency=0.1)
    assert [spec.is_busy(n) for n in range(1, 7)] == [False, False, True] * 2
    assert [spec.latency_for(n) for n in (1, 2, 3, 9)] == [0.1, 0.1, 0.5, 0.5]
    off = HostSpec("b.test")
    assert not any(off.is_busy(n) for n in range(1, 50)) and off.latency_for(99) == 0.0


def test_render_retry_after_forms() -> None:
    now = 1_700_000_000.25
    assert render_retry_after(None, now) == (None, None)
    assert render_retry_after("7", now) == ("7", 7.0)
    value, wait = render_retry_after("http-date+2", now)
    assert value == "Tue, 14 Nov 2023 22:13:23 GMT"
    assert parsedate_to_datetime(value).timestamp() == 1_700_000_003
    assert wait == pytest.approx(2.75)
    assert render_retry_after("soon", now) == ("soon", None)
    assert render_retry_after("Tue, 14 Nov 2023 22:13:30 GMT", now)[1] == pytest.approx(9.75)


def rec(start: float, end: float, status: int = 200, until: float | None = None) -> RequestRecord:
    return RequestRecord("a.test", "/p", "GET", start, end, status, None, until)


def test_checker_enforces_retry_until() -> None:
    early = [rec(0.0, 0.1, 429, until=2.1), rec(1.0, 1.1)]
    found = politeness_violations(early, delay=0.5, max_in_flight=1)
    assert len(found) == 1 and "Retry-After" in found[0]
    late = [rec(0.0, 0.1, 429, until=2.1), rec(2.1, 2.2)]
    assert politeness_violations(late, delay=0.5, max_in_flight=1) == []
    # a request already started before the busy answer ended is not a violation of it
    overlapping = [rec(0.0, 0.5, 503, until=5.0), rec(0.2, 0.3)]
    assert politeness_violations(overlapping, delay=0.0, max_in_flight=2) == []


def test_max_overlap_counts_all_hosts() -> None:
    a = RequestRecord("a.test", "/", "GET", 0.0, 1.0, 200, None)
    b = RequestRecord("b.test", "/", "GET", 0.5, 1.5, 200, None)
    c = RequestRecord("c.test", "/", "GET", 1.0, 2.0, 200, None)  # starts as a ends
    assert max_overlap([]) == 0 and max_overlap([a]) == 1
    assert max_overlap([a, b, c]) == 2
    assert max_overlap([a, b, c, RequestRecord("d.test", "/", "GET", 0.9, 1.2, 200, None)]) == 3


async def get(
    session: aiohttp.ClientSession, port: int, host: str, path: str
) -> aiohttp.ClientResponse:
    url = f"http://127.0.0.1:{port}{path}"
    async with session.get(url, headers={"Host": host}, allow_redirects=False) as resp:
        await resp.read()
        return resp


async def test_server_busy_answers_and_slow_down() -> None:
    hosts = [
        HostSpec("busy.test", busy_every=2, busy_status=503, retry_after="http-date+1"),
        HostSpec("slow.test", slow_after=2, slow_latency=0.1),
        HostSpec("chain.test", robots="redirect_chain"),
    ]
    timeout = aiohttp.ClientTimeout(total=5)
    async with (
        TestWebServer(WebSpec(hosts=hosts)) as server,
        aiohttp.ClientSession(timeout=timeout) as session,
    ):
        port = server.port
        statuses = []
        for path in ("/robots.txt", "/", "/p/0.html", "/robots.txt", "/p/1.html", "/p/2.html"):
            asked = time.time()
            resp = await get(session, port, "busy.test", path)
            answered = time.time()
            statuses.append(resp.status)
            if resp.status == 503:
                # "http-date+1": one second after the next whole second of the answer
                when = parsedate_to_datetime(resp.headers["Retry-After"]).timestamp()
                assert asked < when <= answered + 2.0 and when == int(when)
        # robots requests are not page requests: pages 2 and 4 are busy
        assert statuses == [200, 200, 503, 200, 200, 503]
        for path in ("/", "/p/0.html", "/p/1.html"):
            await get(session, port, "slow.test", path)
        hops = []
        path = "/robots.txt"
        for _ in range(5):
            resp = await get(session, port, "chain.test", path)
            hops.append(resp.status)
            if resp.status not in (301, 302, 307):
                break
            path = urlsplit(urljoin(f"http://chain.test{path}", resp.headers["Location"])).path
        assert hops == [301, 302, 307, 200]
    busy = [r for r in server.log if r.host == "busy.test" and r.status == 503]
    assert all(r.retry_until is not None and r.retry_until > r.end for r in busy)
    slow = [r.end - r.start for r in server.log if r.host == "slow.test"]
    assert slow[2] >= 0.1  # the third request waited the slow latency
    slow_spec = WebSpec(hosts=hosts).host("slow.test")
    assert slow_spec is not None
    assert [slow_spec.latency_for(n) for n in (1, 2, 3)] == [0.0, 0.0, 0.1]
