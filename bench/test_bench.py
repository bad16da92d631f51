"""Tests of the benchmark's own parts: web generator, log observer, runner, nginx.

Run with ``.venv/bin/pytest bench/test_bench.py`` (not part of ``tests/``: the
benchmark is a tool, and its nginx test needs the nginx binary, skipped if
absent). Loopback only; every request loop is bounded.
"""

from __future__ import annotations

import http.client
import shutil
import sys
import time
from collections import deque
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import access_log
import pytest
import static_web
from access_log import LogEntry, check_coverage, check_politeness, parse_line
from report import RunResult, ratio_line, run_measured, table
from selectolax.lexbor import LexborHTMLParser


def _e(host: str, uri: str, start: float, dur: float = 0.01, status: int = 200) -> LogEntry:
    return LogEntry(host, uri, start, start + dur, status, 100, 1, "ua")


def test_parse_line_reads_fields_and_rejects_garbage() -> None:
    e = parse_line("A.bench.test\t/p/1.html\t100.250\t0.050\t200\t123\t7\tbot/1.0\n")
    assert e is not None
    assert (e.host, e.uri, e.status, e.size, e.connection) == (
        "a.bench.test",
        "/p/1.html",
        200,
        123,
        7,
    )
    assert e.start == pytest.approx(100.2) and e.end == pytest.approx(100.25)
    assert parse_line("too\tfew\tfields\n") is None
    assert parse_line("h\t/\tnotanumber\t0.1\t200\t1\t1\tua") is None


def test_polite_sequence_has_no_violations() -> None:
    log = [_e("a", "/robots.txt", 0.0)] + [_e("a", f"/p/{i}.html", 0.5 * (i + 1)) for i in range(5)]
    log += [_e("b", "/robots.txt", 0.1), _e("b", "/", 0.6)]
    rep = check_politeness(log, delay=0.5)
    assert rep.total == 0 and rep.hosts == 2 and rep.requests == 8
    assert rep.min_gap == pytest.approx(0.5)
    assert rep.max_in_flight == 1


def test_each_kind_of_violation_is_counted() -> None:
    log = [
        _e("a", "/robots.txt", 0.0),
        _e("a", "/", 0.6, dur=1.0),  # busy until 1.6
        _e("a", "/p/1.html", 1.2),  # overlaps and is only 0.6 s after: concurrency only
        _e("a", "/p/2.html", 1.9),  # gap 0.7 fine
        _e("a", "/p/3.html", 2.1),  # gap 0.2: gap violation
        _e("a", "/private/secret.html", 3.0),  # disallowed
        _e("c", "/", 0.0),  # no robots.txt at all: robots order
    ]
    rep = check_politeness(log, delay=0.5)
    assert (rep.concurrency, rep.gap, rep.robots_order, rep.disallowed) == (1, 1, 1, 1)
    assert rep.total == 4
    assert rep.max_in_flight == 2
    assert len(rep.examples) == 4


def test_request_before_robots_finished_is_a_violation() -> None:
    log = [_e("a", "/robots.txt", 0.0, dur=0.3), _e("a", "/", 0.1)]
    rep = check_politeness(log, delay=0.0)
    assert rep.robots_order == 1 and rep.concurrency == 1


def test_tolerance_absorbs_only_small_jitter() -> None:
    log = [_e("a", "/robots.txt", 0.0), _e("a", "/", 0.495), _e("a", "/p/1.html", 0.99)]
    assert check_politeness(log, delay=0.5, tolerance=0.01).gap == 0
    assert check_politeness(log, delay=0.5, tolerance=0.001).gap == 2


def test_coverage_counts_distinct_existing_pages() -> None:
    pages = {"a": ["/", "/p/1.html", "/p/2.html"], "b": ["/"]}
    log = [
        _e("a", "/robots.txt", 0),
        _e("a", "/", 1),
        _e("a", "/", 2),  # refetch
        _e("a", "/p/1.html", 3),
        _e("a", "/p/9.html", 4, status=404),
        _e("b", "/", 5),
        _e("zz", "/", 6),  # not part of the web
    ]
    cov = check_coverage(log, pages)
    assert (cov.existing, cov.distinct, cov.page_requests) == (4, 3, 4)
    assert cov.refetches == 1 and cov.robots_requests == 1 and cov.other_requests == 2
    assert cov.coverage == pytest.approx(0.75)
    assert cov.first_start == 0 and cov.last_end == pytest.approx(6.01)


def _links(path: Path) -> list[str]:
    tree = LexborHTMLParser(path.read_bytes())
    return [str(n.attributes.get("href")) for n in tree.css("a[href]")]


def test_generated_web_shape_and_reachability(tmp_path: Path) -> None:
    m = static_web.generate(
        tmp_path / "www", hosts=4, pages=12, port=8123, page_bytes=8000, links=30
    )
    assert m.total_pages == 48 and len(m.seeds()) == 4
    assert static_web.SiteManifest.load(tmp_path / "www") == m
    host = m.hosts[1]
    base = tmp_path / "www" / host
    assert (base / "robots.txt").read_text() == static_web.ROBOTS_TXT
    assert (base / "private" / "secret.html").exists()
    page = base / "p" / "5.html"
    assert 7500 <= page.stat().st_size <= 9500
    assert len(_links(page)) == 30
    # Breadth-first walk over the links, like a crawler: every page is reachable
    # from the seed and every in-web link points at a file that exists.
    wanted = {(h, u) for h, uris in m.pages.items() for u in uris}
    seen: set[tuple[str, str]] = set()
    todo = deque(m.seeds())
    while todo and len(seen) < 1000:
        url = todo.popleft()
        parts = urlsplit(url)
        key = (parts.hostname or "", parts.path or "/")
        if key in seen or not key[0].endswith(".bench.test"):
            continue
        if key[1].startswith("/private/"):
            continue
        assert key in wanted, f"link to a page that does not exist: {url}"
        seen.add(key)
        file = tmp_path / "www" / key[0] / ("index.html" if key[1] == "/" else key[1][1:])
        for href in _links(file):
            target = urldefrag(urljoin(url, href))[0]
            if target.startswith("http://") and urlsplit(target).port in (None, 8123):
                todo.append(target)
    assert seen == wanted


