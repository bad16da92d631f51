"""The SSRF guard classifies addresses; no traffic is ever sent to them."""

from __future__ import annotations

import ipaddress

import ada_url
import pytest
from hypothesis import given
from hypothesis import strategies as st

from courtier.core.errors import BlockedAddressError, ConfigError
from courtier.fetch.guard import DEFAULT_BLOCKED, AddressGuard, embedded_ipv4

BLOCKED = [
    "127.0.0.1",
    "127.255.255.254",
    "10.0.0.1",
    "10.255.255.255",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.0.1",
    "192.168.255.255",
    "169.254.169.254",
    "169.254.1.1",
    "100.64.0.1",
    "100.127.255.255",
    "224.0.0.1",
    "239.255.255.250",
    "0.0.0.0",
    "0.1.2.3",
    "255.255.255.255",
    "240.0.0.1",
    "192.0.0.8",
    "192.0.2.1",
    "198.51.100.7",
    "203.0.113.9",
    "198.18.0.1",
    "192.88.99.1",
    "::",
    "::1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::127.0.0.1",  # IPv4-compatible
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b:1::1",  # local-use NAT64
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "fd00:ec2::254",
    "fc00::1",
    "fdff:ffff::1",
    "fe80::1",
    "fe80::1%eth0",
    "fec0::1",
    "ff02::1",
    "2001:db8::1",
    "2001::1",  # Teredo
    "100::1",
    "4000::1",  # outside global unicast
]

ALLOWED = [
    "93.184.216.34",
    "8.8.8.8",
    "1.1.1.1",
    "11.0.0.1",
    "172.32.0.1",  # just past 172.16.0.0/12
    "172.15.255.255",  # just before it
    "100.128.0.1",  # just past CGNAT
    "192.169.0.1",
    "2606:4700:4700::1111",
    "2a00:1450:4001::200e",
    "::ffff:93.184.216.34",
    "64:ff9b::5db8:d822",  # NAT64 of 93.184.216.34
    "2002:5db8:d822::1",  # 6to4 of 93.184.216.34
]


@pytest.mark.parametrize("ip", BLOCKED)
def test_default_guard_blocks(ip: str) -> None:
    guard = AddressGuard()
    with pytest.raises(BlockedAddressError) as info:
        guard.check(ip, 80)
    message = str(info.value)
    assert ip in message
    assert "--allow-network" in message
    assert not guard.is_allowed(ip)


@pytest.mark.parametrize("ip", ALLOWED)
def test_default_guard_allows_public(ip: str) -> None:
    guard = AddressGuard()
    guard.check(ip, 443)
    assert guard.block_reason(ip) is None


@pytest.mark.parametrize(
    ("ip", "words"),
    [
        ("169.254.169.254", ["cloud metadata"]),
        ("fd00:ec2::254", ["cloud metadata"]),
        ("127.0.0.1", ["loopback", "127.0.0.0/8"]),
        ("10.2.3.4", ["private", "10.0.0.0/8"]),
        ("::ffff:10.0.0.1", ["10.0.0.1", "private"]),
        ("2002:7f00:1::1", ["127.0.0.1", "loopback"]),
        ("100.64.0.1", ["100.64.0.0/10"]),
    ],
)
def test_reason_names_the_rule(ip: str, words: list[str]) -> None:
    reason = AddressGuard().block_reason(ip)
    assert reason is not None
    for word in words:
        assert word in reason


def test_message_suggests_a_host_cidr() -> None:
    with pytest.raises(BlockedAddressError, match=r"--allow-network 10\.1\.2\.3/32"):
        AddressGuard().check("10.1.2.3", 80)
    with pytest.raises(BlockedAddressError, match=r"--allow-network ::1/128"):
        AddressGuard().check("::1", 80)


def test_allow_opens_exactly_the_named_range() -> None:
    guard = AddressGuard(allow=["127.0.0.0/8", ipaddress.ip_network("10.1.0.0/16")])
    guard.check("127.0.0.1", 8080)
    guard.check("127.200.0.9", 8080)
    guard.check("10.1.255.255", 80)
    for still_blocked in ("10.2.0.1", "192.168.1.1", "::1", "169.254.169.254"):
        with pytest.raises(BlockedAddressError):
            guard.check(still_blocked, 80)


def test_allow_applies_to_embedded_ipv4() -> None:
    guard = AddressGuard(allow=["127.0.0.0/8"])
    assert guard.is_allowed("::ffff:127.0.0.1")
    assert not guard.is_allowed("::ffff:10.0.0.1")


def test_allow_can_open_the_metadata_address_only_explicitly() -> None:
    assert not AddressGuard(allow=["169.254.0.0/24"]).is_allowed("169.254.169.254")
    assert AddressGuard(allow=["169.254.169.254/32"]).is_allowed("169.254.169.254")


def test_allow_host_bits_are_tolerated() -> None:
    assert AddressGuard(allow=["10.9.8.7/8"]).is_allowed("10.200.0.1")


@pytest.mark.parametrize("bad", ["not-a-cidr", "10.0.0.0/33", "", "::1/129"])
def test_bad_allow_value_is_a_config_error_naming_the_flag(bad: str) -> None:
    with pytest.raises(ConfigError, match="--allow-network"):
        AddressGuard(allow=[bad])


