"""Charset sniffing and decoding: WHATWG order, label table, html5lib vectors."""

from __future__ import annotations

import base64
import codecs
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtier.parse import charset
from courtier.parse.charset import decode_html, lookup_label, prescan, sniff_encoding
from tests.conftest import conformance_file

META_L2 = b'<meta charset="iso-8859-2">'


def test_html5lib_encoding_vectors_all_pass() -> None:
    data = json.loads(conformance_file("encoding/html5lib_encoding_tests.json").read_text())
    cases = [c for c in data["cases"] if not c["scripted"]]
    assert len(cases) >= 80
    failures = []
    for i, case in enumerate(cases):
        body = base64.b64decode(case["data_base64"])
        got = sniff_encoding(body, None)
        if got != case["expected_encoding"].lower():
            failures.append((i, case["expected_encoding"], got, body[:80]))
    assert failures == [], f"{len(failures)}/{len(cases)} html5lib cases failed: {failures}"


@pytest.mark.parametrize(
    ("bom", "expected"),
    [(b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16le"), (b"\xfe\xff", "utf-16be")],
)
def test_bom_beats_http_header_and_meta(bom: bytes, expected: str) -> None:
    body = bom + META_L2
    assert sniff_encoding(body, "text/html; charset=koi8-r") == expected


def test_http_charset_beats_meta() -> None:
    assert sniff_encoding(META_L2, "text/html; charset=windows-1251") == "windows-1251"
    assert sniff_encoding(META_L2, 'text/html; charset="Shift_JIS"') == "shift_jis"
    assert sniff_encoding(META_L2, "text/html;charset=UTF-8;") == "utf-8"


def test_unknown_http_label_falls_through_to_meta_then_default() -> None:
    assert sniff_encoding(META_L2, "text/html; charset=klingon") == "iso-8859-2"
    assert sniff_encoding(b"<p>hi</p>", "text/html; charset=klingon") == "windows-1252"
    assert sniff_encoding(b"<p>hi</p>", "text/html") == "windows-1252"
    assert sniff_encoding(b"", None) == "windows-1252"


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("latin1", "windows-1252"),
        ("ISO-8859-1", "windows-1252"),
        ("ascii", "windows-1252"),
        ("US-ASCII", "windows-1252"),
        ("utf8", "utf-8"),
        (" UTF-8\t", "utf-8"),
        ("x-sjis", "shift_jis"),
        ("Windows-31J", "shift_jis"),
        ("gb2312", "gbk"),
        ("ks_c_5601-1987", "euc-kr"),
        ("iso-8859-9", "windows-1254"),
        ("tis-620", "cp874"),
        ("iso-8859-8-i", "iso-8859-8"),
        ("x-mac-cyrillic", "mac-cyrillic"),
        ("unicode", "utf-16le"),
    ],
)
def test_whatwg_labels_map_to_python_codecs(label: str, name: str) -> None:
    assert lookup_label(label) == name
    codecs.lookup(name)  # usable by Python


@pytest.mark.parametrize("label", ["bogus", "", "utf-7", "iso-2022-kr", "hz-gb-2312", "base64"])
def test_unknown_and_replacement_labels_are_ignored(label: str) -> None:
    assert lookup_label(label) is None
    body = f'<meta charset="{label}"><meta charset="koi8-r">'.encode()
    assert sniff_encoding(body, f"text/html; charset={label}") == "koi8-r"


def test_every_table_name_is_a_python_codec() -> None:
    for name in set(charset._LABEL_TO_NAME.values()):
        codecs.lookup(name)
        codecs.lookup(charset.python_decoder(name))


@pytest.mark.parametrize("label", ["utf-16", "UTF-16LE", "utf-16be", "unicodefffe"])
def test_meta_declared_utf16_means_utf8(label: str) -> None:
    assert sniff_encoding(f'<meta charset="{label}">'.encode(), None) == "utf-8"
    # an HTTP header may name UTF-16 (WHATWG honours it there)
    assert sniff_encoding(b"<p>", f"text/html; charset={label}").startswith("utf-16")


