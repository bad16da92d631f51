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

_NGINX = pytest.mark.skipif(
    not shutil.which("nginx") and not Path("/usr/sbin/nginx").exists(),
    reason="nginx not installed")


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


@_NGINX
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


def test_the_two_benches_keep_each_others_figures(tmp_path: Path) -> None:
    """store_bench's per-node rates and a crawl's figures share one file, each writer
    keeping the other's; `courtier plan` then has every figure it needs (red when
    write_figures replaced the file whole: the rates were gone)."""
    import json

    import record_figures

    from courtier.ops.figures import load_figures
    from courtier.ops.plan import CrawlShape, plan

    out = tmp_path / "figures.json"
    rates = {"intake_rows_per_second": 1_500.0, "commit_results_per_second": 600.0,
             "intake_cpu_s_per_row": 0.0003}
    record_figures.write_store_figures(out, {"Citus": rates, "PostgreSQL": rates}, 1000, 2,
                                       "--citus")
    crawl = {"measured_at": "2026-12-06T00:00:00Z", "cpu_seconds_per_page": 0.004,
             "store_bytes_per_url": 900, "store_bytes_per_event": 600,
             "warc_bytes_per_fetch": 9000, "warc_compression_ratio": 3.0, "peak_rss_mb": 100}
    record_figures.write_figures(crawl, out)
    raw = json.loads(out.read_text())
    assert raw["intake_rows_per_second_per_node"] == 750          # 1,500 over 2 nodes
    assert raw["commit_results_per_second_per_node"] == 300
    assert raw["store_nodes"]["Citus"]["intake_cpu_s_per_row"] == 0.0003
    record_figures.write_store_figures(out, {"Citus": rates, "PostgreSQL": rates}, 1000, 1,
                                       "--citus")
    figures, raw = load_figures(out)
    assert raw["cpu_seconds_per_page"] == 0.004
    assert figures.commit_results_per_second_per_node == 600
    assert plan(CrawlShape(1e9, 1e8, 100), figures).pg_nodes_for_writes >= 1


# ---- the realistic web (realistic_web.py) and its judge ----------------------------------


def _realistic(tmp_path: Path, hosts: int = 40, pages: int = 10, port: int = 8123):
    import realistic_web

    return realistic_web.generate(tmp_path / "www", hosts=hosts, pages=pages, port=port, seed=3)


def _file_of(root: Path, host: str, uri: str) -> Path:
    import realistic_web

    res = realistic_web.resource_of(uri)
    if res.startswith("/list.html?"):
        args = dict(p.split("=") for p in res.split("?", 1)[1].split("&"))
        return root / host / "l" / f"{args['cat']}_{args['page']}.html"
    return root / host / ("index.html" if res == "/" else res[1:])


def test_realistic_host_kinds_and_robots_answers(tmp_path: Path) -> None:
    """Each kind of host in its exact share, and what its robots.txt file says.

    Seen red: with robots-500 hosts' pages left in ``pages`` (the denominator), the
    ``pages == []`` assertion failed ("Left contains 16 more items, first extra item:
    '/'")."""
    m = _realistic(tmp_path)
    kinds = list(m.kinds.values())
    assert (kinds.count("crawl-delay"), kinds.count("robots-404"), kinds.count("robots-500"),
            kinds.count("normal")) == (4, 2, 1, 33)
    root = tmp_path / "www"
    for host, kind in m.kinds.items():
        robots = m.robots[host]
        if kind == "robots-500":
            assert robots.status == 500 and robots.disallow == ["/"]
            assert m.pages[host] == [] and m.category[host] == {}
            assert len(m.unreachable[host]) == 16  # they exist, a polite crawler never sees them
            assert all(_file_of(root, host, u).exists() for u in m.unreachable[host])
            assert (root / host / "robots.500").exists()
            assert not (root / host / "robots.txt").exists()
        elif kind == "robots-404":
            assert robots.status == 404 and robots.disallow == [] and robots.sitemaps == []
            assert not (root / host / "robots.txt").exists()
            assert not (root / host / "private").exists()
            assert static_web.PRIVATE_PATH in m.broken[host]
        else:
            text = (root / host / "robots.txt").read_text()
            assert "Disallow: /private/" in text and robots.disallow == ["/private/"]
            assert ("Crawl-delay: " in text) == (kind == "crawl-delay")
            if kind == "crawl-delay":
                assert f"Crawl-delay: {robots.crawl_delay:g}\n" in text
                assert robots.crawl_delay in (1.0, 2.0)
            assert all(f"Sitemap: {s}" in text for s in robots.sitemaps)
    assert sorted(m.crawl_delays().values()) == [1.0, 1.0, 2.0, 2.0]
    rules = m.host_rules(1.5)
    delayed = [h for h, k in m.kinds.items() if k == "crawl-delay"]
    assert sorted(rules[h].gap for h in delayed) == [1.5, 1.5, 2.0, 2.0]
    assert type(m).load(root) == m


