"""What a local test web looks like: hosts, their robots.txt flavour and behaviour.

A :class:`WebSpec` is plain data; :class:`courtier.testweb.site.TestWeb` turns
it into deterministic pages once the server's port is known. Everything here
is pure (no I/O) so the simulator and the tests can share it.

Robots flavours (``HostSpec.robots``):

``allow_all``
    200, one group for an unrelated agent (``otherbot``, disallow all) and an
    empty ``*`` group: courtier may fetch everything.
``disallow_some``
    200, ``*`` disallows ``/private/``; a ``courtier`` group disallows
    ``/private/`` *and* ``/secret`` (RFC 9309: the most specific matching
    group replaces ``*`` entirely, so it repeats ``/private/``).
``404``
    robots.txt is missing: everything is allowed.
``500``
    robots.txt fails with 500: a polite crawler fetches nothing else there.
``crawl_delay``
    200, allow all, ``Crawl-delay: N`` with ``N = HostSpec.crawl_delay``.
``redirect``
    robots.txt answers 301 to ``/robots-real.txt``, which allows all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from courtier.errors import ConfigError

RobotsKind = Literal["allow_all", "disallow_some", "404", "500", "crawl_delay", "redirect"]

#: every robots flavour, in the order :func:`default_web` assigns them
ROBOTS_KINDS: tuple[RobotsKind, ...] = (
    "allow_all",
    "disallow_some",
    "404",
    "500",
    "crawl_delay",
    "redirect",
)

#: the product token whose dedicated group appears on ``disallow_some`` hosts
COURTIER_AGENT = "courtier"

_HOST_RE = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$")


@dataclass(slots=True)
class HostSpec:
    """One virtual host of the test web.

    ``name`` is a lower-case DNS name (``h00.courtier.test``); ``pages`` the
    number of ``/p/{i}.html`` pages (at least 1); ``latency`` seconds the
    server waits before answering any request of this host; ``crawl_delay``
    the ``Crawl-delay`` value written for the ``crawl_delay`` flavour;
    ``page_bytes`` the approximate size of each HTML page (text padding is
    added until the page reaches it).
    """

    name: str
    pages: int = 20
    robots: RobotsKind = "allow_all"
    latency: float = 0.0
    crawl_delay: float = 2.0
    page_bytes: int = 3000

    def __post_init__(self) -> None:
        self.name = self.name.lower()
        if not _HOST_RE.match(self.name):
            raise ConfigError(f"testweb host name {self.name!r} is not a DNS name")
        if self.pages < 1:
            raise ConfigError(f"testweb host {self.name}: pages must be >= 1")
        if self.robots not in ROBOTS_KINDS:
            raise ConfigError(f"testweb host {self.name}: unknown robots kind {self.robots!r}")
        if self.latency < 0 or self.crawl_delay < 0 or self.page_bytes < 0:
            raise ConfigError(f"testweb host {self.name}: negative latency/delay/size")

    def disallowed_prefixes(self, agent: str = COURTIER_AGENT) -> tuple[str, ...]:
        """Path prefixes this host's robots.txt disallows for ``agent``.

        Only meaningful when robots.txt is usable (not for ``500``, where the
        whole host is off limits). Agent matching is case-insensitive on the
        product token, as RFC 9309 requires.
        """
        if self.robots != "disallow_some":
            return ()
        if agent.lower() == COURTIER_AGENT:
            return ("/private/", "/secret")
        return ("/private/",)

    def robots_body(self, real: bool = False) -> bytes:
        """The robots.txt text served (for ``redirect``: ``real`` = /robots-real.txt)."""
        if self.robots == "allow_all":
            text = (
                "# testweb: allow all\n"
                "User-agent: otherbot\nDisallow: /\n\nUser-agent: *\nDisallow:\n"
            )
        elif self.robots == "disallow_some":
            text = (
                "User-agent: *\nDisallow: /private/\n\n"
                f"User-agent: {COURTIER_AGENT}\nDisallow: /private/\nDisallow: /secret\n"
            )
        elif self.robots == "crawl_delay":
            delay = self.crawl_delay
            shown = str(int(delay)) if delay == int(delay) else repr(delay)
            text = f"User-agent: *\nCrawl-delay: {shown}\nDisallow:\n"
        elif self.robots == "redirect" and real:
            text = "User-agent: *\nAllow: /\n"
        else:
            text = ""
        return text.encode()


@dataclass(slots=True)
class WebSpec:
    """A whole test web: its hosts and the seed of every random choice."""

    hosts: list[HostSpec]
    seed: int = 1
    _by_name: dict[str, HostSpec] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.hosts:
            raise ConfigError("a testweb needs at least one host")
        for host in self.hosts:
            if host.name in self._by_name:
                raise ConfigError(f"testweb host {host.name!r} appears twice")
            self._by_name[host.name] = host

    def host(self, name: str) -> HostSpec | None:
        """The spec of host ``name`` (case-insensitive), or None."""
        return self._by_name.get(name.lower())

    def of_kind(self, kind: RobotsKind) -> list[HostSpec]:
        """Hosts whose robots flavour is ``kind``, in spec order."""
        return [h for h in self.hosts if h.robots == kind]


def host_name(index: int, domain: str = "courtier.test") -> str:
    """The conventional name of host ``index``: ``h00.courtier.test``, ``h01…``."""
    return f"h{index:02d}.{domain}"


def default_web(
    n_hosts: int = 6,
    pages_per_host: int = 20,
    seed: int = 1,
    *,
    crawl_delay: float = 2.0,
    latency: float = 0.0,
    page_bytes: int = 3000,
) -> WebSpec:
    """A web of ``n_hosts`` hosts cycling through :data:`ROBOTS_KINDS`.

    Host ``i`` is named ``h{i:02d}.courtier.test`` and gets robots flavour
    ``ROBOTS_KINDS[i % 6]``, so the first six hosts cover every flavour.
    """
    if n_hosts < 1:
        raise ConfigError("default_web: n_hosts must be >= 1")
    hosts = [
        HostSpec(
            name=host_name(i),
            pages=pages_per_host,
            robots=ROBOTS_KINDS[i % len(ROBOTS_KINDS)],
            latency=latency,
            crawl_delay=crawl_delay,
            page_bytes=page_bytes,
        )
        for i in range(n_hosts)
    ]
    return WebSpec(hosts=hosts, seed=seed)
