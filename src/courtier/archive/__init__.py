"""WARC archive: the writer (gzip member per record, rotation, revisit records),
crash recovery of partly written files, and record-level checks."""

from courtier.archive.recovery import CheckReport, RecoveryReport, check_warc, recover_warc_dir
from courtier.archive.warc import (
    REVISIT_IDENTICAL_DIGEST,
    REVISIT_NOT_MODIFIED,
    ArchivedRecord,
    WarcLocation,
    WarcWriter,
)
from courtier.archive.warc_fields import format_warc_date, sha256_digest

__all__ = [
    "REVISIT_IDENTICAL_DIGEST",
    "REVISIT_NOT_MODIFIED",
    "ArchivedRecord",
    "CheckReport",
    "RecoveryReport",
    "WarcLocation",
    "WarcWriter",
    "check_warc",
    "format_warc_date",
    "recover_warc_dir",
    "sha256_digest",
]
