"""Tracking parameters: query parameters that name a campaign or a click, not a page.

``?utm_source=news`` and ``?fbclid=…`` variants of one page would each be fetched as a
page of their own. The intake removes them from every URL it takes in (links, seeds,
sitemap entries, redirect targets) after :func:`~courtier.core.urls.canonicalize`,
whose canonical form stays as it is (``canonicalize`` itself drops no parameter).

The default list (:data:`DEFAULT_TRACKING_PARAMS`) is documented in docs/fetch.md.
``--strip-param NAME`` adds a name, ``--keep-param NAME`` keeps one the list would
remove; either may be scoped to a domain and its subdomains as ``DOMAIN:NAME``. A name
ending in ``*`` is a prefix (``utm_*``). Names are compared lower-cased. A scoped rule
beats an unscoped one, and for one scope ``keep`` beats ``strip``. No other parameter is
dropped, and the order and spelling of the others are kept (an empty query is dropped
with its ``?``). Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from courtier.core.errors import ConfigError
from courtier.core.urls import CanonicalUrl, make_url_key

#: removed unless kept: analytics campaign tags and ad-click identifiers
DEFAULT_TRACKING_PARAMS: Final = (
    "utm_*",            # Urchin / Google Analytics campaign tags (utm_source, utm_medium…)
    "gclid", "gclsrc", "dclid", "gbraid", "wbraid",  # Google Ads clicks
    "fbclid",           # Facebook clicks
    "msclkid",          # Microsoft Advertising clicks
    "twclid",           # X (Twitter) clicks
    "ttclid",           # TikTok clicks
    "li_fat_id",        # LinkedIn clicks
    "yclid", "ysclid",  # Yandex clicks
    "igshid",           # Instagram shares
    "mc_cid", "mc_eid",  # Mailchimp campaign and recipient
    "_hsenc", "_hsmi",  # HubSpot e-mails
    "mkt_tok",          # Marketo e-mails
    "oly_anon_id", "oly_enc_id",  # Omeda
    "vero_id", "vero_conv",  # Vero e-mails
)

_NAME_RE: Final = re.compile(r"[^\s&=?#:]+")
_DOMAIN_RE: Final = re.compile(r"[a-z0-9.-]+")


@dataclass(frozen=True, slots=True)
class _Names:
    """Exact names and prefixes (from ``name*``)."""

    exact: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()

    @classmethod
    def of(cls, names: Iterable[str]) -> _Names:
        names = list(names)
        return cls(frozenset(n for n in names if not n.endswith("*")),
                    tuple(n[:-1] for n in names if n.endswith("*")))

    def __contains__(self, name: object) -> bool:
        assert isinstance(name, str)
        return name in self.exact or any(name.startswith(p) for p in self.prefixes)

    def __bool__(self) -> bool:
        return bool(self.exact or self.prefixes)


@dataclass(slots=True)
class TrackingParams:
    """Which query parameters to remove, per host; counts what it removed.

    ``removed`` is the number of parameters removed so far (the metric
    ``courtier_tracking_params_removed_total`` reads it).
    """

    strip: _Names = field(default_factory=lambda: _Names.of(DEFAULT_TRACKING_PARAMS))
    keep: _Names = field(default_factory=_Names)
    #: domain → (strip, keep) of rules scoped to it
    scoped: dict[str, tuple[_Names, _Names]] = field(default_factory=dict)
    removed: int = 0

    @classmethod
    def from_specs(cls, strip: Iterable[str] = (), keep: Iterable[str] = ()) -> TrackingParams:
        """The default list plus ``--strip-param`` values, minus ``--keep-param`` ones;
        ConfigError naming the flag for a malformed value."""
        plain_strip: list[str] = list(DEFAULT_TRACKING_PARAMS)
        plain_keep: list[str] = []
        by_domain: dict[str, tuple[list[str], list[str]]] = {}
        for flag, values, plain, side in (("--strip-param", strip, plain_strip, 0),
                                          ("--keep-param", keep, plain_keep, 1)):
            for value in values:
                domain, name = parse_param_spec(value, flag)
                if domain is None:
                    plain.append(name)
                else:
                    by_domain.setdefault(domain, ([], []))[side].append(name)
        return cls(strip=_Names.of(plain_strip), keep=_Names.of(plain_keep),
                   scoped={d: (_Names.of(s), _Names.of(k)) for d, (s, k) in by_domain.items()})

    def _rules_for(self, host: str) -> tuple[_Names, _Names] | None:
        if not self.scoped:
            return None
        name = host
        while True:
            rules = self.scoped.get(name)
            if rules is not None:
                return rules
            dot = name.find(".")
            if dot < 0:
                return None
            name = name[dot + 1:]

    def _removes(self, name: str, scoped: tuple[_Names, _Names] | None) -> bool:
        name = name.lower()
        if scoped is not None:
            if name in scoped[1]:
                return False
            if name in scoped[0]:
                return True
        return name in self.strip and name not in self.keep

    def clean(self, url: CanonicalUrl) -> CanonicalUrl:
        """``url`` without its tracking parameters (itself when it has none)."""
        text = url.url
        mark = text.find("?")
        if mark < 0:
            return url
        scoped = self._rules_for(url.host)
        parts = text[mark + 1:].split("&")
        kept = [p for p in parts if not self._removes(p.partition("=")[0], scoped)]
        if len(kept) == len(parts):
            return url
        self.removed += len(parts) - len(kept)
        cleaned = text[:mark] + ("?" + "&".join(kept) if kept else "")
        return dataclasses.replace(url, url=cleaned,
                                   url_key=make_url_key(url.host_key, cleaned))


def parse_param_spec(value: str, flag: str) -> tuple[str | None, str]:
    """``NAME`` → (None, name); ``DOMAIN:NAME`` → (domain, name); lower-cased."""
    domain, sep, name = value.strip().lower().rpartition(":")
    if not _NAME_RE.fullmatch(name) or name == "*" or (
            sep and not _DOMAIN_RE.fullmatch(domain.strip("."))):
        raise ConfigError(f"{flag} {value!r}: expected NAME, NAME* or DOMAIN:NAME "
                          "(e.g. utm_source, utm_*, shop.example:ref)")
    return (domain.strip(".") if sep else None), name
