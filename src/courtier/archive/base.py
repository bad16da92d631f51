"""The ArchiveWriter contract (WARC writer, or a digest-only writer in the simulator)."""

from __future__ import annotations

from typing import Protocol

from courtier.archive.warc import ArchivedRecord
from courtier.fetch.transport import FetchResponse


class ArchiveWriter(Protocol):
    """Writes fetched exchanges durably.

    ``write_exchange`` returns where the response record is and its digests;
    the record need not be durable until ``flush`` (or ``flush_off_loop``, its form
    that runs the disk's sync in a thread) returns. A caller commits rows that
    reference records only after one of them. Errors raise
    :class:`courtier.core.errors.ArchiveError`; a failed write leaves earlier
    records intact.
    """

    def write_exchange(self, response: FetchResponse,
                       warc_date: float | None = None) -> ArchivedRecord: ...

    def write_revisit(self, response: FetchResponse, refers_to_uri: str,
                      refers_to_date: float, refers_to_record_id: str | None, profile: str,
                      warc_date: float | None = None) -> ArchivedRecord: ...

    def flush(self) -> None: ...

    async def flush_off_loop(self) -> None: ...

    def close(self) -> None: ...
