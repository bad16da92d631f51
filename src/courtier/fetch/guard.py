"""The SSRF guard: decide whether an IP address (and port) may be connected to.

Every fetch resolves its host once, passes each address through
:meth:`AddressGuard.check` and connects only to an address that passed. The
guard refuses, by default, every address that is not ordinary public unicast:

* IPv4: ``0.0.0.0/8`` (includes the unspecified address), RFC 1918 private
  ranges, loopback, link-local (which holds the cloud metadata address
  ``169.254.169.254``), CGNAT ``100.64.0.0/10``, IETF protocol assignments,
  the documentation and benchmarking ranges, the 6to4 relay anycast range,
  multicast, reserved ``240.0.0.0/4`` and the broadcast address.
* IPv6: unspecified, loopback, ULA ``fc00::/7`` (holds the AWS metadata
  address ``fd00:ec2::254``), link-local, site-local, multicast, discard,
  documentation, benchmarking, ORCHID, Teredo, local-use NAT64 and
  everything outside global unicast ``2000::/3``.
* IPv6 forms that carry an IPv4 address — IPv4-mapped ``::ffff:0:0/96``,
  IPv4-compatible ``::/96``, NAT64 ``64:ff9b::/96`` and 6to4 ``2002::/16`` —
  are judged by the embedded IPv4 address, so ``::ffff:10.0.0.1`` is as
  blocked as ``10.0.0.1`` and ``::ffff:93.184.216.34`` is as allowed as
  ``93.184.216.34``.

Networks given in ``allow`` (the ``--allow-network CIDR`` flag) are opened
exactly: an address inside an allowed network passes even when a default rule
would block it (allow beats block). For the IPv4-embedding forms the allow
list applies to the embedded IPv4 address too.

The guard only classifies addresses; it never sends traffic.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Sequence
from typing import Final

from courtier.core.errors import BlockedAddressError, ConfigError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _net(cidr: str) -> IPNetwork:
    return ipaddress.ip_network(cidr)


#: (network, reason) pairs blocked unless allowed; reasons appear in error messages.
_BLOCKED_TABLE: Final[tuple[tuple[IPNetwork, str], ...]] = (
    (_net("169.254.169.254/32"), "cloud metadata"),
    (_net("fd00:ec2::254/128"), "cloud metadata"),
    (_net("0.0.0.0/8"), "unspecified / 'this network'"),
    (_net("10.0.0.0/8"), "private (RFC 1918)"),
    (_net("100.64.0.0/10"), "carrier-grade NAT (RFC 6598)"),
    (_net("127.0.0.0/8"), "loopback"),
    (_net("169.254.0.0/16"), "link-local"),
    (_net("172.16.0.0/12"), "private (RFC 1918)"),
    (_net("192.0.0.0/24"), "IETF protocol assignments"),
    (_net("192.0.2.0/24"), "documentation (TEST-NET-1)"),
    (_net("192.88.99.0/24"), "6to4 relay anycast"),
    (_net("192.168.0.0/16"), "private (RFC 1918)"),
    (_net("198.18.0.0/15"), "benchmarking"),
    (_net("198.51.100.0/24"), "documentation (TEST-NET-2)"),
    (_net("203.0.113.0/24"), "documentation (TEST-NET-3)"),
    (_net("224.0.0.0/4"), "multicast"),
    (_net("255.255.255.255/32"), "broadcast"),
    (_net("240.0.0.0/4"), "reserved"),
    (_net("::/128"), "unspecified"),
    (_net("::1/128"), "loopback"),
    (_net("64:ff9b:1::/48"), "local-use NAT64"),
    (_net("100::/64"), "discard-only"),
    (_net("2001::/32"), "Teredo"),
    (_net("2001:2::/48"), "benchmarking"),
    (_net("2001:10::/28"), "ORCHID"),
    (_net("2001:20::/28"), "ORCHIDv2"),
    (_net("2001:db8::/32"), "documentation"),
    (_net("3fff::/20"), "documentation"),
    (_net("5f00::/16"), "segment routing SIDs"),
    (_net("fc00::/7"), "unique local (ULA)"),
    (_net("fe80::/10"), "link-local"),
    (_net("fec0::/10"), "site-local (deprecated)"),
    (_net("ff00::/8"), "multicast"),
)

#: The networks blocked by default (``allow`` opens exactly the networks it names).
DEFAULT_BLOCKED: Final[tuple[IPNetwork, ...]] = tuple(net for net, _ in _BLOCKED_TABLE)

_MAPPED: Final = ipaddress.IPv6Network("::ffff:0:0/96")
_COMPATIBLE: Final = ipaddress.IPv6Network("::/96")
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR: Final = ipaddress.IPv6Network("2002::/16")
_GLOBAL_UNICAST: Final = ipaddress.IPv6Network("2000::/3")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, IPv4-compatible, NAT64 or 6to4 address
    carries, or None when ``address`` is not one of those forms."""
    value = int(address)
    if address in _MAPPED or address in _COMPATIBLE or address in _NAT64:
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF)
    return None


