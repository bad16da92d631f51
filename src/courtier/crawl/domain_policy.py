"""Policies of a registrable domain cover its subdomains.

``policy set example.com`` stores an override on ``http(s)://example.com``; a host
of that registrable domain with no override of its own (``www.example.com``,
``img.example.com``, same scheme and port) gets the domain's policy. A host's own
override always wins, and clearing it returns the host to the domain's policy.
Counters stay per host: a domain's max-pages-per-day caps each of its hosts.
"""

from __future__ import annotations

from courtier.frontier.host import HostPolicy, domain_host_key
from courtier.store.base import HostRecord, Store


def policy_of_record(record: HostRecord | None) -> HostPolicy:
    if record is None:
        return HostPolicy()
    return HostPolicy(record.policy_delay, record.policy_max_in_flight,
                      record.policy_max_pages, record.blocked)


async def policy_in_force(
    store: Store, host_key: str, record: HostRecord | None
) -> tuple[HostPolicy, bool]:
    """(policy, inherited): the host's own override, else its registrable domain's."""
    own = policy_of_record(record)
    if not own.is_default():
        return own, False
    domain = domain_host_key(host_key)
    if domain is None:
        return own, False
    inherited = policy_of_record(await store.load_host(domain))
    return (inherited, True) if not inherited.is_default() else (own, False)
