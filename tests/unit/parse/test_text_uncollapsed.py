"""parse_html(collapse_text=False): the same words and SimHash, whitespace left as is."""

from __future__ import annotations

from courtier.dedup.pages import DuplicateTracker
from courtier.dedup.simhash import simhash64, tokenize
from courtier.parse.html import parse_html

PAGE = (b"<html><body><h1>  Title\there </h1>\n\n<p>one   two\n three</p><script>no</script>"
        + b"<p>some words</p>\n" * 40 + b"</body>")
#: U+2003 (em space) and U+00A0 (&nbsp;) are spaces to str.split(), not to SimHash
UNICODE_SPACES = b"<p>caf\xc3\xa9 \xe2\x80\x83 x\xc2\xa0y   z</p>" * 10


def test_same_words_and_fingerprint_as_the_collapsed_text() -> None:
    collapsed = parse_html(PAGE, "http://a.test/", "text/html; charset=utf-8").text
    raw = parse_html(PAGE, "http://a.test/", "text/html; charset=utf-8",
                     collapse_text=False).text
    assert raw != collapsed and "  " in raw  # really not collapsed
    assert " ".join(raw.split()) == collapsed
    assert tokenize(raw) == tokenize(collapsed)
    assert simhash64(raw) == simhash64(collapsed)
    assert "no" not in tokenize(raw)  # script text still left out


def test_non_ascii_text_is_still_collapsed() -> None:
    collapsed = parse_html(UNICODE_SPACES, "http://a.test/", "text/html; charset=utf-8").text
    raw = parse_html(UNICODE_SPACES, "http://a.test/", "text/html; charset=utf-8",
                     collapse_text=False).text
    assert raw == collapsed and simhash64(raw) == simhash64(collapsed)


def test_over_the_cap_the_text_is_collapsed_and_capped() -> None:
    raw = parse_html(PAGE, "http://a.test/", "text/html", max_text_chars=30,
                     collapse_text=False).text
    assert len(raw) <= 30 and "  " not in raw


def test_duplicate_tracker_counts_words_not_spaces() -> None:
    tracker = DuplicateTracker()
    spaced = "alpha " + " " * 100 + "beta"  # many spaces, two words: too little text
    tracker.fingerprint(b"\x01" * 16, spaced)
    fp, twin = tracker.fingerprint(b"\x02" * 16, spaced)
    assert twin is None and fp == simhash64(spaced)
    words = " ".join(f"w{i}" for i in range(30))
    tracker.fingerprint(b"\x03" * 16, words)
    assert tracker.fingerprint(b"\x04" * 16, "  ".join(words.split()))[1] == (b"\x03" * 8).hex()