def test_realistic_duplicates_sizes_and_sitemaps(tmp_path: Path) -> None:
    """Exact duplicates are byte-equal to their original, near duplicates differ by a few
    words, every page is 30-100 KB with 50-150 anchors, sitemaps list only pages.

    Seen red: with ``near_duplicate`` returning its input unchanged, the
    ``changed`` count was 0 (``assert 1 <= 0``)."""
    import gzip
    import re

    m = _realistic(tmp_path, hosts=12, pages=20)
    root = tmp_path / "www"
    forms: set[str] = set()
    for host in m.hosts:
        dups = m.duplicate_of[host]
        assert sorted(m.category[host][u] for u in dups) == ["exact-dup"] * 2 + ["near-dup"] * 2
        for uri, original in dups.items():
            a, b = _file_of(root, host, uri).read_text(), _file_of(root, host, original).read_text()
            if m.category[host][uri] == "exact-dup":
                assert a == b
            else:
                changed = sum(x != y for x, y in zip(a.split(" "), b.split(" "), strict=True))
                assert 1 <= changed <= 3
        for uri in m.pages[host]:
            f = _file_of(root, host, uri)
            assert 30_000 <= f.stat().st_size <= 101_000
            assert 50 <= len(_links(f)) <= 160  # the home page also links every extra
        for sm in m.robots[host].sitemaps:
            path = urlsplit(sm).path
            forms.add(path)
            blobs = [(root / host / path[1:]).read_bytes()]
            if path == "/sitemap_index.xml":
                subs = re.findall(rb"<loc>http://[^/]+(/[^<]+)</loc>", blobs[0])
                assert subs == [b"/sitemaps/1.xml", b"/sitemaps/2.xml.gz"]
                blobs = [(root / host / s.decode()[1:]).read_bytes() for s in subs]
            locs = []
            for blob in blobs:
                text = gzip.decompress(blob) if blob[:2] == b"\x1f\x8b" else blob
                locs += [urlsplit(u.decode().replace("&amp;", "&"))
                         for u in re.findall(rb"<loc>([^<]+)</loc>", text)]
            assert sorted(u.path + (f"?{u.query}" if u.query else "") for u in locs) == sorted(
                m.pages[host])
    assert forms == {"/sitemap.xml", "/sitemap.xml.gz", "/sitemap_index.xml"}


def test_realistic_web_reachable_set_is_the_manifest(tmp_path: Path) -> None:
    """A polite breadth-first walk (robots rules per host, redirects followed, spellings
    folded by ``resource_of``) reaches exactly ``pages``; every in-web link is a page,
    a variant, a redirect, a broken URI, a disallowed one or a non-HTML file, as the
    manifest says (the files seen red once: before the manifest listed them, the walk
    stopped at "link to something the manifest does not know: …/docs/report-1.pdf").

    Seen red: with the home page no longer linking the host's extras, the walk missed
    extras (``reached == wanted`` failed: "Extra items in the right set:
    ('h0002.bench.test', '/list.html?cat=news&page=2')")."""
    import realistic_web

    m = _realistic(tmp_path, hosts=10, pages=8, port=8124)
    root = tmp_path / "www"
    wanted = {(h, u) for h, uris in m.pages.items() for u in uris}
    reached: set[tuple[str, str]] = set()
    todo = deque(m.seeds())
    seen_urls: set[str] = set()
    kinds_seen: set[str] = set()
    while todo and len(seen_urls) < 5000:
        url = urldefrag(todo.popleft())[0]
        if url in seen_urls:
            continue
        seen_urls.add(url)
        parts = urlsplit(url)
        host = parts.hostname or ""
        if not host.endswith(".bench.test") or parts.port != 8124:
            continue
        uri = parts.path + (f"?{parts.query}" if parts.query else "")
        if any(parts.path.startswith(p) for p in m.robots[host].disallow):
            kinds_seen.add("disallowed")
            continue
        if uri in m.redirects[host]:
            kinds_seen.add("redirect")
            todo.append(f"http://{host}:8124{m.redirects[host][uri][1]}")
            continue
        if uri in m.broken[host]:
            kinds_seen.add("broken")
            assert not _file_of(root, host, uri).exists()
            continue
        if m.non_html_of(host, uri) is not None:
            kinds_seen.add("non-html")  # a file, not a page: nothing to follow in it
            assert (root / host / uri[1:]).stat().st_size == m.non_html[host][uri].bytes
            continue
        res = realistic_web.resource_of(uri)
        assert (host, res) in wanted, f"link to something the manifest does not know: {url}"
        if uri != res:
            assert m.variants[host][uri] == res
            kinds_seen.add("variant")
        reached.add((host, res))
        for href in _links(_file_of(root, host, uri)):
            todo.append(urljoin(url, href))
    assert reached == wanted
    assert kinds_seen == {"disallowed", "redirect", "broken", "variant", "non-html"}


def test_realistic_web_is_a_pure_function_of_its_parameters(tmp_path: Path) -> None:
    import realistic_web

    a = realistic_web.generate(tmp_path / "a", hosts=6, pages=4, port=9000, seed=5)
    b = realistic_web.generate(tmp_path / "b", hosts=6, pages=4, port=9000, seed=5)
    realistic_web.generate(tmp_path / "c", hosts=6, pages=4, port=9000, seed=6)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*")
                   if p.is_file() and p.name != "manifest.json")
    assert files and all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
                         for f in files)
    assert {**vars(a), "root": ""} == {**vars(b), "root": ""}
    assert (tmp_path / "a" / "h0000.bench.test" / "index.html").read_bytes() != (
        tmp_path / "c" / "h0000.bench.test" / "index.html").read_bytes()


