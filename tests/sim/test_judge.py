"""The simulator's judge: independent of the crawler, and strict about back-off.

The observer must share no code with what it judges (a parser bug made by both
would go unseen), so it reads robots.txt and Retry-After with its own
:mod:`courtier.sim.reference`; these tests pin that reference to RFC 9309 by
hand-written cases and show the judge catches a crawler that backs off too little.
"""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

import courtier.sim.observer as observer_module
import courtier.sim.reference as reference_module
from courtier.sim.observer import Observer
from courtier.sim.reference import ReferenceRobots, retry_after_until
from courtier.sim.run import sim_config, simulate
from courtier.sim.web import SimHost, SimWeb

JUDGED = ("courtier.politeness", "courtier.frontier", "courtier.fetch", "courtier.crawl",
          "courtier.crawl.process", "courtier.parse")


def courtier_imports(path: str) -> set[str]:
    tree = ast.parse(Path(path).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n == "courtier" or n.startswith("courtier.")}


def test_the_judge_imports_nothing_of_the_crawler() -> None:
    assert courtier_imports(str(observer_module.__file__)) == {"courtier.sim.reference"}
    assert courtier_imports(str(reference_module.__file__)) == set()
    # and at run time, importing the judge loads no crawler module at all
    code = ("import sys, courtier.sim.observer; "
            "print('\\n'.join(m for m in sys.modules if m.startswith('courtier')))")
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                            text=True).stdout.split()
    assert not [m for m in loaded if m.startswith(JUDGED)], loaded


ROBOTS = b"""# a comment
User-agent: otherbot
Disallow: /

User-agent: *
Disallow: /private/
Allow: /private/open$
Disallow: /*.pdf$
Disallow: /tmp
Allow: /tmp
Crawl-delay: 3

User-agent: Courtier
User-agent: someone
Disallow: /secret
Allow: /secret/ok
Crawl-delay: 0.5
"""


@pytest.mark.parametrize(
    ("agent", "path", "allowed"),
    [
        ("anybot", "/", True),
        ("anybot", "/private/x", False),
        ("anybot", "/private/open", True),        # longer Allow wins
        ("anybot", "/private/open/more", False),  # ...but $ anchors it
        ("anybot", "/doc.pdf", False),            # * and $
        ("anybot", "/doc.pdf?x=1", True),
        ("anybot", "/tmp/x", True),               # equal length: Allow wins the tie
        ("otherbot", "/anything", False),
        ("otherbot", "/robots.txt", True),        # always allowed
        ("courtier", "/private/x", True),         # its own group replaces *
        ("COURTIER", "/secret/x", False),         # agent names are case-insensitive
        ("courtier", "/secret/ok/1", True),
    ],
)
def test_reference_robots_follows_rfc_9309(agent: str, path: str, allowed: bool) -> None:
    assert ReferenceRobots.parse(ROBOTS).allowed(agent, path) is allowed


def test_reference_crawl_delay_and_empty_files() -> None:
    robots = ReferenceRobots.parse(ROBOTS)
    assert robots.crawl_delay("courtier") == 0.5
    assert robots.crawl_delay("anybot") == 3.0
    assert robots.crawl_delay("otherbot") is None
    empty = ReferenceRobots.parse(b"")
    assert empty.allowed("courtier", "/x") and empty.crawl_delay("courtier") is None
    assert ReferenceRobots.parse(b"User-agent: *\nDisallow:\n").allowed("courtier", "/x")


def test_reference_retry_after() -> None:
    now = 1_700_000_000.0
    assert retry_after_until("120", now) == now + 120
    assert retry_after_until(" 0 ", now) == now
    assert retry_after_until("Wed, 15 Nov 2023 22:13:20 GMT", now) == 1_700_086_400.0
    assert retry_after_until("Sun, 06 Nov 1994 08:49:37 GMT", now) == now  # past: no wait
    assert retry_after_until("-5", now) is None
    assert retry_after_until("soon", now) is None


def judge() -> Observer:
    return Observer("courtier", delay=0.0, max_in_flight=1, max_in_flight_per_ip=0)


def serve(obs: Observer, start: float, status: int, retry_after: str | None = None,
          path: str = "/p") -> None:
    obs.on_start("h.sim", "192.0.2.1", path, start)
    obs.on_end("h.sim", "192.0.2.1", path, start, start + 0.1, status,
               b"User-agent: *\nDisallow:\n" if path == "/robots.txt" else b"", retry_after)


def test_judge_requires_doubling_pauses_without_retry_after() -> None:
    good, constant = judge(), judge()
    for obs in (good, constant):
        serve(obs, 0.0, 200, path="/robots.txt")
    t = 1.0
    for k in range(5):                      # pauses of 5, 10, 20, 40, 80 s (−25 %)
        serve(good, t, 503)
        t += 0.1 + 5.0 * 2**k * 0.8
    serve(good, t, 200)
    assert good.violations == []
    t = 1.0
    for _ in range(5):                      # a constant 5 s back-off
        serve(constant, t, 429)
        t += 0.1 + 5.0
    assert len(constant.violations) >= 3
    assert all("during back-off" in v for v in constant.violations)


def test_judge_enforces_retry_after_and_resets_after_success() -> None:
    obs = judge()
    serve(obs, 0.0, 200, path="/robots.txt")
    serve(obs, 1.0, 429, retry_after="30")
    serve(obs, 1.1 + 20.0, 200)             # 20 s < 30 s asked
    assert len(obs.violations) == 1
    serve(obs, 40.0, 503)                   # failures reset by the success: 5 s again
    serve(obs, 40.1 + 4.0, 200)
    assert len(obs.violations) == 1


def busy_web(status: int, retry_after: str | None) -> SimWeb:
    # the index succeeds, then every page request fails: failures in a row
    return SimWeb([SimHost("busy.sim", pages=10, latency=0.05, latency_jitter=0.0,
                           cross_links=0, failure_rate=1.0, failures_after=1,
                           failure_status=status, retry_after=retry_after)])


def failure_gaps(report: object) -> list[float]:
    pages = sorted((r for r in report.requests if r.path != "/robots.txt"),  # type: ignore[attr-defined]
                   key=lambda r: r.start)
    return [b.start - a.end for a, b in itertools.pairwise(pages) if a.status in (429, 503)]


@pytest.mark.parametrize("status", [429, 503])
def test_busy_host_without_retry_after_sees_growing_gaps(status: int) -> None:
    report = simulate(busy_web(status, None), sim_config(delay=0.5, max_retries=2))
    assert report.violations == []
    gaps = failure_gaps(report)
    assert len(gaps) >= 6, gaps
    # pauses double (±25 % jitter) up to the cap: strictly growing, from ≥ 3.75 s
    assert gaps[0] >= 3.75
    assert all(b > a for a, b in itertools.pairwise(gaps[:6])), gaps


@pytest.mark.parametrize("status", [429, 503])
def test_busy_host_with_retry_after_is_left_alone_that_long(status: int) -> None:
    report = simulate(busy_web(status, "120"), sim_config(delay=0.5, max_retries=2))
    assert report.violations == []
    gaps = failure_gaps(report)
    assert len(gaps) >= 3 and min(gaps) >= 120.0, gaps
