"""Per-URL value: how much a fresh copy of a page is worth to the crawl's users.

Pure arithmetic, no I/O. ``docs/freshness.md`` §1 explains the model. A value is
a non-negative float; 1.0 is an ordinary page one link from a seed. It comes
from one of two places:

* **Given from outside** (``seed add --value``, ``PUT /v1/urls/values``,
  ``courtier url import-values FILE``): stored in ``urls.value`` and used as is.
  A search engine feeding back its own page scores does this.
* **Derived** when nothing was given (:func:`default_value`), from what the
  crawl knows about the URL when it is first fetched: its depth from a seed,
  the intake priority (seeds and ``seed add --priority`` rank higher, sitemap
  entries rank by their ``<priority>``), its in-link count where the caller
  knows one, and the host's value factor (``policy set HOST --value``). The
  derived value is stored at the first fetch, so it is computed once.

Members of a duplicate group that are not its canonical copy (a page whose
rel=canonical names another URL, or a near-duplicate of a page already seen)
are planned with :data:`NON_CANONICAL_FACTOR` times their value: they are
refreshed less often, but still fetched and their out-links still followed.
The stored value is left alone, so a page that stops being a copy recovers.
"""

from __future__ import annotations

import math

from courtier.core.errors import ConfigError

__all__ = [
    "DEPTH_DECAY",
    "MAX_VALUE",
    "NON_CANONICAL_FACTOR",
    "default_value",
    "effective_value",
    "parse_value",
]

#: value lost per link hop from a seed (0.8^depth, floored at MIN_DERIVED)
DEPTH_DECAY = 0.8
MIN_DERIVED = 0.05
#: share of its value a non-canonical duplicate is planned with
NON_CANONICAL_FACTOR = 0.25
#: values above this are refused (a typo in an import file should not swamp the crawl)
MAX_VALUE = 1e6


def default_value(depth: int, priority: int, inlinks: int = 0, host_factor: float = 1.0) -> float:
    """The derived value of a URL nobody gave a value to.

    ``value = max(0.05, 0.8^depth) · (1 + priority / 10) · (1 + log2(1 + inlinks) / 4)
    · host_factor``: a seed (depth 0, priority 10) is worth 2, a page one hop away 0.8,
    ten hops 0.11; a page with 15 known in-links is worth twice as much as one with none.
    """
    depth_part = max(MIN_DERIVED, DEPTH_DECAY ** max(0, depth))
    priority_part = 1.0 + max(0, priority) / 10.0
    link_part = 1.0 + math.log2(1.0 + max(0, inlinks)) / 4.0
    return depth_part * priority_part * link_part * max(0.0, host_factor)


def effective_value(value: float, non_canonical: bool) -> float:
    """The value the planner uses: lowered for a non-canonical member of a duplicate group."""
    return value * NON_CANONICAL_FACTOR if non_canonical else value


def parse_value(text: object, where: str) -> float:
    """A value given from outside (a string or number): finite, 0 … MAX_VALUE.

    Raises :class:`ConfigError` naming ``where`` (a file line, a flag, a field).
    """
    if isinstance(text, bool):
        raise ConfigError(f"{where}: value must be a number, not {text!r}")
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: value {text!r} is not a number") from None
    if not math.isfinite(value) or not 0.0 <= value <= MAX_VALUE:
        raise ConfigError(f"{where}: value must be between 0 and {MAX_VALUE:g}, got {text!r}")
    return value