def test_resource_of_folds_spellings_of_one_page() -> None:
    from realistic_web import list_uri, resource_of

    canon = list_uri("news", 2)
    assert canon == "/list.html?cat=news&page=2"
    assert {resource_of(list_uri("news", 2, f)) for f in ("canonical", "swapped", "tracked")} == {
        canon}
    assert resource_of("/p/3.html?utm_source=feed") == "/p/3.html"
    assert resource_of("/list.html?cat=shop&page=2") != canon


def test_judge_holds_each_host_to_its_own_robots_and_crawl_delay() -> None:
    """Per-host rules: a Crawl-delay gap, a robots-500 host's page, robots.txt itself.

    Seen red: with ``host_rules`` ignored (the run's delay and prefixes for every
    host), the counts were (0, 0, 0, 1): no gap violation on the Crawl-delay host, and
    the one disallowed fetch counted was the robots-404 host's, not the robots-500's."""
    from access_log import HostRules

    rules = {"cd": HostRules(("/private/",), 2.0), "e500": HostRules(("/",), 0.5),
             "n404": HostRules((), 0.5)}
    log = [
        _e("cd", "/robots.txt", 0.0), _e("cd", "/", 2.0), _e("cd", "/p/1.html", 3.0),  # 1 s < 2 s
        _e("e500", "/robots.txt", 0.0, status=500), _e("e500", "/robots.txt", 60.0, status=500),
        _e("e500", "/", 61.0),  # robots.txt answered 500: nothing is allowed
        _e("n404", "/robots.txt", 0.0, status=404), _e("n404", "/private/secret.html", 1.0),
    ]
    rep = check_politeness(log, delay=0.5, host_rules=rules)
    assert (rep.concurrency, rep.gap, rep.robots_order, rep.disallowed) == (0, 1, 0, 1)
    assert any("cd: /p/1.html" in x for x in rep.examples)
    assert any("e500: fetched disallowed /" in x for x in rep.examples)
    plain = check_politeness(log, delay=0.5)  # one rule for all: judges the wrong fetch
    assert (plain.gap, plain.disallowed) == (0, 1)
    assert plain.examples == ["n404: fetched disallowed /private/secret.html"]


def test_coverage_folds_spellings_and_ends_the_window_at_the_last_page() -> None:
    """Seen red: with ``resource`` ignored by ``check_coverage``, (distinct, page
    requests, refetches) were (1, 1, 0) instead of (2, 3, 1)."""
    import realistic_web

    pages = {"a": ["/", "/list.html?cat=news&page=1"]}
    log = [
        _e("a", "/robots.txt", 0),
        _e("a", "/", 1),
        _e("a", "/list.html?page=1&cat=news", 2),
        _e("a", "/list.html?cat=news&page=1&utm_source=x", 3),  # the same page again
        _e("a", "/old/3.html", 4, status=301),
        _e("a", "/robots.txt", 60),  # a late retry: outside the crawl window
    ]
    cov = check_coverage(log, pages, realistic_web.resource_of)
    assert (cov.distinct, cov.page_requests, cov.refetches) == (2, 3, 1)
    assert cov.last_page_end == pytest.approx(3.01) and cov.last_end == pytest.approx(60.01)
    assert check_coverage(log, pages).distinct == 1


def test_cpu_between_interpolates_and_run_measured_samples_the_group(tmp_path: Path) -> None:
    """Seen red: with the /proc sample replaced by 0.0, ``max(...) >= 0.2`` failed
    (0.0): the grandchild's CPU is read from its process group while it runs."""
    from report import cpu_between

    samples = [(10.0, 1.0), (11.0, 2.0), (13.0, 2.0)]
    assert cpu_between(samples, 10.5, 12.0) == pytest.approx(0.5)
    assert cpu_between(samples, 9.0, 12.0) is None
    burn = ("import subprocess, sys, time\n"
            "subprocess.run([sys.executable, '-c', 'import time\\nt=time.process_time()\\n"
            "while time.process_time()-t<0.6: pass'])\n")
    got: list[tuple[float, float]] = []
    code, _, _, ru = run_measured([sys.executable, "-c", burn], tmp_path, tmp_path / "o", 60,
                                  got, sample_every=0.05)
    assert code == 0 and len(got) >= 3
    assert [t for t, _ in got] == sorted(t for t, _ in got)
    assert got[-1][1] == pytest.approx(ru.ru_utime + ru.ru_stime)
    assert max(c for _, c in got[:-1]) >= 0.2  # the child's CPU was seen while it ran


