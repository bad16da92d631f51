"""An archive on object storage: WARC segments written to a local spool, then uploaded.

:class:`SpooledArchive` is an :class:`~courtier.archive.base.ArchiveWriter`.
Each worker writes under its own prefix (``owner``): a segment is
``<owner>/courtier-<time>-<serial>-<random>.warc.gz`` both in the spool
(``DATA/spool``) and below the remote root (any fsspec URL, e.g.
``s3://bucket/crawl``), and that relative name is the ``warc_file`` of URL
rows, events and the CDXJ index.

Durability (decision, DESIGN §5): a record counts as durable once it is
fsynced in the spool *and* its segment is recorded in the store as
``spooled`` — which :meth:`settle` does before the worker commits the rows
that point at it. A spool that is lost before its upload is therefore always
noticed: on start, a ``spooled`` or ``uploaded`` segment that is neither in
the spool nor (verified) remotely is marked ``lost`` and its URLs are
requeued (:meth:`Store.requeue_archive_file`), so they are fetched again.

Segments rotate by size (``max_bytes``, 64 MB) and by age (``max_age``,
60 s, checked by :meth:`tick` and on every settle), are uploaded in a thread
once closed, checked (remote size equals local size: ``verified``), and only
then removed from the spool. On start, whatever a crash left in the spool is
first repaired (:func:`recover_warc_dir`) and then uploaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from courtier.archive.recovery import recover_warc_dir
from courtier.archive.warc import OPEN_MARKER_SUFFIX, WARC_SUFFIX, ArchivedRecord, WarcWriter
from courtier.core.clock import Clock, RealClock
from courtier.core.errors import ArchiveError, ConfigError, StoreError
from courtier.core.logs import log_event
from courtier.fetch.transport import FetchResponse
from courtier.store.base import Store

__all__ = ["SEGMENT_AGE", "SEGMENT_BYTES", "SpooledArchive", "is_remote", "storage_options"]

log = logging.getLogger("courtier.archive")

SEGMENT_BYTES = 64 * 1024 * 1024
SEGMENT_AGE = 60.0
UPLOAD_RETRY = 5.0


def is_remote(archive: str | None) -> bool:
    """True for an fsspec URL other than a local path (``file://`` counts as local)."""
    return archive is not None and "://" in archive and not archive.startswith("file://")


def storage_options(archive: str, endpoint: str | None = None,
                    region: str | None = None) -> dict[str, Any]:
    """fsspec options for ``archive``: for ``s3://``, the endpoint and region from the
    flags, else from ``AWS_ENDPOINT_URL`` / ``AWS_DEFAULT_REGION``; credentials come from
    ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (read by the S3 client)."""
    if not archive.startswith(("s3://", "s3a://")):
        return {}
    options: dict[str, Any] = {}
    endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL")
    region = region or os.environ.get("AWS_DEFAULT_REGION")
    if endpoint:
        options["endpoint_url"] = endpoint
    if region:
        options["client_kwargs"] = {"region_name": region}
    return options


class SpooledArchive:
    def __init__(self, remote: str, spool: Path, owner: str, store: Store, *,
                 options: Mapping[str, Any] | None = None, max_bytes: int = SEGMENT_BYTES,
                 max_age: float = SEGMENT_AGE, software: str = "courtier/0.1",
                 clock: Clock | None = None) -> None:
        if not owner or "/" in owner or owner.startswith("."):
            raise ConfigError(f"--archive-prefix {owner!r}: one path segment, not empty")
        try:
            import fsspec  # only for a remote archive: a local one never loads it

            self.fs: Any
            self.fs, root = fsspec.core.url_to_fs(remote, **dict(options or {}))
        except (ImportError, ValueError) as exc:
            raise ConfigError(f"--archive {remote}: {exc}") from None
        self.remote = remote
        self.remote_root = str(root).rstrip("/")
        self.spool, self.owner, self.store = spool, owner, store
        self.max_age = max_age
        self.clock = clock or RealClock()
        (spool / owner).mkdir(parents=True, exist_ok=True)
        self.writer = WarcWriter(str(spool), prefix=f"{owner}/courtier",
                                 max_file_bytes=max_bytes, software=software)
        self._current: str | None = None
        self._opened_at = 0.0
        self._unrecorded: list[str] = []   # opened, not yet recorded as spooled
        self._closed: list[str] = []       # closed, waiting for upload
        self._uploader: asyncio.Task[None] | None = None
        self._retry_at = float("-inf")
        self.uploaded = 0

    # ---- ArchiveWriter ------------------------------------------------------------------

    def write_exchange(self, response: FetchResponse,
                       warc_date: float | None = None) -> ArchivedRecord:
        return self._track(self.writer.write_exchange(response, warc_date))

    def write_revisit(self, response: FetchResponse, refers_to_uri: str,
                      refers_to_date: float, refers_to_record_id: str | None, profile: str,
                      warc_date: float | None = None) -> ArchivedRecord:
        return self._track(self.writer.write_revisit(
            response, refers_to_uri, refers_to_date, refers_to_record_id, profile, warc_date))

    def flush(self) -> None:
        self.writer.flush()

    async def flush_off_loop(self) -> None:
        await self.writer.flush_off_loop()

    def close(self) -> None:
        """Close the open segment (it is uploaded by :meth:`drain`)."""
        self.writer.close()
        self._segment_closed()

    # ---- segments -----------------------------------------------------------------------

    @property
    def backlog(self) -> int:
        """Closed segments not yet uploaded and verified (the upload backlog gauge)."""
        return len(self._closed)

    def _track(self, record: ArchivedRecord) -> ArchivedRecord:
        name = record.location.file
        if name != self._current:
            self._segment_closed()
            self._current, self._opened_at = name, self.clock.now()
            self._unrecorded.append(name)
        if self.writer.current_file is None:  # rotated by size after this write
            self._segment_closed()
        return record

    def _segment_closed(self) -> None:
        if self._current is not None and self._current not in self._closed:
            self._closed.append(self._current)
        self._current = None

    async def settle(self) -> None:
        """Record new segments as ``spooled`` (call after :meth:`flush`, before the commit
        of rows that point at them), rotate an old segment, start uploads."""
        while self._unrecorded:
            name = self._unrecorded[0]
            await self.store.save_segment(name, self.owner, "spooled", self._size(name))
            self._unrecorded.pop(0)
        self.tick()

    def tick(self) -> None:
        """Rotate the open segment once it is ``max_age`` old; upload closed ones."""
        if self._current is not None and self.clock.now() - self._opened_at >= self.max_age \
                and not self._unrecorded:
            self.writer.rotate()
            self._segment_closed()
        if self._closed and (self._uploader is None or self._uploader.done()) \
                and self.clock.now() >= self._retry_at:
            self._uploader = asyncio.create_task(self._upload_all())

    async def run_ticks(self, every: float = 1.0) -> None:
        """Background loop: age rotation and uploads while a crawl is idle."""
        while True:
            await asyncio.sleep(every)
            try:
                await self.settle()
            except StoreError as exc:
                log_event(log, logging.WARNING, "archive_record_failed",
                          "archive: could not record a segment, retrying: %s", exc,
                          reason=str(exc))

    def _size(self, name: str) -> int:
        try:
            return (self.spool / name).stat().st_size
        except OSError:
            return 0

    async def _upload_all(self) -> None:
        while self._closed:
            name = self._closed[0]
            try:
                await self._upload(name)
            except (OSError, ArchiveError, StoreError) as exc:
                log_event(log, logging.ERROR, "archive_upload_failed",
                          "archive: upload of %s failed, retrying later: %s", name, exc,
                          segment=name, reason=str(exc))
                self._retry_at = self.clock.now() + UPLOAD_RETRY
                return
            self._closed.pop(0)

    async def _upload(self, name: str) -> None:
        local = self.spool / name
        size = local.stat().st_size
        remote = f"{self.remote_root}/{name}"
        await self.store.save_segment(name, self.owner, "spooled", size)
        await asyncio.to_thread(self.fs.makedirs, remote.rsplit("/", 1)[0], exist_ok=True)
        await asyncio.to_thread(self.fs.put_file, str(local), remote)
        await self.store.save_segment(name, self.owner, "uploaded", size)
        if await self._remote_size(name) != size:
            raise ArchiveError(f"{remote}: uploaded size differs from the spool's {size}")
        await self.store.save_segment(name, self.owner, "verified", size)
        local.unlink()
        self.uploaded += 1

    async def _remote_size(self, name: str) -> int | None:
        remote = f"{self.remote_root}/{name}"
        with contextlib.suppress(FileNotFoundError):
            self.fs.invalidate_cache(remote)
            info = await asyncio.to_thread(self.fs.info, remote)
            return int(info.get("size") or 0)
        return None

    # ---- start and end ------------------------------------------------------------------

    async def start(self) -> dict[str, int]:
        """Repair the spool, queue what a crash left in it for upload, and requeue the URLs
        of segments whose spool was lost before upload. Returns figures."""
        figures = {"repaired": 0, "leftover": 0, "lost": 0, "requeued": 0}
        figures["repaired"] = len(recover_warc_dir(str(self.spool / self.owner)))
        mine = self.spool / self.owner
        names = {f"{self.owner}/{p.name}" for p in mine.glob(f"*{WARC_SUFFIX}")
                 if not (mine / (p.name + OPEN_MARKER_SUFFIX)).exists()}
        for name in sorted(names):
            self._closed.append(name)
            figures["leftover"] += 1
        for seg in await self.store.segments(self.owner, ("spooled", "uploaded")):
            if seg.name in names:
                continue
            if await self._remote_size(seg.name) == seg.size and seg.size > 0:
                await self.store.save_segment(seg.name, self.owner, "verified", seg.size)
                continue
            figures["lost"] += 1
            figures["requeued"] += await self.store.requeue_archive_file(
                seg.name, self.clock.now())
            await self.store.save_segment(seg.name, self.owner, "lost", seg.size)
            log_event(log, logging.ERROR, "archive_segment_lost",
                      "archive: segment %s was lost before its upload; its URLs are queued "
                      "again", seg.name, segment=seg.name, reason="lost before its upload")
        await self.drain()
        return figures

    async def drain(self) -> None:
        """Upload every closed segment now (at start and at the end of a crawl)."""
        while self._unrecorded:
            name = self._unrecorded.pop(0)
            await self.store.save_segment(name, self.owner, "spooled", self._size(name))
        if self._uploader is not None and not self._uploader.done():
            await self._uploader
        await self._upload_all()
        if self._closed:
            raise ArchiveError(f"{len(self._closed)} WARC segments are still waiting for "
                               f"upload to {self.remote} (kept in {self.spool}; the next start "
                               "uploads them)")