def parse_network(cidr: str | IPNetwork) -> IPNetwork:
    """Parse one ``--allow-network`` value (host bits may be set: ``10.1.2.3/8``
    means ``10.0.0.0/8``); raises :class:`ConfigError` naming the flag."""
    if isinstance(cidr, ipaddress.IPv4Network | ipaddress.IPv6Network):
        return cidr
    try:
        return ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError as exc:
        raise ConfigError(f"--allow-network {cidr!r}: not a CIDR network ({exc})") from None


#: address texts whose verdict :class:`AddressGuard` remembers
_REASONS_KEPT = 4096


class AddressGuard:
    """Classifies target addresses; :meth:`check` raises for refused ones.

    ``allow`` lists networks opened despite the default block list.
    ``allowed_ports``, when given, is the only set of TCP ports that may be
    connected to; None allows every port 1–65535. The guard's rules are immutable
    (it only remembers the verdicts it gave) and it is safe to share between resolvers,
    transports and threads.
    """

    __slots__ = ("_allow", "_ports", "_reasons")

    def __init__(
        self,
        allow: Sequence[str | IPNetwork] = (),
        allowed_ports: Collection[int] | None = None,
    ) -> None:
        self._allow: tuple[IPNetwork, ...] = tuple(parse_network(n) for n in allow)
        #: block_reason of address texts already classified (a crawl connects to the same
        #: few addresses again and again); cleared when full
        self._reasons: dict[str, str | None] = {}
        self._ports: frozenset[int] | None = (
            None if allowed_ports is None else frozenset(allowed_ports)
        )

    @property
    def allowed_networks(self) -> tuple[IPNetwork, ...]:
        """The networks opened by ``allow``."""
        return self._allow

    def block_reason(self, ip: str | IPAddress) -> str | None:
        """Why ``ip`` is refused (e.g. ``"loopback 127.0.0.0/8"``), or None when it
        may be connected to. Unparseable input is refused, never allowed."""
        if not isinstance(ip, str):
            return self._reason(ip)
        reasons = self._reasons
        if ip in reasons:
            return reasons[ip]
        try:
            reason = self._reason(ipaddress.ip_address(ip))
        except ValueError:
            reason = "not an IP address"
        if len(reasons) >= _REASONS_KEPT:
            reasons.clear()
        reasons[ip] = reason
        return reason

    def is_allowed(self, ip: str | IPAddress) -> bool:
        """True when :meth:`block_reason` finds nothing to refuse."""
        return self.block_reason(ip) is None

    def check(self, ip: str, port: int) -> None:
        """Return when ``ip``:``port`` may be connected to; otherwise raise
        :class:`BlockedAddressError` naming the address, the reason and the
        ``--allow-network CIDR`` flag that would open it."""
        reason = self.block_reason(ip)
        if reason is not None:
            if reason == "not an IP address":
                raise BlockedAddressError(f"refusing to connect to {ip!r}: not an IP address")
            host = ip.split("%", 1)[0]
            prefix = 128 if ":" in host else 32
            raise BlockedAddressError(
                f"refusing to connect to {ip} ({reason}); to crawl it anyway pass "
                f"--allow-network CIDR, e.g. --allow-network {host}/{prefix}"
            )
        if not 0 < port < 65536:
            raise BlockedAddressError(f"refusing to connect to {ip} port {port}: invalid port")
        if self._ports is not None and port not in self._ports:
            allowed = ", ".join(str(p) for p in sorted(self._ports))
            raise BlockedAddressError(
                f"refusing to connect to {ip} port {port}: only ports {allowed} are allowed"
            )

    def _opened(self, address: IPAddress) -> bool:
        return any(address.version == net.version and address in net for net in self._allow)

    def _reason(self, address: IPAddress) -> str | None:
        if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
            address = ipaddress.IPv6Address(address.compressed.split("%", 1)[0])
        if self._opened(address):
            return None
        for net, why in _BLOCKED_TABLE:
            if address.version == net.version and address in net:
                return f"{why} {net}"
        if isinstance(address, ipaddress.IPv6Address):
            inner = embedded_ipv4(address)
            if inner is not None:
                inner_reason = self._reason(inner)
                if inner_reason is None:
                    return None
                return f"embeds IPv4 {inner}: {inner_reason}"
            if address not in _GLOBAL_UNICAST:
                return "reserved (outside global unicast 2000::/3)"
        return None
