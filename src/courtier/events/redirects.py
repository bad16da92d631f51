"""The redirect chain of a URL: which redirects led to it when it was first found.

A chain is stored with the URL row (``NewUrl.redirect_chain``) as a JSON list
of hops, oldest first, each ``{"url": <canonical URL>, "status": <3xx>}``; the
URL itself is not in it. Redirects are not followed inline, so each hop is its
own fetch; when a 3xx is processed, its target inherits the chain plus the hop
just made. At most :data:`MAX_CHAIN` hops are kept: the first one (the URL that
was linked or seeded) and the latest ones; how many were dropped is
``redirect_hops - len(chain)``, which the events carry as
``redirect_chain_dropped``.
"""

from __future__ import annotations

import json
from typing import Any, Final

#: hops kept per chain (the default --max-redirect-hops is 5)
MAX_CHAIN: Final = 20


def chain_hops(chain: str | None) -> list[dict[str, Any]]:
    """The hops of a stored chain (``[]`` for None or anything unreadable)."""
    if not chain:
        return []
    try:
        hops = json.loads(chain)
    except ValueError:
        return []
    if not isinstance(hops, list):
        return []
    return [h for h in hops if isinstance(h, dict)
            and isinstance(h.get("url"), str) and isinstance(h.get("status"), int)]


def extend_chain(chain: str | None, url: str, status: int) -> str:
    """The chain of a redirect's target: ``chain`` plus the hop from ``url`` (``status``),
    cut to :data:`MAX_CHAIN` hops by dropping the oldest after the first."""
    hops = [*chain_hops(chain), {"url": url, "status": status}]
    if len(hops) > MAX_CHAIN:
        hops = hops[:1] + hops[len(hops) - MAX_CHAIN + 1:]
    return json.dumps(hops, separators=(",", ":"))