def test_seeds_and_hosts_files(tmp_path: Path) -> None:
    m = static_web.generate(tmp_path / "w", hosts=3, pages=2, port=9000, page_bytes=2000)
    seeds = static_web.write_seeds(m, tmp_path / "s.txt").read_text().split()
    assert seeds == [f"http://h000{i}.bench.test:9000/" for i in range(3)]
    lines = static_web.write_hosts_file(m, tmp_path / "h.txt").read_text().splitlines()
    assert lines[2] == "127.0.0.1 h0002.bench.test"


def test_run_measured_reports_child_cpu_and_kills_at_timeout(tmp_path: Path) -> None:
    burn = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass\n"
    code, timed_out, wall, ru = run_measured(
        [sys.executable, "-c", burn], tmp_path, tmp_path / "o", 30
    )
    assert code == 0 and not timed_out
    assert ru.ru_utime + ru.ru_stime >= 0.25 and wall >= 0.25
    t0 = time.monotonic()
    cmd = [sys.executable, "-c", "import time; time.sleep(30)"]
    code, timed_out, wall, _ = run_measured(cmd, tmp_path, tmp_path / "o2", 0.5)
    assert timed_out and code != 0
    assert time.monotonic() - t0 < 10


def _result(name: str, cpu: float, pages: int) -> RunResult:
    return RunResult(
        name, 0, False, 10.0, cpu, 0.0, 50.0, pages, 100, pages / 100, 0, 1, 0, 9.0,
        0, 0, 0, 0, 0, 0.5, [],
    )  # fmt: skip


def test_table_and_ratio_line() -> None:
    c, s = _result("courtier", 2.0, 100), _result("scrapy", 10.0, 100)
    assert c.cpu_per_1k == pytest.approx(20.0) and c.pages_per_s == pytest.approx(10.0)
    line = ratio_line([c, s])
    assert line is not None and "= 0.200" in line and "meets" in line
    assert "misses" in str(ratio_line([_result("courtier", 5.0, 100), s]))
    assert ratio_line([c]) is None and ratio_line([_result("courtier", 1.0, 0), s]) is None
    text = table([c, s]).splitlines()
    assert len(text) == 4 and text[0].startswith("crawler") and "20.00" in text[2]


@pytest.mark.skipif(
    not shutil.which("nginx") and not Path("/usr/sbin/nginx").exists(), reason="nginx not installed"
)
def test_nginx_serves_each_host_and_logs_it(tmp_path: Path) -> None:
    from nginx_local import LocalNginx, free_port

    port = free_port()
    m = static_web.generate(tmp_path / "www", hosts=2, pages=3, port=port, page_bytes=3000)
    log = tmp_path / "access.log"
    with LocalNginx(tmp_path / "www", tmp_path / "ngx", port, log):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        got = []
        for host, uri in [(m.hosts[0], "/robots.txt"), (m.hosts[0], "/"), (m.hosts[1], "/p/2.html"),
                          (m.hosts[1], "/nope.html"), ("elsewhere.example", "/")]:  # fmt: skip
            conn.request("GET", uri, headers={"Host": f"{host}:{port}"})
            resp = conn.getresponse()
            body = resp.read()
            got.append((resp.status, resp.getheader("Connection")))
            if host == m.hosts[0] and uri == "/":
                assert b"h0000.bench.test page 0" in body
        conn.close()
    assert [g[0] for g in got] == [200, 200, 200, 404, 404]
    assert all(g[1] == "keep-alive" for g in got)
    entries = access_log.read_log(log)  # complete: nginx flushed its buffer on stop
    assert [(e.host, e.uri) for e in entries][:3] == [
        (m.hosts[0], "/robots.txt"), (m.hosts[0], "/"), (m.hosts[1], "/p/2.html"),
    ]  # fmt: skip
    assert len({e.connection for e in entries}) == 1


def test_record_figures_from_a_real_crawl_directory(tmp_path: Path) -> None:
    """The figures `courtier plan` reads, computed from a real (demo) crawl's data dir."""
    import json

    import record_figures

    from courtier.cli.demo import run_demo
    from courtier.ops.figures import load_figures

    data = tmp_path / "demo"
    assert run_demo(data, 2, 4, 0.05, "none") == 0
    result = _result("courtier", 0.04, 8)
    args = {"hosts": 2, "pages": 4, "page_bytes": 30_000, "links": 50, "delay": 0.05,
            "concurrency": 8}
    figures = record_figures.figures_from_run(result, data, args, "test")
    assert figures["cpu_seconds_per_page"] == pytest.approx(0.005)
    assert figures["store_bytes_per_url"] > 0 and figures["warc_bytes_per_fetch"] > 0
    out = tmp_path / "figures.json"
    record_figures.write_figures(figures, out)
    loaded, raw = load_figures(out)           # the plan command accepts what was written
    assert loaded.cpu_seconds_per_page == pytest.approx(0.005)
    assert json.loads(out.read_text())["measured_at"] == raw["measured_at"]
