"""Defences of the admin API against web pages the operator happens to visit.

A browser lets any page send requests to ``http://127.0.0.1:8790``; the API
must not let such a page read crawl state or change what is crawled. Pure
checks (no I/O), applied by the server's middleware to every request:

* **Host** (DNS rebinding): a page on ``evil.example`` can re-point its own
  name at 127.0.0.1, and its requests then reach the API as same-origin, with
  ``Host: evil.example``. Without a token, only loopback Host values
  (``127.0.0.1``, ``[::1]``, ``localhost``, any port) and the names the
  operator lists (``--api-allowed-host``) are answered; anything else gets
  421. With a token the token is the defence (a page cannot know it), and
  listed names still pass.
* **Origin**: when a request carries ``Origin`` (browsers add it to every
  cross-origin request and to same-origin writes), its ``host[:port]`` must
  be the request's own Host, or a listed name; otherwise 403. ``Origin: null``
  (sandboxed frames, files) is refused too.
* **Content-Type**: every write (POST, PUT, PATCH, and a DELETE with a body)
  must say ``application/json`` (415 otherwise). A page can send a
  cross-site ``text/plain`` POST without a preflight; it cannot send
  ``application/json`` without one, and the API never answers preflights
  with CORS permission, so PUT/DELETE stay preflighted and refused.
* Every answer carries ``Content-Security-Policy: frame-ancestors 'none'``
  and ``X-Frame-Options: DENY`` (no framing of the dashboard: clickjacking).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection
from urllib.parse import urlsplit

from courtier.core.authority import split_authority

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost"})


def is_loopback_name(host: str) -> bool:
    """``localhost`` or a loopback IP literal (host as :func:`split_authority` gives it)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize_allowed(names: Collection[str]) -> frozenset[str]:
    """The operator's ``--api-allowed-host`` values as bare lower-case host names
    (a port given with a name is ignored: the API listens on one port anyway)."""
    out = set()
    for name in names:
        parts = split_authority(name)
        if parts is not None:
            out.add(parts[0])
    return frozenset(out)


def host_refusal(host_header: str | None, allowed: frozenset[str], token: bool) -> str | None:
    """Why the Host header is refused (answered 421), or None when it is accepted."""
    if host_header is None:
        return None  # not a browser (every browser sends Host); nothing to rebind
    parts = split_authority(host_header)
    if parts is None:
        return f"malformed Host header {host_header!r}"
    host = parts[0]
    if host in allowed or token or is_loopback_name(host):
        return None
    return (f"Host {host!r} is not served: without an API token only loopback names "
            f"and --api-allowed-host names are answered (DNS-rebinding defence)")


def origin_refusal(origin: str | None, host_header: str | None,
                   allowed: frozenset[str]) -> str | None:
    """Why the Origin header is refused (answered 403), or None when absent or accepted."""
    if origin is None:
        return None
    if origin.strip().lower() == "null":
        return "Origin null is not accepted"
    try:
        parts = urlsplit(origin.strip())
        authority = parts.netloc
    except ValueError:
        return f"malformed Origin {origin!r}"
    if parts.scheme not in ("http", "https") or not authority:
        return f"malformed Origin {origin!r}"
    given = split_authority(authority)
    if given is None:
        return f"malformed Origin {origin!r}"
    if given[0] in allowed:
        return None
    own = split_authority(host_header) if host_header is not None else None
    if own is not None and own[0] == given[0] and _port(own, parts.scheme) == _port(
        given, parts.scheme
    ):
        return None
    return f"cross-origin request from {origin!r} refused"


def _port(parts: tuple[str, str | None], scheme: str) -> str:
    return parts[1] or ("443" if scheme == "https" else "80")


def content_type_refusal(method: str, content_type: str | None, has_body: bool) -> str | None:
    """Why a write's Content-Type is refused (answered 415), or None."""
    if method not in WRITE_METHODS or (method == "DELETE" and not has_body):
        return None
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind == "application/json":
        return None
    shown = content_type or "none"
    return f"a {method} needs Content-Type: application/json (got {shown})"
