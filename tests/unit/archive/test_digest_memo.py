"""sha256_digest remembers recent large bodies by identity: never a wrong digest, and a
body digested before its write is not digested again."""

from __future__ import annotations

import base64
import hashlib

import pytest

import courtier.archive.warc_fields as warc
from courtier.archive.warc_fields import sha256_digest


def reference(data: bytes) -> str:
    return "sha256:" + base64.b32encode(hashlib.sha256(data).digest()).decode()


def test_remembered_digest_is_only_reused_for_the_same_object() -> None:
    first = b"a" * 10_000
    same_length = b"b" * 10_000
    assert sha256_digest(first) == reference(first)
    assert sha256_digest(first) == reference(first)  # the remembered one
    assert sha256_digest(same_length) == reference(same_length)
    equal_copy = bytes(bytearray(first))
    assert equal_copy is not first and sha256_digest(equal_copy) == reference(first)
    assert sha256_digest(b"a" * 5_000, b"a" * 5_000) == reference(first)


def test_a_mutable_buffer_is_hashed_every_time() -> None:
    buffer = bytearray(b"c" * 10_000)
    assert sha256_digest(buffer) == reference(bytes(buffer))  # type: ignore[arg-type]
    buffer[0] = ord("d")
    assert sha256_digest(buffer) == reference(bytes(buffer))  # type: ignore[arg-type]


def test_bodies_digested_in_between_do_not_evict_a_pending_one(
        monkeypatch: pytest.MonkeyPatch) -> None:

    passes = []
    real = hashlib.sha256

    def counting(*args: bytes) -> object:
        passes.append(1)
        return real(*args)

    monkeypatch.setattr(warc.hashlib, "sha256", counting)
    pending = b"p" * 20_000
    sha256_digest(pending)  # the worker's lookup
    others = [bytes([i % 250]) * 8_000 + i.to_bytes(4, "big") for i in range(100)]
    for body in others:  # the other fetches in flight digest theirs meanwhile
        sha256_digest(body)
    before = len(passes)
    remembered = sha256_digest(pending)  # the writer's: no second pass
    assert len(passes) == before
    assert remembered == reference(pending)
    for i in range(3 * warc._RECENT_LIMIT):  # bounded: old entries go
        sha256_digest(i.to_bytes(4, "big") * 1_200)
    assert len(warc._RECENT_DIGESTS) <= warc._RECENT_LIMIT