@_NGINX
def test_nginx_serves_the_realistic_rules(tmp_path: Path) -> None:
    """robots.txt 500 and 404, query pages in any order, the redirect chain, sitemaps."""
    from nginx_local import LocalNginx, free_port

    port = free_port()
    m = _realistic(tmp_path, hosts=40, pages=6, port=port)
    by_kind = {k: h for h, k in m.kinds.items()}
    host = next(h for h in m.hosts if m.robots[h].sitemaps)
    chain = next(u for u, (s, t) in m.redirects[host].items() if str(t).startswith("/old/"))
    asks = [(by_kind["robots-500"], "/robots.txt"), (by_kind["robots-404"], "/robots.txt"),
            (by_kind["crawl-delay"], "/robots.txt"), (host, "/list.html?page=2&cat=shop"),
            (host, "/list.html?cat=shop&page=2&utm_source=x"), (host, "/list.html"),
            (host, chain), (host, urlsplit(m.robots[host].sitemaps[0]).path)]
    got = []
    with LocalNginx(tmp_path / "www", tmp_path / "ngx", port, tmp_path / "access.log"):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        for h, uri in asks:
            conn.request("GET", uri, headers={"Host": f"{h}:{port}"})
            resp = conn.getresponse()
            got.append((resp.status, resp.getheader("Location"), resp.read()))
        conn.close()
    assert [g[0] for g in got] == [500, 404, 200, 200, 200, 404, 301, 200]
    assert b"Crawl-delay: " in got[2][2]
    assert got[3][2] == got[4][2] == (tmp_path / "www" / host / "l" / "shop_2.html").read_bytes()
    old = m.redirects[host][chain][1]
    assert got[6][1] == f"http://{host}:{port}{old}"


def test_realistic_web_over_https_writes_https_urls(tmp_path: Path) -> None:
    """Seen red: with ``_hrefs`` writing ``http://`` for other hosts' pages whatever the
    scheme, ``http_links`` held 200 of them ('http://h0004.bench.test:8443/p/2.html'…)."""
    m = _realistic_scheme(tmp_path, "https")
    assert m.seeds()[0] == "https://h0000.bench.test:8443/"
    assert all(s.startswith("https://") for r in m.robots.values() for s in r.sitemaps)
    links = [h for host in m.hosts for u in m.pages[host]
             for h in _links(_file_of(tmp_path / "www", host, u))]
    http_links = [h for h in links if h.startswith("http://") and ".bench.test" in h]
    assert http_links == []
    assert any(h.startswith("https://h") for h in links)


def _realistic_scheme(tmp_path: Path, scheme: str):
    import realistic_web

    return realistic_web.generate(tmp_path / "www", hosts=5, pages=4, port=8443, seed=2,
                                  scheme=scheme)


@_NGINX
def test_nginx_serves_https_with_the_run_time_ca(tmp_path: Path) -> None:
    """The certificate verifies against this run's CA for every host name, not another's.

    Seen red: without "ssl" added to the listen lines (plain HTTP on the port),
    the handshake failed: "ssl.SSLError: [SSL: WRONG_VERSION_NUMBER] wrong version
    number"."""
    import socket
    import ssl

    import web_tls
    from nginx_local import LocalNginx, free_port

    port = free_port()
    m = _realistic_scheme(tmp_path, "https")
    ca, tls = web_tls.issue_web_certificate(tmp_path / "tls")
    other_ca, _ = web_tls.issue_web_certificate(tmp_path / "other")

    def get(ca_file: Path, host: str) -> bytes:
        ctx = ssl.create_default_context(cafile=str(ca_file))
        with (socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
              ctx.wrap_socket(raw, server_hostname=host) as conn):
            conn.sendall(f"GET /robots.txt HTTP/1.1\r\nHost: {host}\r\n"
                         "Connection: close\r\n\r\n".encode())
            chunks = []
            while chunk := conn.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    with LocalNginx(tmp_path / "www", tmp_path / "ngx", port, tmp_path / "a.log", tls=tls):
        normal = next(h for h in m.hosts if m.kinds[h] == "normal")
        assert get(ca, normal).startswith(b"HTTP/1.1 200")
        assert get(ca, m.hosts[1]).split(b" ")[1] in (b"200", b"404", b"500")
        with pytest.raises(ssl.SSLCertVerificationError):
            get(other_ca, normal)


@_NGINX
def test_traffic_counts_handshakes_per_host_and_non_html_bytes(tmp_path: Path) -> None:
    """From nginx's own log of an HTTPS web: one host asked twice over one kept-alive
    connection (1 handshake), another once on each of two connections (2), and a PDF's
    body bytes counted as non-HTML. Seen red counting requests instead of connections
    ({first: 2, second: 2})."""
    import socket
    import ssl

    import web_tls
    from nginx_local import LocalNginx, free_port

    port = free_port()
    m = _realistic_scheme(tmp_path, "https")
    first, second = [h for h in m.hosts if m.kinds[h] == "normal"][:2]
    pdf = b"%PDF-1.4 " + b"x" * 5000
    (tmp_path / "www" / second / "doc.pdf").write_bytes(pdf)
    ca, tls = web_tls.issue_web_certificate(tmp_path / "tls")
    ctx = ssl.create_default_context(cafile=str(ca))

    def get_all(host: str, paths: list[str]) -> None:
        """``paths`` in order over one TLS connection."""
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                                    server_hostname=host)
        try:
            for path in paths:
                conn.request("GET", path, headers={"Host": host})
                conn.getresponse().read()
        finally:
            conn.close()

    log = tmp_path / "a.log"
    with LocalNginx(tmp_path / "www", tmp_path / "ngx", port, log, tls=tls):
        get_all(first, ["/robots.txt", "/"])
        get_all(second, ["/robots.txt"])
        get_all(second, ["/doc.pdf"])
    traffic = access_log.check_traffic(access_log.read_log(log))
    assert traffic.connections == {first: 1, second: 2}
    assert traffic.handshakes_total == 3
    assert (traffic.non_html_requests, traffic.non_html_bytes) == (1, len(pdf))
    assert traffic.handshakes_line() == "3 over 2 hosts (median 1.5, max 2 per host)"


