"""Numbered schema migrations shipped as package data, shared by the SQL stores.

A store package keeps its steps as ``migrations/NNNN_name.sql``; versions run
``0001`` upwards without gaps, so the highest applied step names the schema
version without ambiguity. How a step is applied (transactions, locks) is each
store's own business (``sqlite/_schema.py``, ``postgres/_schema.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from courtier.core.errors import StoreError

__all__ = ["Migration", "load_migrations"]

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered schema step."""

    version: int
    name: str
    sql: str


def load_migrations(package: str, label: str) -> list[Migration]:
    """The migrations of ``package`` (its ``migrations`` folder) in version order.

    Raises :class:`StoreError`, naming ``label`` (e.g. "SQLite"), if the numbering
    has a gap or a duplicate, which would make the schema version ambiguous.
    """
    folder = resources.files(package).joinpath("migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match is not None:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        names = ", ".join(m.name for m in found)
        raise StoreError(f"{label} migrations are not numbered 0001.. without gaps: {names}")
    return found
