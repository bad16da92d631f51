"""The template tracker's throttling (the templates themselves: test_templates.py)."""

from __future__ import annotations

from courtier.core.clock import VirtualClock
from courtier.core.urls import canonicalize
from courtier.frontier.traps import Decision, TemplateTracker, TrapRules

H = "http://h.test"


# -- tracker -----------------------------------------------------------------


def tracker(**kwargs: object) -> TemplateTracker:
    return TemplateTracker(TrapRules(**kwargs), VirtualClock())  # type: ignore[arg-type]


def offer(t: TemplateTracker, path: str, depth: int | None = None) -> Decision:
    url = canonicalize(H + path)
    return t.admit(url.host_key, url, depth).decision


def test_small_templates_are_always_admitted() -> None:
    t = tracker()
    for n in range(99):
        assert offer(t, f"/p/{n}") is Decision.ADMIT
        t.observe_fetched(H, "/p/{n}", "same digest for all")  # duplicates, but few URLs
    assert t.throttled(H) == []
    [report] = t.templates(H)
    assert report.template == "/p/{n}" and report.fetched == 99
    assert report.duplicate_share > 0.9 and report.since is None


def test_duplicate_content_throttles_and_other_templates_proceed() -> None:
    clock = VirtualClock(1000.0)
    t = TemplateTracker(TrapRules(), clock)
    for n in range(150):
        offer(t, f"/dup/{n}")
    for _ in range(9):  # below template_min_fetched: no verdict yet
        t.observe_fetched(H, "/dup/{n}", "sha256:SAME")
    assert t.throttled(H) == []
    clock.advance(5)
    t.observe_fetched(H, "/dup/{n}", "sha256:SAME")
    [report] = t.throttled(H)
    assert report.template == "/dup/{n}" and report.reason == "duplicate content"
    assert report.since == 1005.0
    assert 120 <= report.admitted <= 180 and report.discovered >= report.admitted
    decisions = [offer(t, f"/dup/{n}") for n in range(1000, 3000)]
    sampled = decisions.count(Decision.SAMPLE)
    assert sampled == 50, "the sample budget caps admissions once throttled"
    assert decisions[:400].count(Decision.SAMPLE) >= 15, "about one in ten is sampled"
    assert offer(t, "/other/1") is Decision.ADMIT
    assert offer(t, "/dup/1") in (Decision.SAMPLE, Decision.REJECT)


def test_sampling_is_deterministic() -> None:
    first, second = tracker(), tracker()
    for t in (first, second):
        for n in range(120):
            offer(t, f"/s/{n % 10}?sid=s{n}x")
        assert t.throttled(H), "session ids"
    paths = [f"/s/{n % 10}?sid=t{n}y" for n in range(300)]
    assert [offer(first, p) for p in paths] == [offer(second, p) for p in paths]
    verdict = first.admit(H, canonicalize(H + "/s/1?sid=zz"))
    assert verdict.reason is not None and verdict.reason.startswith("throttled template")


def test_session_ids() -> None:
    t = tracker()
    decisions = [offer(t, f"/s/{n % 20}?sid=v{n}w") for n in range(400)]
    assert decisions[:90].count(Decision.ADMIT) == 90, "counts are estimates (±10 %)"
    [report] = t.throttled(H)
    assert report.reason == "session ids"
    assert sum(1 for d in decisions if d is not Decision.REJECT) <= 100 + 50


def test_no_session_rule_without_session_parameters() -> None:
    t = tracker()
    assert all(offer(t, f"/item?id={n}&ref=x{n}z") is Decision.ADMIT for n in range(500))


def test_facet_combinations() -> None:
    t = tracker()
    colors = ["red", "blue", "green", "black"]
    sizes = ["s", "m", "l"]
    results = []
    for mask in range(1 << 4):
        for smask in range(1 << 3):
            for sort in ["a", "b", "c"]:
                c = ",".join(x for i, x in enumerate(colors) if mask >> i & 1) or "any"
                s = ",".join(x for i, x in enumerate(sizes) if smask >> i & 1) or "any"
                results.append(offer(t, f"/shop?color={c}&size={s}&sort={sort}"))
    [report] = t.throttled(H)
    assert report.reason == "facet combinations"
    assert sum(1 for d in results if d is not Decision.REJECT) <= 200