def test_profile_stages_charge_the_current_module_layout() -> None:
    """Seen red: with the rules of the flat layout (``courtier/urls.py``,
    ``courtier/worker.py``, no asyncpg, no cluster), 6 of these 7 stacks fell to
    'other' (only the parser's was charged)."""
    import profile_stages

    def stage(*frames: str) -> str:
        return profile_stages.stage_of(["<module> (courtier/cli/main.py:1)", *frames])

    assert stage("canonicalize (courtier/core/urls.py:300)") == "canonicalization + scope + traps"
    assert stage("take_in (courtier/crawl/intake.py:80)", "canonicalize (courtier/core/urls.py:3)"
                 ) == "canonicalization + scope + traps"
    assert stage("run (courtier/crawl/worker.py:50)") == "worker + page pipeline glue"
    assert stage("run (courtier/crawl/worker.py:50)", "execute (asyncpg/connection.py:9)"
                 ) == "store (SQLite / PostgreSQL client)"
    assert stage("links (courtier/parse/html.py:9)", "css (selectolax/lexbor.py:1)"
                 ) == "parse + link extraction"
    assert stage("tick (courtier/crawl/progress.py:5)") == "logging / progress / metrics / API"
    assert stage("run (courtier/cluster/shard_state.py:5)") == "cluster (shards, gates)"


def test_a_kept_web_is_reused_only_for_the_same_parameters(tmp_path: Path) -> None:
    """Seen red: with the parameter check dropped, the 4-page web came back when 5 pages
    were asked for ("(8301, 4) == (8302, 5)" failed)."""
    import realistic_web

    first = realistic_web.reuse_or_generate(tmp_path / "w", 4, 4, 8301, 1)
    marker = tmp_path / "w" / "h0000.bench.test" / "marker"
    marker.write_text("kept")
    again = realistic_web.reuse_or_generate(tmp_path / "w", 4, 4, 8302, 1)
    assert again == first and again.port == 8301 and marker.exists()
    other = realistic_web.reuse_or_generate(tmp_path / "w", 4, 5, 8302, 1)
    assert (other.port, other.pages_per_host) == (8302, 5) and not marker.exists()


def test_profile_stages_knows_the_package_layout() -> None:
    """Frames of the modules as they are laid out now land in their stage (the rules once
    named ``courtier/urls.py`` and ``courtier/worker.py``, so after the moves into
    packages canonicalization and the worker's glue were charged to asyncio)."""
    import profile_stages

    def stage(frame: str) -> str:
        return profile_stages.stage_of(["Runner.run (asyncio/runners.py:118)", frame])

    assert stage("canonicalize_link (courtier/crawl/link_memo.py:84)").startswith("canonical")
    assert stage("canonicalize (courtier/core/urls.py:300)").startswith("canonical")
    assert stage("Intake.links (courtier/crawl/intake.py:217)").startswith("canonical")
    assert stage("PageProcessor._ok (courtier/crawl/process.py:369)").startswith("worker")
    assert stage("Fetcher.fetch (courtier/crawl/fetcher.py:200)").startswith("worker")
    assert stage("link_entries (courtier/events/feed.py:49)").startswith("events")
    assert stage("_run (courtier/dedup/simhash.py:250)").startswith("dedup")
    assert stage("Runner.run (asyncio/runners.py:118)").startswith("asyncio")


def test_profile_stages_leave_waits_out() -> None:
    """Seen red: without the selector in the idle pattern, the event loop's wait in
    epoll was charged to 'asyncio + event loop'."""
    import profile_stages

    loop = ["run (asyncio/base_events.py:600)", "_run_once (asyncio/base_events.py:1900)"]
    assert profile_stages.stage_of([*loop, "_PollLikeSelector.select (selectors.py:415)"]
                                   ) == profile_stages.IDLE
    assert profile_stages.stage_of([*loop, "_run (asyncio/events.py:80)"]
                                   ) == "asyncio + event loop"


# ---- the realistic web's non-HTML files -------------------------------------------------


