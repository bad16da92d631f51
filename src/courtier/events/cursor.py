"""A consumer's cursor (the last event id it has handled) kept in a small file, and the
names of the cursors registered in the store (``events --consumer``, ``?consumer=``)."""

from __future__ import annotations

import os
from pathlib import Path

from courtier.core.errors import ConfigError

__all__ = ["consumer_name_problem", "load_cursor", "save_cursor"]

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
        raise ConfigError(f"{flag} {path}: not an event id: {text[:40]!r}") from None


def save_cursor(path: Path, cursor: int) -> None:
    """Write ``cursor`` so that a crash leaves either the old or the new value."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as handle:
        handle.write(f"{cursor}\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
