"""RFC 9309 robots.txt parser and matcher: conformance vectors, real files, unit rules."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.politeness.robots import (
    MAX_ROBOTS_BYTES,
    RobotsTxt,
    product_token,
    request_path,
)
from courtier.politeness.robots_match import (
    PathCheck,
    Rule,
    RuleSet,
    normalize,
    normalize_bytes,
)
from tests.conftest import CONFORMANCE_DIR, REPO_ROOT, conformance_file

GOOGLE_CASES = "robots/google_robots_cases.json"
CC_ROBOTS = "crawler-commons/robots"

#: Google-specific / caveat cases where we answer differently, on purpose
#: (each is explained in docs/robots-conformance.md)
KNOWN_DIFFERENCES = {6, 63, 65, 66, 78, 141, 144}


# --------------------------------------------------------------------------- helpers


def _google_data() -> dict[str, Any] | None:
    path = CONFORMANCE_DIR / GOOGLE_CASES
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _is_rfc(case: dict[str, Any]) -> bool:
    return not case.get("google_specific") and not case.get("caveat")


def _case_params(rfc: bool) -> list[Any]:
    data = _google_data()
    if data is None:
        return [pytest.param(None, id="vectors-missing")]
    return [
        pytest.param(case, id=f"{case['id']}-{case['test']}")
        for case in data["cases"]
        if _is_rfc(case) == rfc
    ]


def _answer(case: dict[str, Any]) -> bool:
    robots = RobotsTxt.parse(base64.b64decode(case["robotstxt_base64"]))
    return robots.allowed(case["user_agent"], request_path(case["url"]))


def _cc_files() -> list[Any]:
    folder = CONFORMANCE_DIR / CC_ROBOTS
    if not folder.is_dir():
        return [pytest.param(None, id="vectors-missing")]
    return [pytest.param(p.name, id=p.name) for p in sorted(folder.iterdir()) if p.is_file()]


def _cc(name: str) -> RobotsTxt:
    return RobotsTxt.parse((conformance_file(CC_ROBOTS) / name).read_bytes())


def _robots(text: str) -> RobotsTxt:
    return RobotsTxt.parse(text.encode("utf-8"))


# --------------------------------------------------------------------------- Google cases


@pytest.mark.parametrize("case", _case_params(rfc=True))
def test_google_rfc_case(case: dict[str, Any] | None) -> None:
    conformance_file(GOOGLE_CASES)  # skips (or fails in CI) when the vectors are absent
    assert case is not None
    assert _answer(case) is case["expected_allowed"], case


def test_google_rfc_subset_is_not_empty() -> None:
    data = _google_data() or {"cases": []}
    conformance_file(GOOGLE_CASES)
    assert sum(_is_rfc(case) for case in data["cases"]) >= 100


def test_google_specific_and_caveat_cases_differ_only_where_documented() -> None:
    """Run every non-RFC case; the ones we answer differently must be the documented ones."""
    path = conformance_file(GOOGLE_CASES)
    data = json.loads(path.read_text(encoding="utf-8"))
    differing = {
        case["id"]
        for case in data["cases"]
        if not _is_rfc(case) and _answer(case) is not case["expected_allowed"]
    }
    print(f"google_specific/caveat cases answered differently: {sorted(differing)}")
    assert differing <= KNOWN_DIFFERENCES, sorted(differing - KNOWN_DIFFERENCES)
    doc = (REPO_ROOT / "docs" / "robots-conformance.md").read_text(encoding="utf-8")
    for case_id in KNOWN_DIFFERENCES:
        assert re.search(rf"\|\s*{case_id}\s*\|", doc), f"case {case_id} not documented"


def test_google_path_extraction_vectors() -> None:
    data = json.loads(conformance_file(GOOGLE_CASES).read_text(encoding="utf-8"))
    for vector in data["auxiliary"]["path_extraction"]:
        assert request_path(vector["url"]) == vector["expected_path"], vector


def test_google_pattern_escape_vectors() -> None:
    data = json.loads(conformance_file(GOOGLE_CASES).read_text(encoding="utf-8"))
    for vector in data["auxiliary"]["pattern_escape"]:
        assert normalize_bytes(vector["pattern"].encode("utf-8")) == vector["expected"], vector


def test_google_sitemap_vectors() -> None:
    data = json.loads(conformance_file(GOOGLE_CASES).read_text(encoding="utf-8"))
    for vector in data["auxiliary"]["sitemap_extraction"]:
        assert list(_robots(vector["robotstxt"]).sitemaps) == vector["expected_sitemaps"]


# --------------------------------------------------------------------------- crawler-commons files


@pytest.mark.parametrize("name", _cc_files())
def test_crawler_commons_file_parses(name: str | None) -> None:
    folder = conformance_file(CC_ROBOTS)
    assert name is not None
    robots = RobotsTxt.parse((folder / name).read_bytes())
    assert len(robots.digest) == 64
    for agent in ("courtier", "googlebot", "mybot", "*"):
        robots.allowed(agent, "/")
        robots.crawl_delay(agent)
    assert robots.allowed("courtier", "/robots.txt")


@pytest.mark.parametrize(
    "name",
    ["robots-with-utf8-bom.txt", "robots-with-utf16le-bom.txt", "robots-with-utf16be-bom.txt"],
)
def test_cc_byte_order_mark_keeps_first_group(name: str) -> None:
    robots = _cc(name)
    assert not robots.allowed("courtier", "/login.aspx")
    assert not robots.allowed("courtier", "/x/output/print")
    assert robots.allowed("courtier", "/news")
    assert not robots.allowed("Googlebot", "/profile")
    assert robots.sitemaps == ("http://www.newsweek.com/sitemap_index.xml",)


def test_cc_dos_line_endings_and_blank_prefix() -> None:
    assert _cc("dos-line-endings.txt").crawl_delay("anybot") == 1.0


def test_cc_crawl_delay_group_merging() -> None:
    robots = _cc("crawl-delay-group-merging.txt")
    for bot in ("mybot", "yourbot"):
        assert not robots.allowed(bot, "/private/x")
        assert robots.allowed(bot, "/public")
        assert robots.crawl_delay(bot) == 10.0  # the delay belongs to the {mybot, yourbot} group
    # RFC 9309 merges the groups that name an agent: only yourbot's second group has /login/
    # (the file's comment says it applies to mybot too; see docs/robots-conformance.md)
    assert not robots.allowed("yourbot", "/login/")
    assert robots.allowed("mybot", "/login/")
    assert robots.allowed("otherbot", "/private/x")
    assert robots.crawl_delay("otherbot") == 30.0


def test_cc_extensions_group_merging() -> None:
    robots = _cc("extensions-group-merging.txt")
    assert not robots.allowed("mybot", "/private/")
    # "User-agent: mybot" (Clean-Param only, no rule) and "User-agent: yourbot" form one group
    assert not robots.allowed("yourbot", "/login/")
    assert not robots.allowed("mybot", "/login/")
    assert robots.allowed("mybot", "/index.html")
    assert robots.allowed("otherbot", "/llms.txt")
    assert not robots.allowed("otherbot", "/index.html")


def test_cc_format_errors() -> None:
    robots = _cc("format-errors-robots.txt")
    # a product token is letters, "_" and "-" only (RFC 9309 §2.2.1): "bot1" and "bot3" name
    # the token "bot", so both groups merge; "user-agent bot2" (no colon) is ignored and the
    # rule after it stays in the first group
    group = robots.group_for("bot")
    assert group is not None and len(group.rules) == 4
    assert not robots.allowed("bot", "/whitespace-before-colon/")  # "disallow :" is read
    assert robots.allowed("bot", "/whitespace-before-colon")  # "allow :" is read
    assert not robots.allowed("bot", "/no-colon-useragent/")
    assert not robots.allowed("bot", "/other")  # from bot3's "disallow: /"
    assert robots.allowed("otherbot", "/other")  # no group, no "*": allow all
    assert robots.sitemaps == ("/sitemap.xml",)


def test_cc_directive_typos() -> None:
    robots = _cc("directive-typos-robots.txt")
    # "bot1".."bot4" all name the product token "bot" (digits end a token)
    for path in ("/desallow/", "/dissalow/", "/useragent/", "/useg-agent/"):
        assert not robots.allowed("bot", path), path
    assert robots.allowed("bot", "/other")
    group = robots.group_for("bot")
    # "useg-agent: bot3" is an unknown key and "useragent bot4" has no colon: both ignored
    assert group is not None and len(group.rules) == 5
    assert robots.allowed("otherbot", "/desallow/")


def test_cc_malformed_path() -> None:
    robots = _cc("malformed-path.txt")
    assert not robots.allowed("courtier", "/wiki/Wikipedia_talk:Mediation_Committee/a")
    assert not robots.allowed("courtier", "/wiki/Wikipedia_talk%3Mediation_Committee/a")
    assert robots.allowed("courtier", "/wiki/Main_Page")


def test_cc_merge_rules() -> None:
    robots = _cc("merge-rules.txt")
    assert robots.allowed("wget", "/foo/bar")  # Allow and Disallow of equal length: Allow
    assert not robots.allowed("wget", "/tmp/bar")
    assert not robots.allowed("courtier", "/foo/bar")
    assert robots.allowed("courtier", "/ckh/bar")
    assert not robots.allowed("testy", "/anything")


def test_cc_precedence_of_rules() -> None:
    robots = _cc("precedence-of-rules.txt")
    assert robots.allowed("wget", "/foo")
    assert robots.allowed("wget", "/index.html")
    assert not robots.allowed("wget", "/bar")  # "/*" (2 octets) beats "/" (1)
    assert robots.allowed("testy", "/foo/bar")  # "/foo/bar" ties "/foo/b*": Allow
    assert not robots.allowed("testy", "/foo/baz")
    assert not robots.allowed("testy", "/foo")


def test_cc_rfc_examples() -> None:
    simple = _cc("rfc9309-example-simple-robots.txt")
    assert simple.allowed("foobot", "/example/page.html")
    assert simple.allowed("foobot", "/example/allowed.gif")
    assert not simple.allowed("foobot", "/other")
    assert not simple.allowed("barbot", "/example/page.html")
    assert not simple.allowed("BazBot", "/example/page.html")
    assert simple.allowed("bazbot", "/example/other.html")
    assert simple.allowed("quxbot", "/example/")  # a group without rules allows all
    assert not simple.allowed("unknownbot", "/a/b.gif")
    assert simple.allowed("unknownbot", "/a/b.gif?x")
    assert not simple.allowed("unknownbot", "/example/x")
    assert simple.allowed("unknownbot", "/publications/")
    longest = _cc("rfc9309-example-longest-match-robots.txt")
    assert not longest.allowed("foobot", "/example/page/disallowed.gif")
    assert longest.allowed("foobot", "/example/page/")
    merging = _cc("rfc9309-example-rule-group-merging.txt")
    for path in ("/foo", "/bar", "/baz"):
        assert not merging.allowed("examplebot", path)
    assert merging.allowed("examplebot", "/qux")
    assert not merging.allowed("bazbot", "/baz")
    assert merging.allowed("bazbot", "/foo")
    assert not merging.allowed("otherbot", "/foo")
    assert merging.allowed("otherbot", "/baz")


def test_cc_sitemaps() -> None:
    assert _cc("sitemap-robots.txt").sitemaps == (
        "http://domain.com/sitemap.xml",
        "http://domain.com/dir/MixedCased-sitemap.xml",
    )
    assert _cc("sitemap-robots-dedup.txt").sitemaps == ("http://example.org/sitemap.xml",)
    assert _cc("relative-sitemap-robots.txt").sitemaps == ("/sitemap.xml",)
    flot = _cc("www.flot.com-robots.txt")
    assert flot.sitemaps == ("http://flot.com/sitemap_index.xml",)
    assert not flot.allowed("courtier", "/admin/x")


def test_cc_wildcards_amazon() -> None:
    robots = _cc("wildcards.txt")
    assert not robots.allowed("courtier", "/x/y/gcrnsts")
    assert robots.allowed("courtier", "/wishlist/universal-123")
    assert not robots.allowed("courtier", "/wishlist/other")
    assert not robots.allowed("courtier", "/gp/registry/wishlist/abc/reserve")
    assert not robots.allowed("googlebot", "/rss/people/abc/reviews")
    assert not robots.allowed("googlebot", "/gp/pdp/rss/x/reviews/more")
    assert robots.allowed("googlebot", "/rss/people/abc")
    assert robots.allowed("courtier", "/rss/people/abc/reviews")  # only Googlebot's rule
    assert not robots.allowed("EtaoSpider", "/anything")
    assert len(robots.sitemaps) == 8


def test_cc_crawl_delays_and_extensions() -> None:
    twitter = _cc("twitter.com-robots.txt")
    assert twitter.crawl_delay("slurp") == 1.0
    assert twitter.crawl_delay("msnbot") == 10.0
    assert twitter.crawl_delay("googlebot") is None  # the line is commented out
    assert not twitter.allowed("courtier", "/search?q=x")
    assert not twitter.allowed("msnbot", "/bob/with_friends")
    assert twitter.allowed("courtier", "/bob")
    assert _cc("astore.amazon.com-robots.txt").crawl_delay("courtier") == 5.0
    extension = _cc("extension-robots.txt")
    assert not extension.allowed("mybot", "/private/x")
    assert extension.allowed("mybot", "/secret/")
    assert not extension.allowed("otherbot", "/admin/")
    assert extension.sitemaps == ("/sitemap.xml",)
    extended = _cc("extended-standard-robots.txt")
    for bot in ("bot1", "bot2", "bot3", "bot4"):
        assert extended.allowed(bot, "/anything")
        assert extended.crawl_delay(bot) is None


def test_cc_many_user_agents() -> None:
    robots = _cc("many-user-agents.txt")
    for bot in ("outfoxbot", "Foobot", "wget", "bot", "takeout"):
        assert not robots.allowed(bot, "/index.html"), bot
    assert robots.allowed("courtier", "/index.html")
    assert not robots.allowed("courtier", "/bot-trap/")
    assert not robots.allowed("courtier", "/lang/zh-TW/forum/")


# --------------------------------------------------------------------------- helpers: units


@pytest.mark.parametrize(
    ("user_agent", "token"),
    [
        ("courtier/0.1 (+https://example.org/bot)", "courtier"),
        ("Googlebot-News", "googlebot-news"),
        ("Foo_Bar 2.0", "foo_bar"),
        ("ツbot", ""),
        ("", ""),
    ],
)
def test_product_token(user_agent: str, token: str) -> None:
    assert product_token(user_agent) == token


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("https://h.example/a/b?c=d#frag", "/a/b?c=d"),
        ("https://h.example", "/"),
        ("https://h.example?q", "/?q"),
        ("https://h.example:8080/x", "/x"),
        ("/already/a/path", "/already/a/path"),
    ],
)
def test_request_path(url: str, path: str) -> None:
    assert request_path(url) == path


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("/%7efoo", "/~foo"),  # unreserved escapes are decoded
        ("/%41%2d%5F", "/A-_"),
        ("/a%2fb", "/a%2Fb"),  # reserved escapes stay escaped, hex upper-cased
        ("/ツ", "/%E3%83%84"),  # non-ASCII becomes UTF-8 escapes
        ("/a b", "/a%20b"),
        ("/100%", "/100%"),  # a stray "%" is kept
        ("/%zz", "/%zz"),
        ("/plain?x=1&y=*$", "/plain?x=1&y=*$"),
    ],
)
def test_normalize(raw: str, canonical: str) -> None:
    assert normalize(raw) == canonical
    assert normalize_bytes(raw.encode("utf-8")) == canonical


def test_normalize_returns_canonical_input_unchanged() -> None:
    path = "/a/b?c=d"
    assert normalize(path) is path


# --------------------------------------------------------------------------- matching rules


def test_percent_encoding_equivalence_both_ways() -> None:
    robots = _robots(
        "User-agent: *\nDisallow: /%7Efoo\nDisallow: /~bar\nDisallow: /ツ\nDisallow: /a%2Fb\n"
    )
    assert not robots.allowed("x", "/~foo/page")
    assert not robots.allowed("x", "/%7efoo/page")
    assert not robots.allowed("x", "/%7Ebar")
    assert not robots.allowed("x", "/%E3%83%84")
    assert not robots.allowed("x", "/%e3%83%84/x")
    assert not robots.allowed("x", "/ツ")
    assert not robots.allowed("x", "/a%2fb")
    assert robots.allowed("x", "/a/b")  # an escaped "/" is not a path separator


def test_longest_match_wins_and_allow_wins_ties() -> None:
    robots = _robots(
        "User-agent: *\nDisallow: /a\nAllow: /a/b\nDisallow: /a/b/c\n"
        "Disallow: /tie\nAllow: /tie\nAllow: /t*e\nDisallow: /t*f\n"
    )
    assert not robots.allowed("x", "/a")
    assert robots.allowed("x", "/a/b")
    assert not robots.allowed("x", "/a/b/c/d")
    assert robots.allowed("x", "/tie")
    assert robots.allowed("x", "/three")  # "/t*e" Allow, 4 octets, is the only match
    assert not robots.allowed("x", "/tf")  # "/t*f" Disallow


def test_wildcards_and_end_anchor() -> None:
    robots = _robots(
        "User-agent: *\nDisallow: /*.pdf$\nDisallow: /*?\nDisallow: /a*b*c\n"
        "Disallow: /x$y\nDisallow: /exact$\n"
    )
    assert not robots.allowed("x", "/doc/file.pdf")
    assert robots.allowed("x", "/doc/file.pdf.html")
    assert not robots.allowed("x", "/page?x=1")
    assert robots.allowed("x", "/page")
    assert not robots.allowed("x", "/a--b--c--")
    assert robots.allowed("x", "/a--c--b")
    assert not robots.allowed("x", "/x$y/z")  # "$" inside a pattern is a literal
    assert not robots.allowed("x", "/exact")
    assert robots.allowed("x", "/exact/more")
    # "/*$" can end anywhere: it is a prefix "/" that counts 3 octets
    assert _robots("User-agent: *\nDisallow: /ab\nAllow: /*$\n").allowed("x", "/ab")
    assert not _robots("User-agent: *\nDisallow: /abc\nAllow: /*$\n").allowed("x", "/abc")


def test_trailing_star_counts_for_length_only() -> None:
    robots = _robots("User-agent: *\nDisallow: /p\nAllow: /p**\nDisallow: /pq*\n")
    assert robots.allowed("x", "/p")  # "/p**" (4 octets) beats "/p" (2)
    assert robots.allowed("x", "/pq")  # "/p**" ties "/pq*": Allow
    assert RuleSet([Rule(False, "/pq*")]).decide("/pqr") is False
    assert RuleSet([Rule(True, "/p*q")]).decide("/p") is None


def test_anchored_tail_may_not_overlap_the_head() -> None:
    assert RuleSet([Rule(False, "/a*a$")]).decide("/a") is None
    assert RuleSet([Rule(False, "/a*a$")]).decide("/aa") is False
    assert RuleSet([Rule(False, "/a*b*b$")]).decide("/ab") is None
    assert RuleSet([Rule(False, "/a*b*b$")]).decide("/abb") is False


def test_empty_rule_values_are_no_rules() -> None:
    robots = _robots("User-agent: *\nDisallow:\nAllow:\n")
    assert robots.allowed("x", "/anything")
    group = robots.group_for("x")
    assert group is not None and len(group.rules) == 0


def test_pattern_without_leading_slash_is_rooted() -> None:
    robots = _robots("User-agent: *\nDisallow: private\n")
    assert not robots.allowed("x", "/private/x")


def test_robots_txt_is_always_allowed() -> None:
    robots = _robots("User-agent: *\nDisallow: /\nDisallow: /robots.txt$\n")
    assert robots.allowed("x", "/robots.txt")
    assert robots.allowed("x", "/robots.txt?v=2")
    assert not robots.allowed("x", "/robots.txt.bak")
    assert RobotsTxt.disallow_all().allowed("x", "/robots.txt")


def test_query_is_part_of_the_matched_path() -> None:
    robots = _robots("User-agent: *\nDisallow: /search?q=\n")
    assert not robots.allowed("x", "/search?q=cats")
    assert robots.allowed("x", "/search")


def test_path_without_leading_slash() -> None:
    robots = _robots("User-agent: *\nDisallow: /a\n")
    assert not robots.allowed("x", "a/b")
    assert _robots("User-agent: *\nDisallow: /\n").allowed("x", "") is False


# --------------------------------------------------------------------------- groups and agents


def test_user_agent_match_is_case_insensitive_on_product_token() -> None:
    robots = _robots("User-agent: CourTier/2.0 (compatible)\nDisallow: /\n")
    assert not robots.allowed("courtier", "/x")
    assert not robots.allowed("COURTIER", "/x")
    assert robots.allowed("courtierx", "/x")
    assert robots.allowed(product_token("Other/1.0"), "/x")


def test_groups_naming_the_same_agent_are_merged() -> None:
    robots = _robots(
        "User-agent: a\nDisallow: /one\n\nUser-agent: b\nDisallow: /two\n\n"
        "User-agent: A\nDisallow: /three\n"
    )
    assert not robots.allowed("a", "/one")
    assert not robots.allowed("a", "/three")
    assert robots.allowed("a", "/two")


def test_star_groups_are_merged_and_used_only_as_fallback() -> None:
    robots = _robots(
        "User-agent: *\nDisallow: /one\nUser-agent: a\nDisallow: /two\n"
        "User-agent: *\nDisallow: /3\n"
    )
    assert not robots.allowed("other", "/one")
    assert not robots.allowed("other", "/3")
    assert robots.allowed("a", "/one")  # a named group replaces the "*" groups entirely
    assert not robots.allowed("a", "/two")


def test_no_matching_group_and_no_star_allows_all() -> None:
    robots = _robots("User-agent: a\nDisallow: /\n")
    assert robots.allowed("b", "/x")
    assert robots.group_for("b") is None
    assert robots.crawl_delay("b") is None


def test_consecutive_user_agents_share_a_group_and_rules_end_it() -> None:
    robots = _robots("User-agent: a\nUser-agent: b\nDisallow: /ab\nUser-agent: c\nDisallow: /c\n")
    assert not robots.allowed("a", "/ab")
    assert not robots.allowed("b", "/ab")
    assert robots.allowed("a", "/c")
    assert robots.allowed("c", "/ab")
    assert not robots.allowed("c", "/c")


def test_other_lines_do_not_end_a_group() -> None:
    robots = _robots(
        "User-agent: a\nCrawl-delay: 3\nSitemap: https://s.example/map.xml\n"
        "Unknown-key: value\n\nUser-agent: b\nDisallow: /x\n"
    )
    assert not robots.allowed("a", "/x")
    assert not robots.allowed("b", "/x")
    assert robots.crawl_delay("b") == 3.0
    assert robots.sitemaps == ("https://s.example/map.xml",)


def test_rules_before_any_user_agent_are_ignored() -> None:
    robots = _robots("Disallow: /\nAllow: /x\nUser-agent: *\nDisallow: /y\n")
    assert robots.allowed("any", "/z")
    assert not robots.allowed("any", "/y")


def test_star_with_suffix_is_not_the_global_group() -> None:
    robots = _robots("User-agent: *bot\nDisallow: /\nUser-agent: * \nDisallow: /g\n")
    assert robots.allowed("anybot", "/x")
    assert not robots.allowed("anybot", "/g")


# --------------------------------------------------------------------------- syntax


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings(newline: str) -> None:
    text = newline.join(["User-agent: a", "Disallow: /x", "", "User-agent: b", "Disallow: /y"])
    robots = _robots(text)
    assert not robots.allowed("a", "/x")
    assert robots.allowed("a", "/y")
    assert not robots.allowed("b", "/y")


def test_byte_order_mark_is_skipped() -> None:
    robots = RobotsTxt.parse(b"\xef\xbb\xbfUser-agent: a\nDisallow: /x\n")
    assert not robots.allowed("a", "/x")
    # a BOM in the middle of the file spoils only its own line
    robots = RobotsTxt.parse(b"User-agent: a\n\xef\xbb\xbfDisallow: /x\nDisallow: /y\n")
    assert robots.allowed("a", "/x")
    assert not robots.allowed("a", "/y")


def test_utf16_body_is_decoded() -> None:
    text = "User-agent: a\nDisallow: /ツ\n"
    for body in (b"\xff\xfe" + text.encode("utf-16-le"), b"\xfe\xff" + text.encode("utf-16-be")):
        robots = RobotsTxt.parse(body)
        assert not robots.allowed("a", "/%E3%83%84")
        assert robots.allowed("a", "/x")


def test_comments_keys_and_whitespace() -> None:
    robots = _robots(
        "# a comment line\n  USER-AGENT  :  a   # trailing comment\n"
        "\tdisALLOW\t:\t/x#y\nDisallow /no-colon\nallow: /x/ok # ok\n"
    )
    assert not robots.allowed("a", "/x")
    assert not robots.allowed("a", "/x#y")  # the rule is "/x": "#y" was a comment
    assert robots.allowed("a", "/x/ok")
    assert robots.allowed("a", "/no-colon")


def test_typo_keys_are_accepted() -> None:
    robots = _robots("Useragent: a\nDissallow: /x\nCrawldelay: 2\n")
    assert not robots.allowed("a", "/x")
    assert robots.crawl_delay("a") == 2.0


# --------------------------------------------------------------------------- crawl-delay, sitemaps


def test_crawl_delay_validation_and_merging() -> None:
    robots = _robots(
        "User-agent: a\nCrawl-delay: 2.5\n"
        "User-agent: b\nCrawl-delay: -1\nCrawl-delay: nan\nCrawl-delay: 1e9\nCrawl-delay: x\n"
        "User-agent: c\nCrawl-delay: .5 seconds\nDisallow: /\n"
        "User-agent: a\nCrawl-delay: 4\nDisallow: /\n"
        "User-agent: d\nCrawl-delay: .5 seconds\nDisallow: /\n"
        "User-agent: *\nCrawl-delay: 7\n"
    )
    # crawl-delay lines do not end a run of user-agent lines: a, b and c share one group,
    # whose invalid values (-1, nan, 1e9, x) are ignored
    assert robots.crawl_delay("b") == 2.5
    assert robots.crawl_delay("c") == 2.5
    assert robots.crawl_delay("a") == 4.0  # merged groups take the max
    assert robots.crawl_delay("d") == 0.5
    assert robots.crawl_delay("zzz") == 7.0


def test_sitemaps_are_global_ordered_and_deduplicated() -> None:
    robots = _robots(
        "Sitemap: https://e.example/1.xml\nUser-agent: a\nSitemap: https://e.example/2.xml\n"
        "Disallow: /\nsitemap:https://e.example/1.xml\nSITEMAP : https://e.example/Mixed.xml\n"
        "Sitemap:\n"
    )
    assert robots.sitemaps == (
        "https://e.example/1.xml",
        "https://e.example/2.xml",
        "https://e.example/Mixed.xml",
    )


# --------------------------------------------------------------------------- object contract


def test_size_cap_and_digest() -> None:
    head = b"User-agent: *\nDisallow: /early\n"
    padding = b"#" * (MAX_ROBOTS_BYTES - len(head) - 1) + b"\n"
    body = head + padding + b"Disallow: /late\n"
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("x", "/early")
    assert robots.allowed("x", "/late")  # beyond the cap: ignored
    assert robots.digest == hashlib.sha256(body[:MAX_ROBOTS_BYTES]).hexdigest()


def test_at_least_500_kib_are_parsed() -> None:
    body = b"User-agent: *\n" + b"#" * (500 * 1024) + b"\nDisallow: /late\n"
    assert len(body) < MAX_ROBOTS_BYTES
    assert not RobotsTxt.parse(body).allowed("x", "/late")


def test_allow_all_is_one_shared_instance() -> None:
    # the frontier remembers a host's Crawl-delay by the rules' identity: a new object per
    # call (a 404 robots.txt) made it parse and hash b"" three times per lease
    assert RobotsTxt.allow_all() is RobotsTxt.allow_all()
    assert RobotsTxt.allow_all().decide_at_once("courtier", "/x") == (None, 0)


def test_allow_all_and_disallow_all() -> None:
    assert RobotsTxt.allow_all().allowed("x", "/any/thing")
    assert RobotsTxt.allow_all().digest == hashlib.sha256(b"").hexdigest()
    assert RobotsTxt.allow_all().sitemaps == ()
    denied = RobotsTxt.disallow_all()
    assert not denied.allowed("x", "/")
    assert not denied.allowed("courtier", "/any/thing")
    assert denied.digest != RobotsTxt.allow_all().digest


def test_robots_is_immutable() -> None:
    robots = _robots("User-agent: *\nDisallow: /\n")
    with pytest.raises(AttributeError):
        robots.digest = "x"
    with pytest.raises(AttributeError):
        robots.sitemaps = ()


def test_group_for_is_cached_and_consistent() -> None:
    robots = _robots("User-agent: a\nCrawl-delay: 1\nDisallow: /x\n")
    first = robots.group_for("a")
    assert first is not None and first is robots.group_for("a")
    assert first.crawl_delay == 1.0 and first.rules.decide("/x") is False


def test_pathological_wildcards_stay_linear() -> None:
    robots = _robots("User-agent: *\nDisallow: /*a*a*a*a*a*a*a*a*a*a*a*a*b$\n")
    assert robots.allowed("x", "/" + "a" * 5000)
    assert not robots.allowed("x", "/" + "a" * 5000 + "b")


# --------------------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048), st.text(max_size=64))
def test_arbitrary_bytes_never_raise(body: bytes, path: str) -> None:
    robots = RobotsTxt.parse(body)
    assert isinstance(robots.allowed("courtier", path), bool)
    robots.crawl_delay("courtier")
    assert robots.digest == hashlib.sha256(body).hexdigest()


_LINES = st.lists(
    st.tuples(
        st.sampled_from(["user-agent", "allow", "disallow", "crawl-delay", "sitemap", "x"]),
        st.text(alphabet="/ab*$%7E: #\u00e9\r\n", max_size=8),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(_LINES, st.text(alphabet="/ab%7E?\u00e9", max_size=10))
def test_structured_files_never_raise(lines: list[tuple[str, str]], path: str) -> None:
    text = "\n".join(f"{key}: {value}" for key, value in lines)
    robots = _robots(text)
    assert isinstance(robots.allowed("a", path), bool)


def _reference(rules: list[Rule], path: str) -> bool | None:
    """A slow, obviously-correct matcher: regex per rule, best by (length, Allow)."""
    best: tuple[int, bool] | None = None
    for rule in rules:
        pattern = rule.pattern
        anchored = pattern.endswith("$")
        body = pattern[:-1] if anchored else pattern
        regex = ".*".join(re.escape(part) for part in body.split("*"))
        if re.match(regex + (r"\Z" if anchored else ""), path, re.DOTALL):
            candidate = (len(pattern), rule.allow)
            if best is None or candidate > best:
                best = candidate
    return None if best is None else best[1]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.text(alphabet="/ab*$", min_size=1, max_size=7)),
        max_size=10,
    ),
    st.text(alphabet="/ab$*", max_size=9),
)
def test_matcher_agrees_with_reference(raw_rules: list[tuple[bool, str]], path: str) -> None:
    rules = [Rule(allow, pattern) for allow, pattern in raw_rules]
    assert RuleSet(rules).decide(path) == _reference(rules, path)


def test_fractional_crawl_delay_is_kept_exactly() -> None:
    robots = RobotsTxt.parse(b"User-agent: *\nCrawl-delay: 0.7\nDisallow:\n")
    assert robots.crawl_delay("courtier") == 0.7  # neither rounded up nor down


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.text(alphabet="/ab*$", min_size=1, max_size=7)),
        max_size=40,
    ),
    st.text(alphabet="/ab$*", max_size=30),
    st.integers(min_value=1, max_value=40),
)
def test_a_decision_taken_in_steps_is_the_same_decision(
        raw_rules: list[tuple[bool, str]], path: str, budget: int) -> None:
    rules = [Rule(allow, pattern) for allow, pattern in raw_rules]
    check = RuleSet(rules).check(path)
    for _ in range(10_000):
        if check.done:
            break
        check.advance(budget)
    assert check.done and check.verdict == _reference(rules, path)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.text(alphabet="/ab$", min_size=1, max_size=7)),
             max_size=40),
    st.text(alphabet="/ab$", max_size=30),
)
def test_plain_rules_are_decided_at_once_as_the_walk_decides(
        raw_rules: list[tuple[bool, str]], path: str) -> None:
    rules = [Rule(allow, pattern) for allow, pattern in raw_rules]
    rule_set = RuleSet(rules)
    quick = rule_set.check(path)
    assert quick.done  # no "*": decided without a walk
    walked = PathCheck(rule_set._walk(path))
    walked_units = walked.advance(10**9)
    assert quick.advance(10**9) == walked_units  # charged what the walk spends
    assert quick.advance(10**9) == 0  # and only once
    assert quick.verdict == walked.verdict == _reference(rules, path)
    assert rule_set.decide_at_once(path) == (walked.verdict, walked_units)  # no PathCheck


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.text(alphabet="/ab*$", min_size=1, max_size=7)),
             max_size=20),
    st.text(alphabet="/ab$%2F", max_size=20),
    st.sampled_from(["courtier", "other"]),
)
def test_a_decision_at_once_is_what_the_stepped_check_decides(
        raw_rules: list[tuple[bool, str]], path: str, agent: str) -> None:
    body = "User-agent: courtier\n" + "".join(
        f"{'Allow' if allow else 'Disallow'}: {pattern}\n" for allow, pattern in raw_rules)
    robots = RobotsTxt.parse(body.encode())
    check = robots.check(agent, path)
    units = check.advance(10**9)
    at_once = robots.decide_at_once(agent, path)
    if any("*" in pattern for _, pattern in raw_rules) and agent == "courtier":
        assert at_once is None  # wildcards are stepped (bounded per turn)
    else:
        assert at_once == (check.verdict, units)


def test_many_plain_head_lengths_are_still_decided_in_steps() -> None:
    rules = [Rule(False, "/" + "b" * i) for i in range(1, 400)] + [Rule(True, "/a")]
    check = RuleSet(rules).check("/" + "a" * 500)
    assert not check.done  # 399 head lengths (2–400): more than one pause of the walk
    steps = []
    while not check.done:
        steps.append(check.advance(100))
    assert len(steps) > 1 and sum(steps) == 399 and check.verdict is True


def test_identical_wildcard_rules_are_tried_once() -> None:
    once = RuleSet([Rule(False, "/*x*y")])
    many = RuleSet([Rule(False, "/*x*y")] * 10_000 + [Rule(True, "/*x*y")])
    path = "/" + "a" * 100
    one, all_ = once.check(path), many.check(path)
    one.advance(10**9)
    all_.advance(10**9)
    assert all_.units == one.units  # ten thousand copies cost what one does
    assert many.decide("/xy") is True and once.decide("/xy") is False  # Allow won the tie


def test_a_hostile_decision_spends_its_budget_in_bounded_steps() -> None:
    body = "User-agent: *\n" + "".join(f"Disallow: /*q{i}*z{i}\n" for i in range(25_000))
    robots = RobotsTxt.parse(body.encode())
    check = robots.check("courtier", "/" + "q" * 300)
    steps = []
    while not check.done:
        steps.append(check.advance(1000))
    assert len(steps) > 20 and max(steps) <= 1000 + 256 + 10
    assert check.allowed is robots.allowed("courtier", "/" + "q" * 300) is True
