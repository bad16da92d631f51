"""Hosts that move their http URLs to https: the rule that notices them, and the twin.

An http host *upgrades* when one of its URLs (a page or robots.txt) answers a permanent
redirect (301 or 308) whose Location is the very same URL on https: same host name,
same path and query. The https host key it names (``https://h``, or ``https://h:8443``
when the redirect names a port) is remembered for the http host key (the frontier's
host state and the store's hosts row, so a restart or the shard's next owner keeps it).
From then on none of the host's http URLs is requested: each is settled as a redirect
to its https twin (the same path and query under that https host key) without a request,
with ``error_kind`` :data:`UPGRADE_KIND`, and the twin is taken in like the target of a
redirect (docs/fetch.md, "http hosts that move to https").

Pure functions on canonical URLs; no I/O.
"""

from __future__ import annotations

from typing import Final

from courtier.core.errors import InvalidURL
from courtier.core.urls import canonicalize
from courtier.frontier.scheduler import UPGRADE_DENIAL

#: the ``error_kind`` (and frontier denial reason) of an http URL settled as a redirect to
#: its https twin without a request
UPGRADE_KIND: Final = UPGRADE_DENIAL
#: redirects that teach the rule: permanent ones only (a 302/307 may be a login detour)
PERMANENT_REDIRECTS: Final = frozenset({301, 308})
#: the status recorded for the hop to the twin in its ``redirect_chain``: what browsers
#: show for an upgrade they make themselves ("307 Internal Redirect"); no server sent it
UPGRADE_HOP_STATUS: Final = 307


def upgrade_target(url: str, host_key: str, status: int, location: str | None) -> str | None:
    """The https host key ``host_key`` upgrades to, when ``url`` (a canonical URL of that
    http host) answered ``status`` with ``location`` as its very same URL on https; else
    None (not http, not a permanent redirect, another host name, another path or query,
    a Location that does not parse)."""
    if status not in PERMANENT_REDIRECTS or not location \
            or not host_key.startswith("http://") or not url.startswith(host_key + "/"):
        return None
    try:
        source = canonicalize(url)
        target = canonicalize(location, base=url)
    except InvalidURL:
        return None
    if target.scheme != "https" or target.host != source.host \
            or target.path_and_query != source.path_and_query:
        return None
    return target.host_key


def https_twin(url: str, host_key: str, https_host_key: str) -> str:
    """``url`` (a canonical URL of the http host ``host_key``) under ``https_host_key``."""
    return https_host_key + url[len(host_key):]
