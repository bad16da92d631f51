"""sha256_digest remembers the last large body by identity: never a wrong digest."""

from __future__ import annotations

import base64
import hashlib

from courtier.archive.warc import sha256_digest


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
