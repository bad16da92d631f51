"""The simulator judge's own reading of robots.txt and Retry-After.

Written separately from :mod:`courtier.politeness` on purpose: a judge that
shared the crawler's parser would share its bugs. It is minimal — enough for
what the simulated web serves — and follows RFC 9309 and RFC 9110 directly:

* groups start at one or more ``User-agent`` lines; the group whose agent
  equals the crawler's product token (case-insensitive) applies, several such
  groups merged; otherwise the ``*`` group(s); otherwise everything is allowed;
* ``Allow``/``Disallow`` patterns with ``*`` (any run of characters) and a
  trailing ``$`` (end of path); the longest matching pattern wins, ``Allow``
  on a tie; an empty ``Disallow`` means nothing; ``/robots.txt`` is always
  allowed;
* ``Crawl-delay`` of the applicable group (a non-negative number);
* ``Retry-After``: delta-seconds (digits only) or an IMF-fixdate.

Known differences from the crawler's parser, none of which the simulated
web exercises: no percent-encoding normalisation of paths or patterns, no
size limit, no agent prefix matching (``courtierbot`` does not select a
``courtier`` group here), no ``Sitemap``/other extensions, and Retry-After
in the obsolete RFC 850 and asctime date formats is not understood (the
judge then enforces nothing for that answer, so it never invents a
violation).
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Group:
    agents: list[str] = field(default_factory=list)
    rules: list[tuple[bool, str]] = field(default_factory=list)  # (allow, pattern)
    crawl_delay: float | None = None


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    regex = ".*".join(re.escape(piece) for piece in body.split("*"))
    return re.compile(regex + ("$" if anchored else ""))


@dataclass(slots=True)
class ReferenceRobots:
    """One robots.txt as the judge reads it."""

    groups: list[_Group]

    @classmethod
    def parse(cls, body: bytes) -> ReferenceRobots:
        groups: list[_Group] = []
        current: _Group | None = None
        in_agents = False
        for raw in body.decode("utf-8", "replace").splitlines():
            line = raw.split("#", 1)[0].strip()
            if ":" not in line:
                continue
            key, value = (part.strip() for part in line.split(":", 1))
            key = key.lower()
            if key == "user-agent":
                if current is None or not in_agents:
                    current = _Group()
                    groups.append(current)
                current.agents.append(value.lower())
                in_agents = True
                continue
            in_agents = False
            if current is None:
                continue
            if key in ("allow", "disallow") and value:
                current.rules.append((key == "allow", value))
            elif key == "crawl-delay":
                try:
                    delay = float(value)
                except ValueError:
                    continue
                if delay >= 0:
                    current.crawl_delay = delay
        return cls(groups)

    def _applicable(self, token: str) -> list[_Group]:
        token = token.lower()
        mine = [g for g in self.groups if token in g.agents]
        return mine or [g for g in self.groups if "*" in g.agents]

    def allowed(self, token: str, path: str) -> bool:
        if path == "/robots.txt":
            return True
        best_len, best_allow = -1, True
        for group in self._applicable(token):
            for allow, pattern in group.rules:
                if _pattern_regex(pattern).match(path) is None:
                    continue
                length = len(pattern)
                if length > best_len or (length == best_len and allow):
                    best_len, best_allow = length, allow
        return best_allow

    def crawl_delay(self, token: str) -> float | None:
        delays = [g.crawl_delay for g in self._applicable(token) if g.crawl_delay is not None]
        return max(delays) if delays else None


_IMF_FIXDATE = "%a, %d %b %Y %H:%M:%S GMT"


def retry_after_until(value: str, now: float) -> float | None:
    """The POSIX time a Retry-After value asks to wait until (None: not understood)."""
    text = value.strip()
    if text.isdigit():
        return now + int(text)
    try:
        parsed = time.strptime(text, _IMF_FIXDATE)
    except ValueError:
        return None
    return max(now, float(calendar.timegm(parsed)))
