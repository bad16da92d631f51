"""The client side of TLS: one verifying :class:`ssl.SSLContext` per transport.

Certificates are verified against the system trust store (OpenSSL's default
paths, which honour ``SSL_CERT_FILE``/``SSL_CERT_DIR``), plus the private CA of
``--ca-file`` when given. Host names are checked and TLS 1.2 is the oldest
protocol offered. One context serves every connection of a transport (the trust
store is loaded once). Handshakes are saved by keeping connections alive in the
transport's pool, and a *new* connection resumes the server's last TLS session:
asyncio (and uvloop) build each connection's TLS layer with the context's
``wrap_bio``, which :class:`ResumingContext` gives the session it last saw for that
server name (:meth:`ResumingContext.remember`, called by the transport once a
response is read: a TLS 1.3 ticket arrives after the handshake). A shared context
alone does not resume (measured). The sessions kept are bounded
(:data:`SESSIONS_KEPT` names, least recently remembered dropped first).

A ``--ca-file`` that cannot be read or holds no PEM certificate is a
:class:`~courtier.core.errors.ConfigError` naming the flag and the file.
"""

from __future__ import annotations

import ssl
from collections import OrderedDict
from pathlib import Path
from typing import Any

from courtier.core.errors import ConfigError

CA_FLAG = "--ca-file"
#: server names whose last TLS session is kept for resumption
SESSIONS_KEPT = 4096


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


class ResumingContext(ssl.SSLContext):
    """A client context that offers each new connection the last TLS session saved
    for its server name (see the module docstring)."""

    # ssl.SSLContext builds its instances in __new__; the session store is made lazily
    _sessions: OrderedDict[str, ssl.SSLSession] | None = None

    def remember(self, server_name: str, session: ssl.SSLSession | None) -> None:
        """Keep ``session`` as the one to offer ``server_name``'s next connection."""
        if session is None or not server_name:
            return
        sessions = self._sessions
        if sessions is None:
            sessions = self._sessions = OrderedDict()
        sessions[server_name] = session
        sessions.move_to_end(server_name)
        while len(sessions) > SESSIONS_KEPT:
            sessions.popitem(last=False)

    def session_for(self, server_name: str | None) -> ssl.SSLSession | None:
        """The session kept for ``server_name`` (None: none)."""
        if server_name is None or self._sessions is None:
            return None
        return self._sessions.get(server_name)

    def wrap_bio(self, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO,
                 server_side: bool = False, server_hostname: str | bytes | None = None,
                 session: ssl.SSLSession | None = None) -> Any:
        if session is None and not server_side and isinstance(server_hostname, str):
            session = self.session_for(server_hostname)
        return super().wrap_bio(incoming, outgoing, server_side=server_side,
                                server_hostname=server_hostname, session=session)


def client_context(ca_file: Path | None = None) -> ResumingContext:
    """A verifying client context: system trust store (+ ``ca_file``), host names
    checked, TLS ≥ 1.2, sessions resumed per server name."""
    context = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    if ca_file is not None:
        context.load_verify_locations(cadata=read_ca_file(ca_file))
    return context
