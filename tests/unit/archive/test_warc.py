"""WARC writer, recovery and reader checks, verified with warcio."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import random
import re
import zlib
from pathlib import Path

import fsspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from courtier.archive import (
    REVISIT_IDENTICAL_DIGEST,
    REVISIT_NOT_MODIFIED,
    WarcWriter,
    check_warc,
    recover_warc_dir,
    sha256_digest,
)
from courtier.archive.warc_fields import format_warc_date
from courtier.core.errors import ArchiveError, ConfigError
from courtier.fetch.transport import FetchResponse
from tests.conftest import conformance_file

HTML = b"<html><head><title>t</title></head><body>" + b"<p>hello world</p>" * 200 + b"</body>"
NAME_RE = re.compile(r"^pfx-\d{20}-(\d{5})-[0-9a-f]{6}\.warc\.gz$")


def make_response(
    url: str = "http://example.com/a/b?x=1&y=2",
    body: bytes = HTML,
    headers: list[tuple[str, str]] | None = None,
    truncated: str | None = None,
    status: int = 200,
) -> FetchResponse:
    if headers is None:
        headers = [("Content-Type", "text/html"), ("Content-Length", str(len(body)))]
    return FetchResponse(
        url=url,
        status=status,
        reason="OK" if status == 200 else "Not Modified",
        http_version="1.1",
        headers=headers,
        raw_body=body,
        body=body,
        request_headers=[("User-Agent", "courtier/0.1"), ("Accept", "text/html")],
        remote_ip="203.0.113.7",
        started_at=1_700_000_000.25,
        truncated=truncated,
    )


def warc_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.warc.gz"))


def read_records(path: Path) -> list[tuple[dict[str, str], bytes, list[tuple[str, str]]]]:
    """(WARC headers, raw payload, HTTP headers) of every record, digests checked by warcio."""
    out = []
    with path.open("rb") as stream:
        for record in ArchiveIterator(stream, check_digests=True):
            raw = record.raw_stream.read()
            assert record.digest_checker.passed is not False, record.digest_checker.problems
            http = record.http_headers.headers if record.http_headers else []
            out.append((dict(record.rec_headers.headers), raw, list(http)))
    return out


def sha256_b32(data: bytes) -> str:
    return "sha256:" + base64.b32encode(hashlib.sha256(data).digest()).decode()


# -- writer ------------------------------------------------------------------


def test_round_trip_with_warcio(tmp_path: Path) -> None:
    with WarcWriter(str(tmp_path), prefix="pfx", operator="ops@example.org") as writer:
        first = writer.write_exchange(make_response())
        second = writer.write_exchange(make_response(url="http://example.com/"), warc_date=5.5)
        name = writer.current_file
    assert name is not None and NAME_RE.match(name)
    assert not list(tmp_path.glob("*.open")), "a clean close removes the marker"
    [path] = warc_files(tmp_path)
    assert first.location.file == second.location.file == path.name
    records = read_records(path)
    types = [headers["WARC-Type"] for headers, _, _ in records]
    assert types == ["warcinfo", "response", "request", "response", "request"]
    info, info_block, _ = records[0]
    assert info["WARC-Filename"] == path.name
    assert (
        b"operator: ops@example.org" in info_block and b"format: WARC File Format 1.1" in info_block
    )
    resp, body, http = records[1]
    req, req_block, _ = records[2]
    assert body == HTML
    assert resp["WARC-Target-URI"] == "http://example.com/a/b?x=1&y=2"
    assert resp["WARC-Date"] == "2023-11-14T22:13:20.250000Z"
    assert records[3][0]["WARC-Date"] == "1970-01-01T00:00:05.500000Z"
    assert resp["WARC-IP-Address"] == "203.0.113.7"
    assert resp["WARC-Payload-Digest"] == first.payload_digest == sha256_b32(HTML)
    assert resp["WARC-Block-Digest"] == first.block_digest
    assert resp["WARC-Concurrent-To"] == req["WARC-Record-ID"]
    assert req["WARC-Concurrent-To"] == resp["WARC-Record-ID"]
    assert resp["WARC-Warcinfo-ID"] == req["WARC-Warcinfo-ID"] == info["WARC-Record-ID"]
    assert re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", resp["WARC-Record-ID"])
    assert "WARC-Truncated" not in resp
    assert resp["Content-Type"] == "application/http; msgtype=response"
    assert ("Content-Type", "text/html") in http
    assert req_block == b"", "a GET request has no body"
    expected_request = (
        b"\r\n\r\nGET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\n"
        b"User-Agent: courtier/0.1\r\nAccept: text/html\r\n\r\n\r\n\r\n"
    )
    assert expected_request in gzip.decompress(path.read_bytes())
    assert check_warc(str(path)).ok


def test_each_record_is_its_own_gzip_member(tmp_path: Path) -> None:
    with WarcWriter(str(tmp_path)) as writer:
        results = [writer.write_exchange(make_response(url=f"http://h.test/{i}")) for i in range(5)]
    data = warc_files(tmp_path)[0].read_bytes()
    for i, result in enumerate(results):
        loc = result.location
        member = data[loc.offset : loc.offset + loc.length]
        dec = zlib.decompressobj(31)
        record = dec.decompress(member)
        assert dec.eof and dec.unused_data == b"", "exactly one complete gzip member"
        assert record.startswith(b"WARC/1.1\r\nWARC-Type: response\r\n")
        records = ArchiveIterator(io.BytesIO(member), check_digests=True)
        only = next(records)
        assert only.rec_headers.get_header("WARC-Target-URI") == f"http://h.test/{i}"
        assert only.raw_stream.read() == HTML
        assert only.digest_checker.passed is True
        assert next(records, None) is None


def test_rotation_keeps_exchanges_whole(tmp_path: Path) -> None:
    with WarcWriter(str(tmp_path), prefix="pfx", max_file_bytes=500) as writer:
        names = []
        for i in range(6):
            result = writer.write_exchange(make_response(url=f"http://h.test/{i}"))
            names.append(result.location.file)
            assert writer.current_file is None, "each exchange fills a 500-byte file"
    files = warc_files(tmp_path)
    assert [p.name for p in files] == sorted(names) and len(set(names)) == 6
    assert [int(NAME_RE.match(p.name).group(1)) for p in files] == list(range(6))  # type: ignore[union-attr]
    for path in files:
        types = [h["WARC-Type"] for h, _, _ in read_records(path)]
        assert types == ["warcinfo", "response", "request"]


def test_no_file_without_writes_and_writes_after_close_fail(tmp_path: Path) -> None:
    writer = WarcWriter(str(tmp_path))
    writer.flush()
    writer.close()
    writer.close()  # idempotent
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ArchiveError):
        writer.write_exchange(make_response())
    with pytest.raises(ConfigError):
        WarcWriter(str(tmp_path), max_file_bytes=0)
    with pytest.raises(ConfigError):
        WarcWriter(str(tmp_path), compress_level=11)


def test_chunked_and_content_encoding(tmp_path: Path) -> None:
    plain = b"x" * 5000 + b"the end"
    encoded = gzip.compress(plain)
    headers = [
        ("Content-Type", "text/plain"),
        ("Transfer-Encoding", "chunked"),
        ("Content-Encoding", "gzip"),
    ]
    with WarcWriter(str(tmp_path)) as writer:
        result = writer.write_exchange(make_response(body=encoded, headers=headers))
    path = warc_files(tmp_path)[0]
    _, raw, http = read_records(path)[1]
    names = [k.lower() for k, _ in http]
    assert "transfer-encoding" not in names
    assert ("X-Crawler-Transfer-Encoding", "chunked") in http
    assert ("Content-Encoding", "gzip") in http
    assert ("Content-Length", str(len(encoded))) in http
    assert raw == encoded and result.payload_digest == sha256_b32(encoded)
    with path.open("rb") as stream:
        decoded = [r.content_stream().read() for r in ArchiveIterator(stream)]
    assert decoded[1] == plain, "a reader can still decode the kept Content-Encoding"
    assert check_warc(str(path)).ok


def test_content_length_mismatch_keeps_original(tmp_path: Path) -> None:
    headers = [("Content-Length", "999999"), ("X-Evil", "a\r\nWARC-Type: resource")]
    with WarcWriter(str(tmp_path)) as writer:
        writer.write_exchange(make_response(headers=headers, truncated="length"))
        writer.write_exchange(make_response(truncated="time"))
        writer.write_exchange(make_response(truncated="decoded"))
    records = read_records(warc_files(tmp_path)[0])
    resp, _, http = records[1]
    assert ("Content-Length", str(len(HTML))) in http
    assert ("X-Crawler-Content-Length", "999999") in http
    assert ("X-Evil", "a  WARC-Type: resource") in http, "CR/LF cannot inject a header line"
    assert resp["WARC-Type"] == "response"
    truncs = [h.get("WARC-Truncated") for h, _, _ in records if h["WARC-Type"] == "response"]
    assert truncs == ["length", "time", "length"]
    assert check_warc(str(warc_files(tmp_path)[0])).ok


def test_revisit_records(tmp_path: Path) -> None:
    with WarcWriter(str(tmp_path)) as writer:
        original = writer.write_exchange(make_response())
        same = writer.write_revisit(
            make_response(url="http://mirror.test/copy"),
            refers_to_uri="http://example.com/a/b?x=1&y=2",
            refers_to_date=1_700_000_000.25,
            refers_to_record_id="<urn:uuid:00000000-0000-4000-8000-000000000000>",
            profile=REVISIT_IDENTICAL_DIGEST,
        )
        not_mod = writer.write_revisit(
            make_response(body=b"", headers=[("ETag", '"v1"')], status=304),
            refers_to_uri="http://example.com/a/b?x=1&y=2",
            refers_to_date=1_700_000_000.25,
            refers_to_record_id=None,
            profile=REVISIT_NOT_MODIFIED,
            warc_date=1_700_000_100.0,
        )
    assert same.payload_digest == original.payload_digest
    path = warc_files(tmp_path)[0]
    records = read_records(path)
    revisits = [(h, raw, http) for h, raw, http in records if h["WARC-Type"] == "revisit"]
    assert len(revisits) == 2
    (h1, raw1, http1), (h2, raw2, http2) = revisits
    assert h1["WARC-Profile"] == REVISIT_IDENTICAL_DIGEST
    assert h1["WARC-Payload-Digest"] == original.payload_digest
    assert h1["WARC-Refers-To-Target-URI"] == "http://example.com/a/b?x=1&y=2"
    assert h1["WARC-Refers-To-Date"] == "2023-11-14T22:13:20.250000Z"
    assert h1["WARC-Refers-To"] == "<urn:uuid:00000000-0000-4000-8000-000000000000>"
    assert h1["WARC-Target-URI"] == "http://mirror.test/copy"
    assert raw1 == b"" and ("Content-Type", "text/html") in http1, "headers only"
    assert h2["WARC-Profile"] == REVISIT_NOT_MODIFIED and "WARC-Refers-To" not in h2
    assert h2["WARC-Date"] == "2023-11-14T22:15:00.000000Z"
    assert raw2 == b"" and ("ETag", '"v1"') in http2
    data = path.read_bytes()
    loc = not_mod.location
    assert zlib.decompress(data[loc.offset : loc.offset + loc.length], 31).startswith(
        b"WARC/1.1\r\nWARC-Type: revisit\r\n"
    )
    assert check_warc(str(path)).ok


def test_fsspec_memory_url() -> None:
    fs = fsspec.filesystem("memory")
    with WarcWriter("memory://courtier-test/warcs") as writer:
        result = writer.write_exchange(make_response())
    path = f"/courtier-test/warcs/{result.location.file}"
    assert not fs.exists(path + ".open")
    data = fs.cat_file(path)
    loc = result.location
    rec = next(ArchiveIterator(io.BytesIO(data[loc.offset : loc.offset + loc.length])))
    assert rec.raw_stream.read() == HTML
    assert check_warc("memory://" + path).ok
    fs.rm("/courtier-test", recursive=True)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_sha256_digest_is_standard_base32(data: bytes) -> None:
    assert sha256_digest(data) == sha256_b32(data)
    assert sha256_digest(data[:7], data[7:]) == sha256_b32(data)


def test_format_warc_date() -> None:
    assert format_warc_date(0.0) == "1970-01-01T00:00:00.000000Z"
    assert format_warc_date(1_700_000_000.123456) == "2023-11-14T22:13:20.123456Z"


# -- recovery ----------------------------------------------------------------


def crashed_file(root: Path, n: int, tail: bytes | None = None) -> Path:
    """Write n exchanges, flush, then 'die' without close; optionally append a tail."""
    writer = WarcWriter(str(root / "sub"))
    for i in range(n):
        writer.write_exchange(make_response(url=f"http://h.test/{i}"))
    writer.flush()
    path = root / "sub" / (writer.current_file or "")
    marker = path.with_name(path.name + ".open")
    assert marker.exists()
    durable = path.read_bytes()  # what a kill -9 right now would leave on disk
    writer.close()
    assert not marker.exists()
    path.write_bytes(durable)
    marker.touch()
    if tail is not None:
        with path.open("ab") as handle:
            handle.write(tail)
    return path


def half_member() -> bytes:
    comp = zlib.compressobj(2, zlib.DEFLATED, 31)
    noise = random.Random(7).randbytes(4000).replace(b"\n", b"x")  # incompressible, one line
    member = comp.compress(b"WARC/1.1\r\nWARC-Type: response\r\n" + noise) + comp.flush()
    return member[: len(member) // 2]


def test_recover_cuts_partial_tail(tmp_path: Path) -> None:
    path = crashed_file(tmp_path, 4)
    good = path.read_bytes()
    tail = half_member()
    with path.open("ab") as handle:
        handle.write(tail)
    [report] = recover_warc_dir(str(tmp_path))
    assert report.file == f"sub/{path.name}"
    assert report.action == "truncated"
    assert (report.old_size, report.new_size) == (len(good) + len(tail), len(good))
    assert report.records_kept == 1 + 2 * 4
    assert path.read_bytes() == good
    assert not list(tmp_path.rglob("*.open"))
    records = read_records(path)
    assert len(records) == 9 and [h["WARC-Type"] for h, _, _ in records].count("response") == 4
    assert check_warc(str(path)).ok
    assert recover_warc_dir(str(tmp_path)) == [], "nothing left to scan by default"


def test_recover_by_default_scans_only_marked_files(tmp_path: Path) -> None:
    with WarcWriter(str(tmp_path)) as writer:
        writer.write_exchange(make_response())
    [clean] = warc_files(tmp_path)
    with clean.open("ab") as handle:
        handle.write(half_member())
    size = clean.stat().st_size
    assert recover_warc_dir(str(tmp_path)) == []
    assert clean.stat().st_size == size
    [report] = recover_warc_dir(str(tmp_path), full=True)
    assert report.action == "truncated" and report.records_kept == 3
    assert check_warc(str(clean)).ok


def test_recover_never_touches_good_files(tmp_path: Path) -> None:
    path = crashed_file(tmp_path, 3)  # crashed after a flush, but nothing partial
    with WarcWriter(str(tmp_path)) as writer:
        writer.write_exchange(make_response())
    before = {p: p.read_bytes() for p in warc_files(tmp_path)}
    reports = recover_warc_dir(str(tmp_path), full=True)
    assert sorted(r.action for r in reports) == ["ok", "ok"]
    assert {r.file: r.records_kept for r in reports}[f"sub/{path.name}"] == 7
    assert {p: p.read_bytes() for p in warc_files(tmp_path)} == before


def test_recover_removes_files_without_a_record(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    partial = tmp_path / "a" / "x.warc.gz"
    partial.write_bytes(half_member())
    (tmp_path / "a" / "x.warc.gz.open").touch()
    empty = tmp_path / "empty.warc.gz"
    empty.write_bytes(b"")
    (tmp_path / "empty.warc.gz.open").touch()
    (tmp_path / "ghost.warc.gz.open").touch()
    reports = {r.file: r for r in recover_warc_dir(str(tmp_path))}
    assert {name: r.action for name, r in reports.items()} == {
        "a/x.warc.gz": "removed",
        "empty.warc.gz": "removed",
        "ghost.warc.gz": "removed",
    }
    assert list(tmp_path.rglob("*")) == [tmp_path / "a"]


def test_recover_cuts_trailing_garbage_after_power_loss(tmp_path: Path) -> None:
    path = crashed_file(tmp_path, 2)
    good = path.read_bytes()
    with path.open("ab") as handle:
        handle.write(half_member() + b"\0" * 4096)
    [report] = recover_warc_dir(str(tmp_path))
    assert report.action == "truncated" and path.read_bytes() == good


def test_recover_leaves_mid_file_damage_alone(tmp_path: Path) -> None:
    path = crashed_file(tmp_path, 3)
    data = bytearray(path.read_bytes())
    offsets = _member_offsets(bytes(data))
    target = offsets[2] + 20  # inside the third member's deflate data
    data[target] ^= 0xFF
    path.write_bytes(bytes(data))
    [report] = recover_warc_dir(str(tmp_path))
    assert report.action == "corrupt"
    assert path.read_bytes() == bytes(data), "recovery never cuts good records after damage"


def _member_offsets(data: bytes) -> list[int]:
    offsets, pos = [], 0
    while pos < len(data):
        offsets.append(pos)
        dec = zlib.decompressobj(31)
        dec.decompress(data[pos:])
        pos = len(data) - len(dec.unused_data)
    return offsets


def test_recover_missing_root_is_empty(tmp_path: Path) -> None:
    assert recover_warc_dir(str(tmp_path / "nope")) == []


# -- reader checks -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("good.warc", []),
        ("good.warc.gz", []),
        ("bad_len.warc", ["block digest", "HTTP Content-Length 29"]),
        ("tampered.warc", ["block digest", "payload digest"]),
        ("no_recid.warc", ["missing warc-record-id"]),
        ("truncated.warc", ["truncated"]),
    ],
)
def test_check_conformance_files(name: str, expected: list[str]) -> None:
    report = check_warc(str(conformance_file(f"warc/{name}")))
    assert report.records >= 4
    assert len(report.problems) == len(expected), report.problems
    for problem, word in zip(report.problems, expected, strict=True):
        assert word in problem


def _plain_record(http: bytes, payload_digest_of: bytes) -> bytes:
    head = (
        "WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:1>\r\n"
        "WARC-Date: 2024-01-01T00:00:00Z\r\nContent-Type: application/http; msgtype=response\r\n"
        f"WARC-Payload-Digest: {sha256_b32(payload_digest_of)}\r\n"
        f"WARC-Block-Digest: {sha256_b32(http)}\r\nContent-Length: {len(http)}\r\n\r\n"
    )
    return head.encode() + http + b"\r\n\r\n"


def test_check_accepts_both_chunked_digest_conventions(tmp_path: Path) -> None:
    chunked = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    http = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked
    for digest_of, ok in [(b"hello world", True), (chunked, True), (b"other", False)]:
        path = tmp_path / "c.warc"
        path.write_bytes(_plain_record(http, digest_of))
        report = check_warc(str(path))
        assert report.records == 1 and report.ok is ok, report.problems


def test_check_reports_damaged_gzip_and_duplicates(tmp_path: Path) -> None:
    tail = half_member()
    path = crashed_file(tmp_path, 2, tail=tail)
    report = check_warc(str(path))
    assert report.records == 5 and not report.ok
    data = path.read_bytes()
    first = _member_offsets(data[: len(data) - len(tail)])
    dup = tmp_path / "dup.warc.gz"
    dup.write_bytes(data[first[1] : first[2]] * 2)
    assert any("duplicate" in p for p in check_warc(str(dup)).problems)
    with pytest.raises(ArchiveError):
        check_warc(str(tmp_path / "missing.warc.gz"))


def test_every_cut_body_says_why_in_warc_truncated(tmp_path: Path) -> None:
    # issue 14: a body the server cut ("disconnect") or the low-speed limit ended ("slow")
    # is marked with the WARC 1.1 reason; an undecodable but complete payload is not cut
    reasons = ["disconnect", "slow", "encoding", None]
    with WarcWriter(str(tmp_path)) as writer:
        for reason in reasons:
            writer.write_exchange(make_response(truncated=reason))
    records = read_records(warc_files(tmp_path)[0])
    truncs = [h.get("WARC-Truncated") for h, _, _ in records if h["WARC-Type"] == "response"]
    assert truncs == ["disconnect", "time", None, None]


@settings(max_examples=500, deadline=None)
@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False))
def test_warc_date_is_the_strftime_text(ts: float) -> None:
    from datetime import UTC, datetime

    assert format_warc_date(ts) == datetime.fromtimestamp(ts, UTC).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


def test_record_ids_are_distinct_version_4_uuids() -> None:
    import uuid

    from courtier.archive.warc_fields import record_id

    ids = [record_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:200]:
        assert text.startswith("<urn:uuid:") and text.endswith(">")
        parsed = uuid.UUID(text[len("<urn:uuid:"):-1])
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text[len("<urn:uuid:"):-1]
