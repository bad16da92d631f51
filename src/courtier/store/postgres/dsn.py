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
