"""Two workers share one ``--ip-delay``: every host of the test web is on 127.0.0.1, and
the hosts are spread over the workers by name, so only the store's IP slots keep the
starts of all their requests apart. Judged from the test web's own log.
"""

from __future__ import annotations

import itertools

import pytest

from tests.integration.cluster.harness import Cluster, stop, wait_for

pytestmark = pytest.mark.timeout(300)

IP_DELAY = 0.3
#: the store keeps the gap between the grants of the address's slots; the server sees
#: each request start later by its connection set-up, which varies by tens of ms on a
#: busy machine (seen: 0.243 s between two robots.txt requests of one worker). Not
#: fixed here: see docs/testing.md. A worker ignoring the other's requests leaves gaps
#: near 0.
JITTER = 0.1


async def test_two_workers_keep_one_ip_delay(cluster: Cluster) -> None:
    """Both workers are given the seeds (either may start first) and crawl until each has
    sent 12 requests; every two consecutive starts at the server are ``--ip-delay`` apart
    (less the set-up jitter ``JITTER``).

    Seen red on a scratch copy with the store's IP slots given no gap (``IpSlots`` built
    with ``ip_delay`` 0, each worker keeping its own): 14 gaps, the shortest 0.000 s, e.g.
    "h01…/robots.txt (w0) 0.179 s after h00…/robots.txt (w1)". Green runs: shortest gap
    0.292 s and 0.243 s."""
    cluster.extra += ["--ip-delay", str(IP_DELAY)]
    seeds = cluster.server.web.seeds()
    await cluster.start("w0", *seeds)
    await cluster.start("w1", *seeds)  # both get the seeds: either may start first

    async def both_crawling() -> bool:
        owners = set((await cluster.owners()).values())
        return owners == {"w0", "w1"} and all(
            len(cluster.requests_by(w)) >= 12 for w in ("w0", "w1"))

    await wait_for("both workers crawling", both_crawling)
    await stop(cluster)
    log = sorted(cluster.log(), key=lambda r: r.start)
    close = [f"{b.host}{b.path_qs} ({b.user_agent[-3:-1]}) {b.start - a.start:.3f} s after"
             f" {a.host}{a.path_qs} ({a.user_agent[-3:-1]})"
             for a, b in itertools.pairwise(log) if b.start - a.start < IP_DELAY - JITTER]
    both = {r.user_agent for r in log}
    assert len(both) == 2
    shortest = min(b.start - a.start for a, b in itertools.pairwise(log))
    print(f"{len(log)} requests to one address, the shortest gap {shortest:.3f} s")
    assert close == []
