"""DNS resolution with a TTL cache, host overrides and the SSRF guard.

:meth:`Resolver.resolve` is the only way a fetch learns which address to
connect to. Every address it returns has passed :meth:`AddressGuard.check`;
the transport connects to one of exactly those addresses, so a DNS answer
that changes between the check and the connect (DNS rebinding) cannot reach
a blocked address.

Lookup order: an IP literal is checked as it is; a name found in
``overrides`` (the ``/etc/hosts``-style table, see :func:`load_hosts_file`)
uses the listed addresses; any other name goes to DNS — aiodns (c-ares) when
it is installed, else the event loop's ``getaddrinfo`` — and the answer is
cached for ``min(ttl, record TTL)`` seconds (at least :data:`MIN_TTL`).
Names that do not exist are remembered for :data:`NEGATIVE_TTL` seconds.
With ``COURTIER_SYSTEM_DNS=off`` in the environment, a name missing from the
overrides fails with :class:`DNSError` instead of going to DNS: for hosts-file-only
runs (air-gapped machines, and the test suite, which sets it for every test and
the worker processes it starts).
Both caches are LRU-bounded, so memory does not grow with the number of
hosts ever seen. Concurrent lookups of one name share a single query.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import re
import socket
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final

import ada_url

from courtier.core.clock import Clock, RealClock
from courtier.core.errors import BlockedAddressError, ConfigError, DNSError
from courtier.fetch.guard import AddressGuard

log = logging.getLogger(__name__)
#: names whose refusal by the guard was logged (one WARNING per name, bounded)
_MAX_WARNED: Final = 1024

try:
    import aiodns
except ImportError:  # pragma: no cover - aiodns is a declared dependency
    aiodns = None  # type: ignore[assignment]

#: lower bound on how long a positive answer is cached, whatever its record TTL
MIN_TTL: Final = 10.0
#: how long "this name does not exist" is remembered
NEGATIVE_TTL: Final = 60.0
#: default bound on the number of cached names (each cache)
CACHE_SIZE: Final = 50_000
#: environment variable: ``off`` fails names that are not in the overrides (no DNS)
SYSTEM_DNS_ENV: Final = "COURTIER_SYSTEM_DNS"

_ARES_NO_SUCH_NAME: Final = frozenset(
    () if aiodns is None else (aiodns.error.ARES_ENOTFOUND, aiodns.error.ARES_ENODATA)
)
_EAI_NO_SUCH_NAME: Final = frozenset(
    {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}
)

_NAME_RE: Final = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$")


def _normalize_host(host: str) -> str:
    """The cache and override key of a host: lower-case, no trailing dot, and an
    internationalised name in its ASCII (IDNA/punycode) form, so ``bücher.test``
    and ``xn--bcher-kva.test`` are one name (aiohttp asks for the ASCII one)."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        return host[1:-1]
    host = host.rstrip(".") if host != "." else host
    if not host.isascii():
        ascii_form: bytes | str = ada_url.idna_to_ascii(host)
        if isinstance(ascii_form, bytes):
            ascii_form = ascii_form.decode("ascii", "replace")
        if ascii_form:
            host = ascii_form.lower()
    return host


