"""A digest-only archive for the simulator: no files, same digests and locations."""

from __future__ import annotations

from courtier.archive.warc import ArchivedRecord, WarcLocation
from courtier.archive.warc_fields import sha256_digest
from courtier.fetch.transport import FetchResponse


class DigestOnlyArchive:
    """Implements :class:`~courtier.archive.base.ArchiveWriter` without writing anything."""

    def __init__(self) -> None:
        self.records = 0
        self.flushes = 0

    def write_exchange(self, response: FetchResponse,
                       warc_date: float | None = None) -> ArchivedRecord:
        self.records += 1
        digest = sha256_digest(response.raw_body)
        return ArchivedRecord(WarcLocation("sim.warc.gz", self.records, 1), digest, digest)

    def write_revisit(self, response: FetchResponse, refers_to_uri: str,
                      refers_to_date: float, refers_to_record_id: str | None, profile: str,
                      warc_date: float | None = None) -> ArchivedRecord:
        return self.write_exchange(response, warc_date)

    def flush(self) -> None:
        self.flushes += 1

    async def flush_off_loop(self) -> None:
        self.flush()

    def close(self) -> None:
        return None
