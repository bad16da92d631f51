"""Properties of the trap defences and of the link pipeline feeding them.

The existing property tests cover canonicalization, robots parsing and HTML
parsing one module at a time; these check the path a discovered link takes:
parse_html → canonicalize → static_trap_reason → TemplateTracker.admit.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.core.clock import VirtualClock
from courtier.core.errors import InvalidURL
from courtier.core.urls import canonicalize
from courtier.frontier import templates
from courtier.frontier.templates import MAX_TEMPLATE_CHARS, facet_atoms, url_template
from courtier.frontier.traps import Decision, TemplateTracker, TrapRules, static_trap_reason
from courtier.parse.html import parse_html

SEGMENTS = st.sampled_from(
    ["a", "b", "2026", "11", "2026-11-03", "9f86d081aa", "x;jsessionid=Q1", "%7E", "..", ".", ""]
)
VALUES = st.text(alphabet="abcXYZ0189-_.,%+ ", max_size=12)
NAMES = st.sampled_from(["sid", "color", "size", "sort", "page", "q", "PHPSESSID", "x1", ""])
QUERIES = st.lists(st.tuples(NAMES, VALUES), max_size=6)


def _path(segments: list[str], query: list[tuple[str, str]]) -> str:
    q = "&".join(f"{n}={v}" for n, v in query)
    return "/" + "/".join(segments) + ("?" + q if q else "")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_url_template_is_total_and_bounded(text: str) -> None:
    templates._ABSTRACT_MEMO.clear()
    template = url_template(text)  # every segment abstracted afresh
    assert len(template) <= MAX_TEMPLATE_CHARS + 17
    assert url_template(text) == template  # the short ones now from the memo


def test_the_segment_memo_stays_bounded_and_skips_long_segments(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templates, "_ABSTRACT_MEMO_LIMIT", 8)
    templates._ABSTRACT_MEMO.clear()
    long_segment = "x" * (templates._ABSTRACT_MEMO_MAX_CHARS + 1)
    for i in range(50):
        assert url_template(f"/s{i}/{long_segment}/2026-11-0{i % 9 + 1}") == (
            "/s{n}/" + long_segment + "/{date}")
    assert 0 < len(templates._ABSTRACT_MEMO) <= 8
    assert long_segment not in templates._ABSTRACT_MEMO


@settings(max_examples=300, deadline=None)
@given(st.lists(SEGMENTS, max_size=8), QUERIES, st.randoms(use_true_random=False))
def test_template_ignores_query_values_and_order(
    segments: list[str], query: list[tuple[str, str]], rnd: object
) -> None:
    base = _path(segments, query)
    shuffled = list(query)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    revalued = [(n, v[::-1] + "z") for n, v in shuffled]
    assert url_template(_path(segments, revalued)) == url_template(base)


@settings(max_examples=300, deadline=None)
@given(QUERIES)
def test_facet_atoms_are_order_insensitive(query: list[tuple[str, str]]) -> None:
    text = "&".join(f"{n}={v}" for n, v in query)
    again = "&".join(f"{n}={v}" for n, v in reversed(query))
    assert facet_atoms(text) == facet_atoms(again)


@settings(max_examples=300, deadline=None)
@given(st.lists(SEGMENTS, max_size=30), QUERIES, st.integers(min_value=0, max_value=10**6))
def test_static_rules_never_raise(
    segments: list[str], query: list[tuple[str, str]], depth: int
) -> None:
    try:
        url = canonicalize("http://fuzz.test" + _path(segments, query))
    except InvalidURL:
        return
    reason = static_trap_reason(url, depth, TrapRules(max_link_depth=50))
    assert reason is None or reason in {
        "url too long",
        "path too deep",
        "repeated path segments",
        "too many query parameters",
        "link depth exceeded",
    }
    if depth > 50:
        assert reason is not None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.lists(SEGMENTS, max_size=6), QUERIES), max_size=60))
def test_tracker_never_raises_and_stays_bounded(
    urls: list[tuple[list[str], list[tuple[str, str]]]],
) -> None:
    rules = TrapRules(template_min_urls=5, template_min_fetched=2, max_templates_per_host=8)
    tracker = TemplateTracker(rules, VirtualClock())
    for i, (segments, query) in enumerate(urls):
        try:
            url = canonicalize("http://fuzz.test" + _path(segments, query))
        except InvalidURL:
            continue
        verdict = tracker.admit(url.host_key, url, depth=i)
        assert verdict.admitted == (verdict.decision is not Decision.REJECT)
        assert verdict.template == url_template(url.path_and_query)
        tracker.observe_fetched(url.host_key, verdict.template, i % 3)
    reports = tracker.templates("http://fuzz.test")
    assert len(reports) <= 8
    for report in reports:
        assert 0.0 <= report.duplicate_share <= 1.0
        assert (report.since is None) == (report.reason is None)


HREFS = st.one_of(
    st.text(max_size=30),
    st.builds(_path, st.lists(SEGMENTS, max_size=6), QUERIES),
    st.sampled_from(["//other.test/x", "javascript:void(0)", "mailto:a@b", "?q=1", "#top", " /a "]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(HREFS, max_size=12))
def test_extracted_links_flow_through_the_pipeline(hrefs: list[str]) -> None:
    html = "".join(f'<a href="{h.replace(chr(34), "")}">x</a>' for h in hrefs).encode(
        "utf-8", "surrogatepass"
    )
    page = parse_html(html, "http://fuzz.test/dir/page.html", "text/html; charset=utf-8")
    tracker = TemplateTracker(TrapRules(), VirtualClock())
    for link in page.links:
        assert link.url.startswith(("http://", "https://"))
        try:
            url = canonicalize(link.url)
        except InvalidURL:
            continue
        assert canonicalize(url.url) == url
        static_trap_reason(url, 1, TrapRules())
        assert tracker.admit(url.host_key, url, 1).decision is Decision.ADMIT