def _ip_literal(host: str) -> str | None:
    """``host`` as an IP address text, or None when it is a name."""
    if ":" not in host and host.strip("0123456789."):
        return None  # IPv4 literals are ASCII digits and dots; IPv6 ones have a ":"
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def load_hosts_file(path: str) -> dict[str, list[str]]:
    """Parse a hosts file (``IP name [name…]`` per line, ``#`` starts a comment)
    into ``{name: [ip, …]}`` with names lower-cased and addresses in file order.

    Raises :class:`ConfigError` naming the file (and line) when the file cannot
    be read or a line has a bad address, no name or a malformed name.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read hosts file ({exc})") from None
    table: dict[str, list[str]] = {}
    for number, line in enumerate(lines, start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        ip = _ip_literal(fields[0])
        if ip is None:
            raise ConfigError(f"{path}:{number}: {fields[0]!r} is not an IP address")
        if len(fields) < 2:
            raise ConfigError(f"{path}:{number}: address {fields[0]} has no host name")
        for name in fields[1:]:
            if not _NAME_RE.match(name) or ".." in name:
                raise ConfigError(f"{path}:{number}: {name!r} is not a valid host name")
            addresses = table.setdefault(_normalize_host(name), [])
            if ip not in addresses:
                addresses.append(ip)
    return table


class Resolver:
    """Resolves host names to guard-checked addresses.

    ``overrides`` maps names to addresses (checked at construction; a bad one
    raises :class:`ConfigError`). ``ttl`` caps how long a DNS answer is
    cached; ``clock`` is the time source of both caches; ``nameservers`` and
    ``timeout`` (seconds per lookup) configure aiodns. Call :meth:`close`
    when done to release the DNS channel.
    """

    def __init__(
        self,
        guard: AddressGuard,
        overrides: Mapping[str, Sequence[str]] | None = None,
        ttl: float = 300.0,
        clock: Clock | None = None,
        nameservers: Sequence[str] | None = None,
        timeout: float = 5.0,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        self.guard = guard
        self._ttl = ttl
        self._clock: Clock = clock if clock is not None else RealClock()
        self._nameservers = list(nameservers) if nameservers else None
        self._timeout = timeout
        self._system_dns = os.environ.get(SYSTEM_DNS_ENV, "on") != "off"
        self._cache_size = max(1, cache_size)
        self._overrides: dict[str, list[str]] = {}
        for name, ips in (overrides or {}).items():
            checked = []
            for ip in ips:
                literal = _ip_literal(_normalize_host(ip))
                if literal is None:
                    raise ConfigError(f"host override {name!r}: {ip!r} is not an IP address")
                checked.append(literal)
            if not checked:
                raise ConfigError(f"host override {name!r}: no addresses")
            self._overrides[_normalize_host(name)] = checked
        self._cache: OrderedDict[str, tuple[float, list[str]]] = OrderedDict()
        self._negative: OrderedDict[str, float] = OrderedDict()
        self._pending: dict[str, asyncio.Future[list[str]]] = {}
        self._dns: Any = None
        self._warned: set[str] = set()  # names whose guard refusal was logged

    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses of ``host`` that may be connected to on ``port``.

        Blocked addresses are dropped from a mixed answer. Raises
        :class:`DNSError` when the name has no address and
        :class:`BlockedAddressError` when every address is blocked.
        """
        try:
            return await self._resolve(host, port)
        except BlockedAddressError as exc:
            self._warn_blocked(host, exc)
            raise

    def _warn_blocked(self, host: str, exc: BlockedAddressError) -> None:
        """Say once per name why the guard refused it (the message names
        ``--allow-network``): a crawl of a private address otherwise only shows
        ``blocked`` outcomes."""
        warned = self._warned
        if host in warned or len(warned) >= _MAX_WARNED:
            return
        warned.add(host)
        log.warning("network guard: %s", exc)

    async def _resolve(self, host: str, port: int) -> list[str]:
        name = _normalize_host(host)
        literal = _ip_literal(name)
        if literal is not None:
            self.guard.check(literal, port)
            return [literal]
        if not name:
            raise DNSError("empty host name")
        addresses = self._overrides.get(name)
        if addresses is None:
            addresses = await self._cached_lookup(name)
        allowed: list[str] = []
        first_error: BlockedAddressError | None = None
        for address in addresses:
            try:
                self.guard.check(address, port)
            except BlockedAddressError as exc:
                first_error = first_error or exc
            else:
                allowed.append(address)
        if allowed:
            return allowed
        if first_error is not None:
            raise BlockedAddressError(f"{host}: {first_error}") from None
        raise DNSError(f"{host}: no address")

    async def close(self) -> None:
        """Release the DNS channel; the resolver may still serve overrides and literals."""
        dns, self._dns = self._dns, None
        if dns is not None:
            await dns.close()

    def clear_cache(self) -> None:
        """Forget every cached answer (positive and negative)."""
        self._cache.clear()
        self._negative.clear()

    async def _cached_lookup(self, name: str) -> list[str]:
        now = self._clock.now()
        hit = self._cache.get(name)
        if hit is not None:
            if hit[0] > now:
                self._cache.move_to_end(name)
                return hit[1]
            del self._cache[name]
        miss = self._negative.get(name)
        if miss is not None:
            if miss > now:
                raise DNSError(f"{name}: no such host (cached)")
            del self._negative[name]
        pending = self._pending.get(name)
        if pending is None:
            pending = asyncio.ensure_future(self._lookup_and_store(name))
            self._pending[name] = pending
            pending.add_done_callback(lambda done: self._lookup_done(name, done))
        return await asyncio.shield(pending)

    def _lookup_done(self, name: str, done: asyncio.Future[list[str]]) -> None:
        if self._pending.get(name) is done:
            del self._pending[name]
        if not done.cancelled():
            done.exception()  # retrieved: every waiter may have been cancelled

    async def _lookup_and_store(self, name: str) -> list[str]:
        addresses, record_ttl = await self._lookup(name)
        if not addresses:
            self._store(self._negative, name, self._clock.now() + NEGATIVE_TTL)
            raise DNSError(f"{name}: no such host")
        ttl = self._ttl if record_ttl is None else min(self._ttl, max(MIN_TTL, record_ttl))
        self._store(self._cache, name, (self._clock.now() + ttl, addresses))
        return addresses

    def _store(self, cache: OrderedDict[str, Any], name: str, value: Any) -> None:
        cache[name] = value
        cache.move_to_end(name)
        while len(cache) > self._cache_size:
            cache.popitem(last=False)

    async def _lookup(self, name: str) -> tuple[list[str], float | None]:
        """One uncached lookup: (addresses in answer order, smallest record TTL or None).

        An empty list means the name (or any address for it) does not exist;
        that answer goes to the negative cache. A transient failure (timeout,
        SERVFAIL, refused) raises :class:`DNSError` and is not cached. Tests
        may override this hook to stand in for DNS.
        """
        if not self._system_dns:
            raise DNSError(f"{name}: not in the resolver overrides ({SYSTEM_DNS_ENV}=off)")
        if aiodns is None:
            return await self._lookup_system(name)
        if self._dns is None:
            self._dns = aiodns.DNSResolver(nameservers=self._nameservers, timeout=self._timeout)
        try:
            async with asyncio.timeout(self._timeout + 1.0):  # not wait_for: timed_store.py
                result = await self._dns.getaddrinfo(name, family=socket.AF_UNSPEC,
                                                     type=socket.SOCK_STREAM)
        except aiodns.error.DNSError as exc:
            code = exc.args[0] if exc.args else None
            if code in _ARES_NO_SUCH_NAME:
                return [], None
            message = exc.args[1] if len(exc.args) > 1 else str(exc)
            raise DNSError(f"{name}: {message}") from None
        except TimeoutError:
            raise DNSError(f"{name}: lookup timed out after {self._timeout:g}s") from None
        addresses: list[str] = []
        ttls: list[float] = []
        for node in result.nodes:
            raw = node.addr[0]
            ip = raw.decode("ascii") if isinstance(raw, bytes) else str(raw)
            literal = _ip_literal(ip.split("%", 1)[0])
            if literal is not None and literal not in addresses:
                addresses.append(literal)
                if node.ttl is not None and node.ttl >= 0:
                    ttls.append(float(node.ttl))
        return addresses, (min(ttls) if ttls else None)

    async def _lookup_system(self, name: str) -> tuple[list[str], float | None]:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._timeout):  # not wait_for: see timed_store.py
                infos = await loop.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            if exc.errno in _EAI_NO_SUCH_NAME:
                return [], None
            raise DNSError(f"{name}: {exc.strerror or exc}") from None
        except (TimeoutError, OSError) as exc:
            raise DNSError(f"{name}: lookup failed ({exc or 'timed out'})") from None
        addresses: list[str] = []
        for _family, _type, _proto, _canon, sockaddr in infos:
            literal = _ip_literal(str(sockaddr[0]).split("%", 1)[0])
            if literal is not None and literal not in addresses:
                addresses.append(literal)
        return addresses, None