def test_allowed_ports() -> None:
    guard = AddressGuard(allowed_ports={80, 443})
    guard.check("93.184.216.34", 443)
    with pytest.raises(BlockedAddressError, match="8080"):
        guard.check("93.184.216.34", 8080)


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_invalid_port_is_blocked(port: int) -> None:
    with pytest.raises(BlockedAddressError, match="port"):
        AddressGuard().check("93.184.216.34", port)


@pytest.mark.parametrize("junk", ["example.com", "", "1.2.3", "[::1]", "999.1.1.1"])
def test_non_address_is_refused(junk: str) -> None:
    guard = AddressGuard(allow=["0.0.0.0/0", "::/0"])
    assert guard.block_reason(junk) == "not an IP address"
    with pytest.raises(BlockedAddressError, match="not an IP address"):
        guard.check(junk, 80)


@pytest.mark.parametrize(
    "url",
    ["http://0x7f000001/", "http://2130706433/", "http://127.1/", "http://0177.0.0.1/"],
)
def test_whatwg_numeric_host_forms_are_blocked(url: str) -> None:
    host = ada_url.parse_url(url)["hostname"]
    assert host == "127.0.0.1"
    with pytest.raises(BlockedAddressError, match="loopback"):
        AddressGuard().check(host, 80)


def test_whatwg_bracketed_mapped_ipv6_is_blocked() -> None:
    host = ada_url.parse_url("http://[::ffff:127.0.0.1]/")["hostname"]
    assert host.startswith("[")
    with pytest.raises(BlockedAddressError):
        AddressGuard().check(host.strip("[]"), 80)


@pytest.mark.parametrize("net", DEFAULT_BLOCKED, ids=str)
def test_every_default_network_is_blocked_and_openable(net: ipaddress._BaseNetwork) -> None:
    first = str(net.network_address)
    last = str(net.broadcast_address)
    assert not AddressGuard().is_allowed(first)
    assert not AddressGuard().is_allowed(last)
    opened = AddressGuard(allow=[str(net)])
    assert opened.is_allowed(first)
    assert opened.is_allowed(last)


def test_embedded_ipv4_extraction() -> None:
    v4 = ipaddress.IPv4Address("93.184.216.34")
    assert embedded_ipv4(ipaddress.IPv6Address("::ffff:93.184.216.34")) == v4
    assert embedded_ipv4(ipaddress.IPv6Address("64:ff9b::93.184.216.34")) == v4
    assert embedded_ipv4(ipaddress.IPv6Address("2002:5db8:d822:1::")) == v4
    assert embedded_ipv4(ipaddress.IPv6Address("2606:4700::1")) is None


ipv4s = st.integers(min_value=0, max_value=2**32 - 1).map(ipaddress.IPv4Address)


@given(ipv4s)
def test_embedded_forms_classify_like_their_ipv4(v4: ipaddress.IPv4Address) -> None:
    guard = AddressGuard()
    value = int(v4)
    expected = guard.is_allowed(v4)
    mapped = ipaddress.IPv6Address((0xFFFF << 32) | value)
    nat64 = ipaddress.IPv6Address((0x64FF9B << 96) | value)
    six_to_four = ipaddress.IPv6Address((0x2002 << 112) | (value << 80) | 1)
    assert guard.is_allowed(mapped) == expected
    assert guard.is_allowed(nat64) == expected
    assert guard.is_allowed(six_to_four) == expected


@given(ipv4s)
def test_every_non_global_ipv4_is_blocked(v4: ipaddress.IPv4Address) -> None:
    if not v4.is_global or v4.is_multicast:
        assert not AddressGuard().is_allowed(v4)


@given(st.integers(min_value=0, max_value=2**24 - 1))
def test_all_of_ten_slash_eight_is_blocked(low: int) -> None:
    assert not AddressGuard().is_allowed(ipaddress.IPv4Address((10 << 24) | low))


_ADDRESS_TEXTS = st.one_of(
    st.ip_addresses().map(str),
    st.ip_addresses(v=6).map(lambda a: f"{a}%eth0"),
    st.text(alphabet="0123456789abcdef.:%x ", max_size=24),
)


@given(st.lists(_ADDRESS_TEXTS, min_size=1, max_size=40))
def test_remembered_verdicts_are_the_verdicts(texts: list[str]) -> None:
    """A guard asked the same addresses again (its memo) answers as a new guard does,
    for addresses, scoped IPv6 and junk, opened networks included. Broken once by keying
    the memo on the text before any ``%``: red on ``127.0.0.1%eth0`` after ``127.0.0.1``."""
    used = AddressGuard(allow=["127.0.0.0/8", "fd00::/8"])
    texts = [*texts, "127.0.0.1", "127.0.0.1%eth0", "fe80::1", "fe80::1%eth0", "10.0.0.1",
             "10.0.0.1 ", "::ffff:127.0.0.1", "::ffff:10.0.0.1"]
    for text in texts * 2:
        fresh = AddressGuard(allow=["127.0.0.0/8", "fd00::/8"])
        assert used.block_reason(text) == fresh.block_reason(text), text


def test_the_memo_is_bounded() -> None:
    guard = AddressGuard()
    for i in range(10_000):
        assert guard.block_reason(str(ipaddress.IPv4Address(0x0B000000 + i))) is None
    assert len(guard._reasons) <= 4096
