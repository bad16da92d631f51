"""Content-Encoding decoding without a network: every coding, nesting, caps, corrupt data."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest
from hypothesis import given
from hypothesis import strategies as st

from courtier.fetch.decoding import BodyDecoder, DecodedCap

BODY = b"<html><body>" + b"courtier decodes this page. " * 500 + b"</body></html>"


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def _decode(encoded: bytes, coding: str | None, cap: int = 1 << 20, step: int = 7) -> bytes:
    decoder = BodyDecoder(coding, cap)
    for i in range(0, len(encoded), step):  # tiny chunks: every stage sees split input
        decoder.feed(encoded[i : i + step])
    return b"".join(decoder.parts)


@pytest.mark.parametrize(("coding", "encode"), [
    (None, lambda b: b),
    ("identity", lambda b: b),
    ("gzip", gzip.compress),
    ("x-gzip", gzip.compress),
    ("deflate", zlib.compress),       # zlib-wrapped, as RFC 9110 says
    ("deflate", _raw_deflate),        # raw, as many servers send it
    ("br", brotli.compress),
    ("GZip", gzip.compress),          # codings are case-insensitive
])
def test_each_coding_round_trips(coding: str | None, encode: object) -> None:
    assert callable(encode)
    assert _decode(encode(BODY), coding) == BODY


def test_nested_codings_are_undone_last_applied_first() -> None:
    encoded = brotli.compress(gzip.compress(BODY))  # gzip applied first, then br
    assert _decode(encoded, "gzip, br") == BODY


def test_every_gzip_member_is_decoded() -> None:
    encoded = gzip.compress(BODY[:1000]) + gzip.compress(BODY[1000:])
    assert _decode(encoded, "gzip") == BODY


def test_trailing_bytes_that_start_no_member_are_ignored() -> None:
    assert _decode(gzip.compress(BODY) + b"\x00garbage", "gzip") == BODY


def test_cap_keeps_exactly_cap_bytes_of_a_bomb() -> None:
    bomb = gzip.compress(b"\x00" * (8 << 20))
    decoder = BodyDecoder("gzip", cap=100_000)
    with pytest.raises(DecodedCap):
        decoder.feed(bomb)
    assert decoder.size == 100_000
    assert b"".join(decoder.parts) == b"\x00" * 100_000


def test_unknown_coding_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="compress"):
        BodyDecoder("compress", cap=1000)


def test_corrupt_data_is_a_value_error() -> None:
    decoder = BodyDecoder("gzip", cap=1000)
    with pytest.raises(ValueError):
        decoder.feed(b"\x1f\x8b\x08\x00" + b"\xff" * 64)


@given(st.binary(max_size=5000), st.integers(min_value=1, max_value=97),
       st.sampled_from(["gzip", "deflate", "br"]))
def test_any_body_any_split_round_trips(body: bytes, step: int, coding: str) -> None:
    encode = {"gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress}[coding]
    assert _decode(encode(body), coding, step=step) == body
