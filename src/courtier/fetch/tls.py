"""The client side of TLS: one verifying :class:`ssl.SSLContext` per transport.

Certificates are verified against the system trust store (OpenSSL's default
paths, which honour ``SSL_CERT_FILE``/``SSL_CERT_DIR``), plus the private CA of
``--ca-file`` when given. Host names are checked and TLS 1.2 is the oldest
protocol offered. One context serves every connection of a transport (the trust
store is loaded once). Handshakes are saved by keeping connections alive in the
transport's pool; a *new* connection runs a full handshake: Python's asyncio
gives a client connection no way to resume an earlier TLS session (no
``session=`` argument; a shared context alone does not resume, measured).

A ``--ca-file`` that cannot be read or holds no PEM certificate is a
:class:`~courtier.core.errors.ConfigError` naming the flag and the file.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from courtier.core.errors import ConfigError

CA_FLAG = "--ca-file"


def read_ca_file(path: Path) -> str:
    """The PEM text of ``path`` checked to load as CA certificates (ConfigError if not)."""
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not a PEM text file"
        raise ConfigError(f"{CA_FLAG} {path}: cannot read the CA certificate: {reason}") from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise ConfigError(f"{CA_FLAG} {path}: no PEM certificate "
                          "('-----BEGIN CERTIFICATE-----') in the file")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=text)
    except ssl.SSLError as exc:
        raise ConfigError(f"{CA_FLAG} {path}: not a valid PEM certificate: "
                          f"{exc.reason or exc}") from None
    return text


def client_context(ca_file: Path | None = None) -> ssl.SSLContext:
    """A verifying client context: system trust store (+ ``ca_file``), host names
    checked, TLS ≥ 1.2."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    if ca_file is not None:
        context.load_verify_locations(cadata=read_ca_file(ca_file))
    return context
