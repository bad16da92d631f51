"""Property: any response written by WarcWriter reads back through warcio intact.

Random bodies, header names and values (including CR/LF, non-ASCII and
surrogate-escaped bytes as aiohttp produces them), statuses, URLs and
truncation flags; warcio must parse every record, verify both SHA-256
digests, and return the body and headers we wrote.
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from courtier.archive.warc import WarcWriter
from courtier.archive.warc_fields import sha256_digest
from courtier.fetch.transport import FetchResponse

TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
header_names = st.text(alphabet=TOKEN_CHARS, min_size=1, max_size=20).filter(
    lambda n: n.lower() not in ("content-length", "transfer-encoding")
)
plain_values = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=40
)
wild_values = st.text(max_size=40)  # CR, LF, NUL, non-ASCII, lone surrogates
paths = st.text(alphabet="abcXYZ019-._~%/?=&", max_size=30)

responses = st.builds(
    lambda status, body, plain, wild, path, truncated, ip: FetchResponse(
        url="http://fuzz.test/" + path,
        status=status,
        reason="Reason",
        http_version="1.1",
        headers=[*plain, *wild],
        raw_body=body,
        body=body,
        request_headers=[("User-Agent", "courtier/0.1")],
        remote_ip=ip,
        started_at=1_700_000_000.5,
        truncated=truncated,
    ),
    st.integers(min_value=100, max_value=599),
    st.binary(max_size=3000),
    st.lists(st.tuples(header_names, plain_values), max_size=6),
    st.lists(st.tuples(header_names, wild_values), max_size=3),
    paths,
    st.sampled_from([None, "length", "time", "decoded"]),
    st.sampled_from([None, "203.0.113.9", "2001:db8::1"]),
)


def _read_back(data: bytes) -> list[tuple[dict[str, str], bytes, list[tuple[str, str]]]]:
    out = []
    for record in ArchiveIterator(io.BytesIO(data), check_digests=True):
        raw = record.raw_stream.read()
        assert record.digest_checker.passed is not False, record.digest_checker.problems
        http = list(record.http_headers.headers) if record.http_headers else []
        out.append((dict(record.rec_headers.headers), raw, http))
    return out


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(responses, min_size=1, max_size=3))
def test_warc_round_trip_through_warcio(batch: list[FetchResponse]) -> None:
    with tempfile.TemporaryDirectory() as root:
        with WarcWriter(root, prefix="fuzz") as writer:
            written = [writer.write_exchange(r) for r in batch]
        [path] = sorted(Path(root).glob("*.warc.gz"))
        data = path.read_bytes()
    records = _read_back(data)
    assert [h["WARC-Type"] for h, _, _ in records] == ["warcinfo"] + ["response", "request"] * len(
        batch
    )
    for i, (response, archived) in enumerate(zip(batch, written, strict=True)):
        headers, body, http = records[1 + 2 * i]
        assert body == response.raw_body
        assert headers["WARC-Payload-Digest"] == archived.payload_digest
        assert archived.payload_digest == sha256_digest(response.raw_body)
        assert headers["WARC-Block-Digest"] == archived.block_digest
        assert headers["WARC-Target-URI"] == response.url
        assert ("Content-Length", str(len(response.raw_body))) in http
        for name, value in response.headers:
            if all(0x21 <= ord(c) <= 0x7E for c in value):
                assert (name, value) in http, (name, value)
        assert ("WARC-Truncated" in headers) == (response.truncated is not None)
        # the member is readable alone from its recorded offset and length
        loc = archived.location
        [alone] = _read_back(data[loc.offset : loc.offset + loc.length])
        assert alone[1] == response.raw_body
