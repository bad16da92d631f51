"""Random access to archived records: one gzip member read back by its (offset, length).

The writer stores every record as its own gzip member, and the store, the
events and the CDXJ index all name records by ``(file, offset, length)``
relative to the WARC root (a local folder or any fsspec URL). These helpers
read exactly those bytes, so no file is scanned to find a record.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import fsspec
from warcio.archiveiterator import ArchiveIterator

from courtier.archive.warc import WarcLocation
from courtier.core.errors import ArchiveError

__all__ = ["StoredResponse", "read_member", "read_response"]


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """An archived HTTP response as a parser needs it again."""

    url: str
    warc_type: str
    warc_date: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes               # payload with content-encoding removed (as parsed at crawl time)
    payload_digest: str | None

    def header(self, name: str) -> str | None:
        lname = name.lower()
        for key, value in self.headers:
            if key.lower() == lname:
                return value
        return None


def read_member(root: str, location: WarcLocation, fs: Any = None) -> bytes:
    """The gzip member at ``location`` below ``root`` (raises :class:`ArchiveError`)."""
    try:
        if fs is None:
            fs, path = fsspec.core.url_to_fs(root)
        else:
            path = fs._strip_protocol(root)
        with fs.open(f"{str(path).rstrip('/')}/{location.file}", "rb") as handle:
            handle.seek(location.offset)
            data: bytes = handle.read(location.length)
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"cannot read {location.file}@{location.offset}: {exc}") from exc
    if len(data) != location.length:
        raise ArchiveError(f"{location.file}@{location.offset}: record is cut short "
                           f"({len(data)} of {location.length} bytes)")
    return data


def read_response(root: str, location: WarcLocation, fs: Any = None) -> StoredResponse:
    """Parse the ``response`` (or ``revisit``) record at ``location``."""
    member = read_member(root, location, fs)
    try:
        for record in ArchiveIterator(io.BytesIO(member)):
            http = record.http_headers
            if http is None:
                break
            body = record.content_stream().read()
            return StoredResponse(
                url=record.rec_headers.get_header("WARC-Target-URI") or "",
                warc_type=record.rec_type,
                warc_date=record.rec_headers.get_header("WARC-Date") or "",
                status=int(http.get_statuscode() or 0),
                headers=list(http.headers),
                body=body,
                payload_digest=record.rec_headers.get_header("WARC-Payload-Digest"),
            )
    except Exception as exc:  # warcio raises assorted errors on damaged input
        raise ArchiveError(f"{location.file}@{location.offset}: not a WARC record: {exc}") \
            from exc
    raise ArchiveError(f"{location.file}@{location.offset}: no HTTP response record here")
