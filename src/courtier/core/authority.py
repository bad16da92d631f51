"""``host[:port]`` authorities as written in a Host header or a flag (no URL around them).

Kept apart from :mod:`courtier.core.urls` so that reading the configuration does not load
the URL parser and the public suffix list."""

from __future__ import annotations


def split_authority(authority: str) -> tuple[str, str | None] | None:
    """``host[:port]`` → (lower-case host without brackets or trailing dot, port text),
    or None when it is not an authority."""
    text = authority.strip().lower()
    if not text or any(c in text for c in "/@\\ \t?#"):
        return None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[1:end], text[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:] if rest else None
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            host, port_text = text, ""
        elif ":" in host:
            return None  # an unbracketed IPv6 address is not a Host value
        port = port_text if sep else None
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        return None
    host = host.rstrip(".")
    return (host, port) if host else None