def test_realistic_non_html_files_shares_sizes_and_links(tmp_path: Path) -> None:
    """Each kind of file on its exact share of the hosts, in its size range, starting with
    its format's magic number, hard-linked from the pool, linked from its host's home page
    (and from some other pages), and never counted as a page.

    Seen red: with the home page no longer linking its host's files, the home-page
    assertion failed for the first host with a file ("({'/docs/report-1.pdf'}, set())")."""
    from collections import Counter

    import realistic_web

    m = _realistic(tmp_path, hosts=40, pages=10)
    root = tmp_path / "www"
    counts = Counter(u for files in m.non_html.values() for u in files)
    assert counts == Counter({k.uri: round(k.share * 40) for k in realistic_web.FILE_KINDS})
    kinds = {k.uri: k for k in realistic_web.FILE_KINDS}
    linked_elsewhere = 0
    for host, files in m.non_html.items():
        assert not set(files) & set(m.pages[host]) and not set(files) & set(m.category[host])
        for uri, f in files.items():
            kind, path = kinds[uri], root / host / uri[1:]
            assert (f.category, f.content_type) == (kind.category, kind.content_type)
            assert kind.min_bytes <= f.bytes <= kind.max_bytes == kind.max_bytes
            assert path.stat().st_size == f.bytes and path.stat().st_nlink >= 2
            assert path.read_bytes()[:len(kind.magic)] == kind.magic
            assert m.non_html_of(host, f"{uri}?utm_source=x") == (f.category, f.bytes)
        if files:
            home_links = {urlsplit(h).path for h in _links(root / host / "index.html")}
            assert set(files) <= home_links, (set(files), home_links & set(files))
            linked_elsewhere += sum(
                1 for k in range(1, 10)
                if {urlsplit(h).path for h in _links(root / host / "p" / f"{k}.html")}
                & set(files))
    assert linked_elsewhere > 0
    assert m.non_html_of(m.hosts[0], "/p/1.html") is None
    unreachable = {h for h in m.hosts if m.robots[h].status == 500}
    assert set(m.reachable_files()) == set(m.non_html) - unreachable
    assert type(m).load(root) == m


def test_a_kept_web_of_an_older_version_is_made_again(tmp_path: Path) -> None:
    """A web kept by ``--web-dir`` before the files existed (manifest without
    ``version``) is not reused: it has no files to link."""
    import json

    import realistic_web

    realistic_web.reuse_or_generate(tmp_path / "w", 4, 4, 8301, 1)
    manifest = tmp_path / "w" / "manifest.json"
    data = json.loads(manifest.read_text())
    del data["version"], data["non_html"]
    manifest.write_text(json.dumps(data))
    again = realistic_web.reuse_or_generate(tmp_path / "w", 4, 4, 8302, 1)
    assert (again.port, again.version) == (8302, realistic_web.WEB_VERSION)


def test_traffic_by_the_manifest_tallies_categories_and_full_sizes() -> None:
    """The judge asks the manifest which requests got a file: a query or a 499 does not
    hide one, pages are left out. Seen red with ``check_traffic`` still judging by the
    URI's ending: the untyped download (no extension) was not counted ("(2, 72000, 0) ==
    (3, 372000, 1300000)")."""
    files = {"a": {"/docs/report-1.pdf": ("pdf", 500_000), "/download/file-1": ("no-type",
                                                                            300_000)}}

    def of(host: str, uri: str) -> tuple[str, int] | None:
        return files.get(host, {}).get(urlsplit(uri).path)

    def entry(uri: str, size: int, status: int = 200) -> LogEntry:
        return LogEntry("a", uri, 0.0, 0.1, status, size, 1, "ua")

    log = [entry("/", 40_000), entry("/docs/report-1.pdf", 32_000, 499),
           entry("/docs/report-1.pdf?utm_source=x", 40_000), entry("/download/file-1", 300_000)]
    traffic = access_log.check_traffic(log, of)
    assert (traffic.non_html_requests, traffic.non_html_bytes, traffic.non_html_full_bytes) == (
        3, 372_000, 1_300_000)
    assert traffic.non_html_by_category == {"pdf": [2, 72_000], "no-type": [1, 300_000]}
    assert traffic.non_html_line() == ("3 requests (no-type 1, pdf 2), 372,000 body bytes sent "
                                       "of 1,300,000 in full (28.6%)")
    assert access_log.check_traffic(log).non_html_requests == 2  # by ending: .pdf only


@_NGINX
def test_nginx_declares_each_files_type_and_paces_it(tmp_path: Path) -> None:
    """Every kind of file goes out with the type the manifest says (none for the untyped
    download, text/plain for the spreadsheet); paced, a client that hangs up after the
    headers is logged with a fraction of the body, one that reads on with all of it.

    Seen red without the pace (``limit_rate`` left out): the hung-up request was logged
    with the whole file sent, "assert 1251945 <= (128 << 10)" (the kernel's buffers on
    loopback took it at once)."""
    import socket

    from nginx_local import LocalNginx, free_port

    port = free_port()
    m = _realistic(tmp_path, hosts=40, pages=4, port=port)
    files = [(h, u, f) for h, fs in m.non_html.items() for u, f in fs.items()]
    one_of_each = {u: (h, f) for h, u, f in files}
    smallest = min(files, key=lambda x: x[2].bytes)
    biggest = max((x for x in files if x[2].category == "pdf"), key=lambda x: x[2].bytes)
    log = tmp_path / "access.log"
    types = {}
    with LocalNginx(tmp_path / "www", tmp_path / "ngx", port, log):
        for uri, (host, _) in one_of_each.items():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", uri, headers={"Host": host})
            types[uri] = conn.getresponse().getheader("Content-Type")
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00"
                                 b"\x00\x00\x00\x00")  # close with a reset, as the crawlers
            conn.close()
        for host, uri, f in (smallest, biggest):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", uri, headers={"Host": host})
            resp = conn.getresponse()
            if (host, uri) == smallest[:2]:
                assert len(resp.read()) == f.bytes
            else:
                conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                     b"\x01\x00\x00\x00\x00\x00\x00\x00")
            conn.close()
    assert types == {u: f.content_type for u, (_, f) in one_of_each.items()}
    assert types["/download/file-1"] is None and types["/export/table-1.xls"] == "text/plain"
    sent = {(e.host, e.uri): e.size for e in access_log.read_log(log)}
    assert sent[smallest[:2]] == smallest[2].bytes
    assert sent[biggest[:2]] <= 128 << 10 < biggest[2].bytes, (sent[biggest[:2]], biggest)


