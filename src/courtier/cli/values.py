"""``courtier url import-values FILE``: set URL values from ``url<TAB>value`` lines.

The whole file is checked first (every bad line is reported with its number, and
then nothing is applied), then sent in batches of
:data:`~courtier.api.freshness.MAX_VALUES_PER_CALL` to ``PUT /v1/urls/values`` (of
``--api``, or in-process over the store). Blank lines and ``#`` comments are skipped.
URLs the crawl does not know are counted, not added.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from courtier.cli.call import call
from courtier.core.errors import ConfigError, InvalidURL

#: bad lines listed in the error before the rest are only counted
MAX_REPORTED = 20


def read_values(path: Path) -> list[tuple[str, float]]:
    """The file's (url, value) pairs; ConfigError listing the bad lines."""
    from courtier.core.urls import canonicalize
    from courtier.frontier.value import parse_value

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") \
            from None
    pairs: list[tuple[str, float]] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        url, sep, raw = line.rstrip("\r").partition("\t")
        where = f"{path}:{number}"
        try:
            if not sep:
                raise ConfigError(f"{where}: expected URL<TAB>VALUE")
            value = parse_value(raw.strip(), where)
            canonicalize(url.strip())
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        except InvalidURL as exc:
            problems.append(f"{where}: not a crawlable URL ({exc})")
            continue
        pairs.append((url.strip(), value))
    if problems:
        more = len(problems) - MAX_REPORTED
        listed = "\n  ".join(problems[:MAX_REPORTED])
        tail = f"\n  … and {more} more" if more > 0 else ""
        raise ConfigError(f"{len(problems)} bad line(s), nothing imported:\n  {listed}{tail}")
    return pairs


async def import_values(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    """Send the file in batches; (HTTP-like status, {"updated", "unknown", "lines"})."""
    from courtier.api.freshness import MAX_VALUES_PER_CALL

    if args.file is None:
        raise ConfigError("url import-values: give the FILE of url<TAB>value lines")
    pairs = read_values(args.file)
    totals = {"lines": len(pairs), "updated": 0, "unknown": 0}
    for start in range(0, len(pairs), MAX_VALUES_PER_CALL):
        batch = pairs[start:start + MAX_VALUES_PER_CALL]
        body = {"values": [{"url": url, "value": value} for url, value in batch]}
        status, answer = await call(args, "PUT", "/v1/urls/values", body)
        if not 200 <= status < 300:
            return status, {**totals, "error": answer.get("error", answer)}
        totals["updated"] += int(answer["updated"])
        totals["unknown"] += int(answer["unknown"])
    return 200, totals
