"""Crawl the modelled trap host breadth-first through the real parser, the
static rules and the template tracker: every trap stays within its budget
while every ordinary page is admitted."""

from __future__ import annotations

import pytest

from courtier.core.clock import VirtualClock
from courtier.frontier.traps import TemplateTracker, TrapRules
from tests.integration.traps.web import HOST, ORDINARY, Page, TrapSite, bfs_crawl

#: URLs a trap may put into the store with the default rules: at most
#: ``template_min_urls`` (100, an estimate: ±10 %) before the template is
#: throttled, then at most ``sample_budget`` (50) sampled ones.
TRAP_BUDGET = 200


@pytest.fixture(params=[True, False], ids=["simhash", "payload-digest"], scope="module")
def crawl(request: pytest.FixtureRequest) -> tuple[object, TemplateTracker]:
    rules = TrapRules()
    tracker = TemplateTracker(rules, VirtualClock())
    result = bfs_crawl(TrapSite().page, tracker, rules, max_fetches=5000, use_simhash=request.param)
    return result, tracker


def _count(crawl: tuple[object, TemplateTracker], prefix: str) -> int:
    result = crawl[0]
    return sum(1 for url in result.admitted if url.startswith(prefix))  # type: ignore[attr-defined]


def test_the_crawl_ends_by_itself(crawl: tuple[object, TemplateTracker]) -> None:
    result = crawl[0]
    fetched = result.fetched  # type: ignore[attr-defined]
    assert len(fetched) < 5000, "the traps did not run the crawl into its fetch cap"
    assert len(fetched) == len(result.admitted)  # type: ignore[attr-defined]


def test_every_ordinary_page_is_admitted(crawl: tuple[object, TemplateTracker]) -> None:
    result = crawl[0]
    admitted = set(result.admitted)  # type: ignore[attr-defined]
    assert {f"/p/{n}" for n in range(1, ORDINARY + 1)} <= admitted
    assert "/" in admitted
    assert not any(r.template.startswith("/p/") for r in crawl[1].throttled(HOST))


@pytest.mark.parametrize(
    ("prefix", "reasons"),
    [
        ("/cal/", {"chain of links", "duplicate content"}),
        ("/s/", {"session ids"}),
        ("/shop", {"facet combinations"}),
    ],
)
def test_template_traps_are_throttled_within_budget(
    crawl: tuple[object, TemplateTracker], prefix: str, reasons: set[str]
) -> None:
    admitted = _count(crawl, prefix)
    assert 20 <= admitted <= TRAP_BUDGET, admitted
    reports = [r for r in crawl[1].throttled(HOST) if r.template.startswith(prefix)]
    assert len(reports) == 1
    assert reports[0].reason in reasons
    assert reports[0].since is not None
    assert reports[0].discovered >= reports[0].admitted


def test_relative_link_loop_is_cut_by_static_rules(crawl: tuple[object, TemplateTracker]) -> None:
    result = crawl[0]
    assert 5 <= _count(crawl, "/loop/") <= TRAP_BUDGET
    assert result.static_rejects.get("repeated path segments", 0) > 0  # type: ignore[attr-defined]
    deepest = max(url.count("/a/") for url in result.admitted)  # type: ignore[attr-defined]
    assert deepest <= 3


def test_without_defences_the_traps_explode() -> None:
    """The same crawl with the template rules disabled hits the fetch cap: the
    budgets above are the defences' doing, not the model's."""
    rules = TrapRules(template_min_urls=10**9, max_repeated_segment=1000, max_path_depth=1000)
    tracker = TemplateTracker(rules, VirtualClock())
    result = bfs_crawl(TrapSite().page, tracker, rules, max_fetches=1500)
    assert len(result.fetched) == 1500
    assert tracker.throttled(HOST) == []


# -- a shop that is *not* a trap ---------------------------------------------


WORDS = [
    "oak",
    "steel",
    "blue",
    "red",
    "large",
    "small",
    "round",
    "square",
    "light",
    "heavy",
    "soft",
    "hard",
    "warm",
    "cool",
]


def _label(href: str) -> str:
    """Anchor text as a shop writes it: the product's or the page's name."""
    if href.startswith("/product/"):
        n = int(href.split("/")[2][:-8], 16)
        return f"widget {n} {WORDS[n % len(WORDS)]} {WORDS[(n // 3) % len(WORDS)]}"
    return "page " + href.rpartition("=")[2] if "page=" in href else "home"


def _catalog(path_and_query: str) -> Page:
    """Listing pages of 60 products each, a 'view all' page, products linking
    to four related products and back to their category page."""

    def html(links: list[str], text: str) -> Page:
        anchors = "".join(f'<a href="{h}">{_label(h)}</a>' for h in links)
        return Page(200, f"<html><body><p>{text}</p>{anchors}</body></html>".encode())

    path, _, query = path_and_query.partition("?")
    if path == "/":
        return html(["/all"] + [f"/list?cat=c{c}x&page=1" for c in range(5)], "home")
    if path == "/all":
        return html([f"/product/{n:x}0a1b2c3d" for n in range(300)], "all products")
    if path == "/list":
        params = dict(p.partition("=")[::2] for p in query.split("&"))
        cat, page = params.get("cat", "c0x"), int(params.get("page", "1") or 1)
        c = int(cat[1:-1] or 0)
        items = [f"/product/{(c * 60 + page * 12 + i) % 300:x}0a1b2c3d" for i in range(12)]
        nxt = [f"/list?cat={cat}&page={page + 1}"] if page < 30 else []
        return html(items + nxt, f"category {cat} page {page}")
    if path.startswith("/product/"):
        n = int(path.split("/")[2][:-8], 16)
        related = [f"/product/{(n * 7 + k) % 300:x}0a1b2c3d" for k in range(1, 5)]
        words = " ".join(WORDS[(n * k) % len(WORDS)] for k in range(1, 12))
        return html([*related, "/list?cat=c0x&page=1"], f"widget {n}: {words}")
    return Page(404, b"")


def test_an_honest_catalog_is_admitted_in_full() -> None:
    rules = TrapRules()
    tracker = TemplateTracker(rules, VirtualClock())
    result = bfs_crawl(_catalog, tracker, rules, max_fetches=3000)
    products = {u for u in result.admitted if u.startswith("/product/")}
    listings = {u for u in result.admitted if u.startswith("/list")}
    assert len(products) == 300
    assert len(listings) == 5 * 30
    assert result.template_rejects == 0
    assert tracker.throttled(HOST) == []