def test_meta_x_user_defined_means_windows_1252() -> None:
    assert sniff_encoding(b'<meta charset="x-user-defined">', None) == "windows-1252"


def test_http_equiv_content_type_needs_the_pragma() -> None:
    pragma = b'<meta http-equiv="content-type" content="text/html; charset=koi8-r">'
    assert sniff_encoding(pragma, None) == "koi8-r"
    assert sniff_encoding(b'<meta content="text/html; charset=koi8-r">', None) == "windows-1252"


def test_prescan_ignores_comments_and_quoted_attribute_text() -> None:
    assert prescan(b'<!-- <meta charset="koi8-r"> --><p>') is None
    assert prescan(b'<p title="<meta charset=koi8-r>">x</p>') is None
    assert prescan(b'<!-- x --><META CHARSET="KOI8-R">') == "koi8-r"


def test_declaration_after_1024_bytes_counts_only_inside_the_head() -> None:
    filler = b"<!--" + b"x" * 2000 + b"-->"
    assert sniff_encoding(filler + META_L2, None) == "iso-8859-2"
    late_in_body = b"<head></head><body>" + filler + META_L2
    assert sniff_encoding(late_in_body, None) == "windows-1252"
    beyond_window = b"<!--" + b"x" * (charset.EXTENDED_PRESCAN_BYTES + 10) + b"-->" + META_L2
    assert sniff_encoding(beyond_window, None) == "windows-1252"


def test_decode_html_uses_declared_encoding() -> None:
    text = "Привет, мир"
    body = b'<meta charset="windows-1251"><p>' + text.encode("cp1251")
    decoded, enc = decode_html(body, None)
    assert enc == "windows-1251"
    assert text in decoded


def test_decode_html_strips_bom() -> None:
    body = "\ufeff<p>é</p>".encode("utf-16-le")
    decoded, enc = decode_html(body, None)
    assert (decoded, enc) == ("<p>é</p>", "utf-16le")
    decoded, enc = decode_html(b"\xef\xbb\xbf<p>\xc3\xa9</p>", None)
    assert (decoded, enc) == ("<p>é</p>", "utf-8")


def test_undeclared_valid_utf8_is_read_as_utf8_but_sniff_stays_whatwg() -> None:
    body = "<p>naïve café</p>".encode()
    assert sniff_encoding(body, None) == "windows-1252"
    assert decode_html(body, None) == ("<p>naïve café</p>", "utf-8")
    latin = "<p>naïve café</p>".encode("cp1252")  # not valid UTF-8
    assert decode_html(latin, None) == ("<p>naïve café</p>", "windows-1252")
    assert decode_html(b"<p>plain</p>", None) == ("<p>plain</p>", "windows-1252")


def test_decode_html_replaces_invalid_bytes() -> None:
    decoded, enc = decode_html(b'<meta charset="utf-8"><p>a\xff\xfeb</p>', None)
    assert enc == "utf-8"
    assert "a\ufffd\ufffdb" in decoded


def test_legacy_cjk_labels_decode_with_the_whatwg_superset() -> None:
    # U+2460 (circled one) exists in Windows-31J (cp932) but not in plain Shift_JIS
    body = b'<meta charset="shift_jis"><p>' + "①".encode("cp932")
    decoded, enc = decode_html(body, None)
    assert enc == "shift_jis"
    assert decoded.endswith("①")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.one_of(st.none(), st.text(max_size=60)))
def test_never_raises_on_arbitrary_input(body: bytes, content_type: str | None) -> None:
    enc = sniff_encoding(body, content_type)
    codecs.lookup(charset.python_decoder(enc))
    text, used = decode_html(body, content_type)
    assert isinstance(text, str)
    codecs.lookup(charset.python_decoder(used))


SOUP = [
    *b"<meta | charset=|\"|'|koi8-r|>|<!--|-->|<p| http-equiv=content-type".split(b"|"),
    *b" content=|charset=utf-16|/|\n|<|x".split(b"|"),
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SOUP), max_size=40))
def test_prescan_never_raises_on_tag_soup(parts: list[bytes]) -> None:
    result = prescan(b"".join(parts))
    assert result is None or result in charset._LABELS
