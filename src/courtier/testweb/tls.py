"""HTTPS for the test web: a private CA made at run time, and server contexts.

Uses ``trustme`` (a dev/test dependency, imported only here)::

    ca = TestCA()
    ca_file = ca.write_pem(tmp_path / "ca.pem")      # what --ca-file is given
    async with TestWebServer(spec, ssl_context=ca.server_context(spec.names())) as s:
        ...                                          # s.web.seeds() are https:// URLs

:meth:`TestCA.server_context` also makes the certificates a test needs to fail
on purpose: expired (``not_after`` in the past), for another name, or a server
limited to an old protocol (``max_version``). Nothing here sends traffic.
"""

from __future__ import annotations

import datetime
import ssl
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from courtier.core.errors import ConfigError


def _trustme() -> ModuleType:
    try:
        import trustme
    except ImportError:  # pragma: no cover - the dev extra installs it
        raise ConfigError("the HTTPS test web needs the 'trustme' package "
                          "(pip install -e '.[dev]')") from None
    return trustme


class TestCA:
    """A throw-away certificate authority; its key never leaves memory."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self._ca = _trustme().CA()

    @property
    def pem(self) -> bytes:
        """The CA certificate (PEM): the file a crawler is given with ``--ca-file``."""
        return bytes(self._ca.cert_pem.bytes())

    def write_pem(self, path: Path) -> Path:
        """Write :attr:`pem` to ``path`` and return it."""
        path.write_bytes(self.pem)
        return path

    def server_context(
        self,
        names: Iterable[str],
        *,
        not_before: datetime.datetime | None = None,
        not_after: datetime.datetime | None = None,
        min_version: ssl.TLSVersion | None = None,
        max_version: ssl.TLSVersion | None = None,
    ) -> ssl.SSLContext:
        """A server context whose certificate (signed by this CA) names ``names``
        and is valid from ``not_before`` to ``not_after`` (default: now to a year on)."""
        identities = [n.lower() for n in names]
        if not identities:
            raise ConfigError("a test certificate needs at least one name")
        cert = self._ca.issue_cert(*identities, not_before=not_before, not_after=not_after)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert.configure_cert(context)
        if min_version is not None:
            context.minimum_version = min_version
        if max_version is not None:
            context.maximum_version = max_version
        return context


def expired_window(days_ago: int = 2) -> tuple[datetime.datetime, datetime.datetime]:
    """(not_before, not_after) of a certificate that expired ``days_ago`` days ago."""
    now = datetime.datetime.now(datetime.UTC)
    return now - datetime.timedelta(days=30), now - datetime.timedelta(days=days_ago)