def test_category_pagination_is_not_facets() -> None:
    t = tracker()
    for cat in range(20):
        for page in range(1, 30):
            assert offer(t, f"/list?cat=c{cat}x&page={page}") is Decision.ADMIT


def test_chain_rule_needs_depths() -> None:
    t = tracker()
    for n in range(200):
        assert offer(t, f"/cal/{n}") is Decision.ADMIT, "without depths there is no chain"
    t = tracker()
    decisions = [offer(t, f"/cal/{n}", depth=n) for n in range(200)]
    [report] = t.throttled(H)
    assert report.reason == "chain of links"
    assert decisions[:90].count(Decision.ADMIT) == 90
    assert decisions[120:].count(Decision.ADMIT) == 0


def test_growth_needs_some_duplicates() -> None:
    t = tracker()
    for n in range(600):  # a big "view all" listing of distinct products
        offer(t, f"/product/{n}")
    for n in range(30):
        t.observe_fetched(H, "/product/{n}", f"distinct-{n}")
    assert t.throttled(H) == []
    for n in range(30):
        t.observe_fetched(H, "/product/{n}", f"distinct-{n % 20}")  # now 1/3 duplicates
    [report] = t.throttled(H)
    assert report.reason == "growth outpaces content"


def test_growth_rule_can_be_disabled() -> None:
    t = tracker(template_max_growth=None)
    for n in range(600):
        offer(t, f"/product/{n}")
    for n in range(60):
        t.observe_fetched(H, "/product/{n}", f"d-{n % 40}")
    assert t.throttled(H) == []


def test_host_daily_budget() -> None:
    clock = VirtualClock(86_400.0 * 10)
    t = TemplateTracker(TrapRules(max_pages_per_host_per_day=5), clock)
    assert [offer(t, f"/a{n}") for n in range(7)] == [Decision.ADMIT] * 5 + [Decision.REJECT] * 2
    verdict = t.admit(H, canonicalize(H + "/b"))
    assert verdict.reason == "host daily page budget" and not verdict.admitted
    other = canonicalize("http://other.test/a")
    assert t.admit(other.host_key, other).admitted, "budgets are per host"
    clock.advance(86_400.0)
    assert offer(t, "/c") is Decision.ADMIT


def test_memory_is_bounded() -> None:
    t = tracker(max_hosts=3, max_templates_per_host=4)
    for h in range(10):
        url = canonicalize(f"http://h{h}.test/x")
        t.admit(url.host_key, url)
    assert t.hosts() == ["http://h7.test", "http://h8.test", "http://h9.test"]
    for n in range(120):
        offer(t, f"/dup/{n}")
    for _ in range(20):
        t.observe_fetched(H, "/dup/{n}", "same")
    assert [r.template for r in t.throttled(H)] == ["/dup/{n}"]
    for n in range(10):
        offer(t, f"/kind-{'abcdefghij'[n]}/x")
    templates = [r.template for r in t.templates(H)]
    assert len(templates) == 4
    assert "/dup/{n}" in templates, "a throttled template is evicted last"


def test_repeated_offers_count_once() -> None:
    t = tracker()
    for _ in range(50):
        for n in range(60):
            assert offer(t, f"/nav/{n}") is Decision.ADMIT
    [report] = t.templates(H)
    assert 50 <= report.admitted <= 70


def test_recent_counts_admissions_of_the_last_hours() -> None:
    clock = VirtualClock(3600.0 * 100)
    t = TemplateTracker(TrapRules(), clock)
    for n in range(10):
        offer(t, f"/r/{n}")
    clock.advance(3600)
    for n in range(10, 13):
        offer(t, f"/r/{n}")
    assert t.templates(H)[0].recent == 13
    clock.advance(3600)
    assert t.templates(H)[0].recent == 3
    clock.advance(7200)
    assert t.templates(H)[0].recent == 0