_PEER_PY = Path(__file__).resolve().parent / ".peer-venv" / "bin" / "python"


@_NGINX
@pytest.mark.skipif(not _PEER_PY.exists(), reason="no Scrapy peer venv (bench/.peer-venv)")
def test_scrapy_peer_html_only_skips_files_by_extension_and_cuts_the_rest(
        tmp_path: Path) -> None:
    """The peer with ``--html-only`` (what the benchmark gives it): nginx's log shows no
    request for a file whose link ends in an extension Scrapy's ``LinkExtractor`` drops
    (.pdf, .jpg, .mp4, .xls), the untyped download requested and cut after its first
    bytes, and every page fetched.

    Seen red with the ``HtmlOnlyDownloads`` extension left out of the settings: nginx
    sent both untyped downloads whole ("('h0010.bench.test', '/download/file-1',
    486597), ('h0035.bench.test', '/download/file-1', 833044)")."""
    import json

    from nginx_local import LocalNginx, free_port

    port = free_port()
    m = _realistic(tmp_path, hosts=40, pages=3, port=port)
    seeds = static_web.write_seeds(m, tmp_path / "seeds.txt")
    log = tmp_path / "access.log"
    stats = tmp_path / "stats.json"
    cmd = [str(_PEER_PY), "-m", "scrapy_peer.run_peer", "--seeds-file", str(seeds),
           "--delay", "0", "--concurrency", "32", "--max-pages", "2000",
           "--max-seconds", "120", "--stats-out", str(stats), "--html-only"]
    with LocalNginx(tmp_path / "www", tmp_path / "ngx", port, log):
        code, timed_out, _, _ = run_measured(cmd, Path(__file__).resolve().parent,
                                             tmp_path / "peer.log", 180)
    assert code == 0 and not timed_out, (tmp_path / "peer.log").read_text()[-2000:]
    entries = access_log.read_log(log)
    got = [(e.host, urlsplit(e.uri).path, e.size) for e in entries
           if m.non_html_of(e.host, e.uri) is not None]
    reachable = m.reachable_files()
    downloads = {(h, u) for h, fs in reachable.items() for u in fs if "." not in u[1:]}
    # every file requested is an untyped download (no extension to skip it by); one run
    # of five logged one of the two downloads only (cause not found), so: at least one
    assert got and {(h, u) for h, u, _ in got} <= downloads, (got, downloads)
    assert all(size < reachable[h][u].bytes for h, u, size in got), got
    cov = access_log.check_coverage(entries, m.pages, __import__("realistic_web").resource_of)
    assert cov.coverage == 1.0
    assert json.loads(stats.read_text())["finish_reason"] == "finished"


def test_time_to_share_ends_at_the_request_that_reaches_the_share() -> None:
    """Nine requests in the first second, a Crawl-delay host's tail to 60 s: 90 % of the
    server's requests were answered at 0.9 s + their duration, whatever the tail.

    Seen red: with the share's index taken as ``int(share * n)`` (one too far), the time
    was the tail's 60.01 s (the 10th of 10 requests) instead of 0.81."""
    from access_log import time_to_share

    log = [_e("a", f"/p/{i}.html", 0.1 * i) for i in range(9)] + [_e("cd", "/", 60.0)]
    assert time_to_share(log, 0.9) == pytest.approx(0.81)
    assert time_to_share(log, 1.0) == pytest.approx(60.01)
    assert time_to_share(log, 0.05) == pytest.approx(0.01)  # the first request's end
    assert time_to_share([], 0.9) is None
    with pytest.raises(ValueError, match="share"):
        time_to_share(log, 0.0)


