"""Store URLs: which values select PostgreSQL, and how to show one without its password."""

from __future__ import annotations

from urllib.parse import urlsplit

POSTGRES_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(value: str) -> bool:
    return urlsplit(value).scheme.lower() in POSTGRES_SCHEMES


def describe_dsn(dsn: str) -> str:
    """``host:port/database`` (user included, password never) for messages."""
    try:
        parts = urlsplit(dsn)
        host = parts.hostname or "localhost"
        port = parts.port or 5432
    except ValueError:
        return "(unparseable URL)"
    user = f"{parts.username}@" if parts.username else ""
    database = parts.path.lstrip("/") or "(default database)"
    return f"{user}{host}:{port}/{database}"


#: seconds a transaction may wait for its client between two statements before the server
#: ends it (``idle_in_transaction_session_timeout``). A worker stopped mid-transaction
#: (SIGSTOP, swap, a frozen VM) would otherwise hold its row locks — lease rows, per-IP
#: slots, budget counts — and every other worker's renewal would wait on them until its
#: own leases lapsed: one paused worker fenced the whole cluster. courtier's transactions
#: never wait on their client for long (statements back to back), so the bound only ends
#: stalled ones; the stalled worker's next call fails and is retried, as after any cut.
STALLED_TRANSACTION_TIMEOUT = 5.0
