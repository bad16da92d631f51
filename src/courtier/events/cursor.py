"""A consumer's cursor kept in a small file — the last event id it has handled
(``events --cursor-file``), or a per-shard cursor token (``index --cursor-file``) — and
the names of the cursors registered in the store (``events --consumer``, ``?consumer=``)."""

from __future__ import annotations

import os
from pathlib import Path

from courtier.core.errors import ConfigError
from courtier.core.shard_cursor import TOKEN_PREFIX, ShardCursor

__all__ = ["consumer_name_problem", "load_consumed", "load_cursor", "save_cursor",
           "save_shard_cursor"]

#: the longest name of a registered consumer cursor
MAX_CONSUMER_NAME = 100


def consumer_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a registered cursor (1-100 printable characters, no
    spaces), or None when it can."""
    if not 1 <= len(name) <= MAX_CONSUMER_NAME or not name.isprintable() \
            or any(c.isspace() for c in name):
        return f"give a name of 1-{MAX_CONSUMER_NAME} printable characters, no spaces"
    return None


def load_cursor(path: Path | None, default: int, flag: str = "--cursor-file") -> int:
    """The event id saved in ``path`` (``default`` when there is no file yet)."""
    if path is None or not path.exists():
        return default
    text = path.read_text().strip()
    try:
        return int(text)
    except ValueError:
        hint = (" (a per-shard cursor token, as `courtier index --cursor-file` writes: "
                "give it to `courtier events --cursor`)") if text.startswith(TOKEN_PREFIX) \
            else ""
        raise ConfigError(f"{flag} {path}: not an event id: {text[:40]!r}{hint}") from None


def load_consumed(path: Path, flag: str = "--cursor-file") -> int | ShardCursor:
    """What a consumer's cursor file says it has read: an event id (``events
    --cursor-file``; 0 when there is no file yet) or a per-shard cursor (``index
    --cursor-file``)."""
    text = path.read_text().strip() if path.exists() else ""
    if text.startswith(TOKEN_PREFIX):
        try:
            return ShardCursor.from_token(text)
        except ConfigError as exc:
            raise ConfigError(f"{flag} {path}: {exc}") from None
    return load_cursor(path, 0, flag)


def save_cursor(path: Path, cursor: int) -> None:
    """Write ``cursor`` so that a crash leaves either the old or the new value."""
    _save(path, str(cursor))


def save_shard_cursor(path: Path, cursor: ShardCursor) -> None:
    """Write ``cursor``'s token so that a crash leaves either the old or the new one."""
    _save(path, cursor.token())


def _save(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as handle:
        handle.write(f"{text}\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