def test_judge_reads_each_web_by_its_own_rules(tmp_path: Path) -> None:
    """``realistic_web.judge``: on the realistic web a Crawl-delay host's own gap and one
    page under two spellings; on the static web one rule for all hosts.

    Seen red: with the realistic web judged like the static one (one rule for all
    hosts), (gap, disallowed) were (0, 2) instead of (1, 0): the Crawl-delay was not
    held and the robots-500 hosts' "/" was taken as every host's prefix."""
    import realistic_web

    m = _realistic(tmp_path, hosts=40, pages=3)
    host = next(h for h, k in m.kinds.items() if k == "crawl-delay")
    listed = next(u for u in m.pages[host] if u.startswith("/list.html"))
    cat, page = (kv.split("=")[1] for kv in urlsplit(listed).query.split("&"))
    log = [_e(host, "/robots.txt", 0.0), _e(host, "/", 5.0),
           _e(host, f"/list.html?page={page}&cat={cat}&utm_source=x", 5.5)]  # < Crawl-delay
    pol, cov = realistic_web.judge(log, m, delay=0.0)
    assert (pol.gap, pol.disallowed) == (1, 0)
    assert (cov.distinct, cov.existing) == (2, m.total_pages)
    static = static_web.generate(tmp_path / "static", hosts=2, pages=3, port=8124)
    s_host = static.hosts[0]
    s_log = [_e(s_host, "/robots.txt", 0.0), _e(s_host, "/", 0.5),
             _e(s_host, static.disallowed[0], 0.7)]
    s_pol, s_cov = realistic_web.judge(s_log, static, delay=0.3)
    assert (s_pol.gap, s_pol.disallowed) == (1, 1)
    assert (s_cov.distinct, s_cov.existing) == (1, static.total_pages)


def _run_figures(workers: int, pages_per_s: float, to_90: float, cpu: float,
                 db: float | None = None, tree: str = " plain") -> dict[str, object]:
    return {"workers": workers, "tree": tree, "pages_per_s": pages_per_s,
            "window_pages_per_s": 2 * pages_per_s, "to_90_s": to_90,
            "cpu_ms_per_page": cpu, "db_all_ms_per_page": db,
            "pg_xacts_per_page": None if db is None else 0.25}


def test_cluster_bench_summary_pairs_each_round_by_worker_count() -> None:
    """The medians set each round's runs against that round's own, found by worker count
    (SQLite first in the second round, as ``--sqlite-baseline`` alternates), another
    tree's runs left out.

    Seen red: with runs taken by position (a round's first run as one worker, its last
    as SQLite), the second round took its SQLite run as "1 worker" and the summary
    failed on its missing database figures (TypeError comparing None)."""
    import cluster_bench

    rounds = [
        [_run_figures(1, 100, 50, 2.2, 0.3), _run_figures(1, 90, 60, 9.9, 0.9, "-before"),
         _run_figures(2, 150, 30, 2.4, 0.35), _run_figures(0, 110, 45, 2.0, tree="")],
        [_run_figures(0, 105, 48, 2.0, tree=""), _run_figures(1, 100, 40, 2.4, 0.4),
         _run_figures(2, 170, 25, 2.5, 0.36)],
    ]
    lines = cluster_bench.summary(rounds, [1, 2])
    assert lines[0] == ("2 workers / 1 over 2 rounds: whole run 1.50 1.70 (median 1.60), "
                        "crawl window 1.50 1.70 (median 1.60), to 90 % of the server's "
                        "requests 1.60 1.67 (median 1.63)")
    assert lines[1] == ("1 worker's database CPU ms a page over 2 rounds: 0.30 0.40 (median "
                        "0.35); round trips a page 0.25 0.25 (median 0.25)")
    assert lines[2].endswith("over 2 rounds: 1.10 1.20 (median 1.15)")


@pytest.mark.parametrize("argv", [[], ["--realistic"], ["--web-dir", "/tmp/web9", "--seed", "7"]])
def test_web_options_survive_being_passed_on_to_cluster_bench(argv: list[str]) -> None:
    """pg_statement_profile.py passes its web options on to cluster_bench.py with
    ``web_argv``: parsed again there they choose the same web (the realistic one, its
    folder and seed) as the profile was asked for.

    Seen red: with ``web_argv`` leaving out ``--seed``, the third case's seed came back
    as the default 1, and with it leaving out ``--realistic`` the second case crawled
    the static farm."""
    import argparse

    import cluster_bench

    ap = argparse.ArgumentParser()
    cluster_bench.add_web_arguments(ap)
    asked = ap.parse_args(argv)
    assert ap.parse_args(cluster_bench.web_argv(asked)) == asked


def test_statement_profile_counts_the_pages_cluster_bench_saw() -> None:
    """The profile's per-page figures divide by the pages nginx served (cluster_bench's
    run line: 27,160 on the realistic 1,000 x 20 web), not by hosts x pages.

    Seen red: with the pattern ``(\\d+) pages/s`` instead, it read 4 (of "68.4 pages/s");
    with ``PostgreSQL: (\\d+) pages`` (its first version) it found no count on the default
    server's line and the realistic profile divided by 20,000 pages."""
    import pg_statement_profile

    out = ("realistic web: 1000 hosts x 20 pages, 27,160 resources to fetch, port 41753\n"
           "1 worker(s) PostgreSQL: 27160 pages (coverage 1.000 of 27160) in 396.9 s = "
           "68.4 pages/s, CPU 3.31 ms/page\n")
    assert pg_statement_profile.crawled_pages(out) == 27160
    # the run line of the bench's default server has no store label
    assert pg_statement_profile.crawled_pages(out.replace(" PostgreSQL:", ":")) == 27160
    assert pg_statement_profile.crawled_pages("cluster_bench.py: no run\n") is None
