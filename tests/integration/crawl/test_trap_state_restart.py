"""The embedded mode keeps its trap statistics and near-duplicate index across a restart:
a real crawl on SQLite, stopped (as on SIGTERM) and started again on the same ``--data``.

Judged from the test web's request log (how many trap pages were requested in both runs)
and the store's rows (``near_dup_of`` of the first near page the second run fetched).

Where run 1 stops is set by the test web's holds, not by timing: a host's queue is taken in
the order of its URLs' hashes, and the URLs carry the server's port, so with a free order
some ports (e.g. 40366, 41605) had run 1 fetch all five near pages before the trap's ninth
page and the test failed its precondition ("run 1 fetched every near page") in ~3 s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from courtier.core.urls import canonicalize
from courtier.crawl.app import crawl
from courtier.store.sqlite import SqliteStore
from courtier.testweb import HeldResponse, HostSpec, RequestRecord, TestWebServer, WebSpec
from tests.integration.cluster.harness import wait_for
from tests.integration.politeness.helpers import config_for

pytestmark = pytest.mark.timeout(180)

MIN_URLS, MIN_FETCHED, BUDGET, FANOUT = 20, 8, 5, 3
TRAPS = (f"template-min-urls={MIN_URLS}", f"template-min-fetched={MIN_FETCHED}",
         f"sample-budget={BUDGET}", "sample-rate=0.1")
#: one crawl's allowance: the trap's URLs admitted before the throttle (the 8th fetched page
#: throttles it, so the links of 7 pages plus the first one) and then the sample budget
ALLOWANCE = 1 + FANOUT * (MIN_FETCHED - 1) + BUDGET
SLACK = 3  # HyperLogLog's error at 20
#: near-duplicate pages, at a Crawl-delay slower than the trap's: most are left for run 2
NEAR = 5
TRAP_DELAY, NEAR_DELAY = 0.1, 0.3


def _paths(server: TestWebServer, host: str, prefix: str) -> list[str]:
    return [server.url(r.host, r.path_qs) for r in sorted(server.log, key=lambda r: r.start)
            if r.host == host and r.path_qs.startswith(prefix)]


@pytest.mark.parametrize("working_set", [
    (),
    # one host in the trap tracker's memory: the trap and the near host push each other out
    # at every page, so the trap's statistics live in the store between its pages
    ("max-hosts=1",),
], ids=["default", "one-host-in-memory"])
async def test_a_restart_continues_the_trap_throttle_and_the_near_duplicate_index(
        tmp_path: Path, working_set: tuple[str, ...]) -> None:
    spec = WebSpec(hosts=[
        HostSpec("trap.test", pages=2, trap_fanout=FANOUT, robots="crawl_delay",
                 crawl_delay=TRAP_DELAY),
        HostSpec("near.test", pages=1, near_duplicates=NEAR, robots="crawl_delay",
                 crawl_delay=NEAR_DELAY),
    ])
    data = tmp_path / "d"
    trap_served: list[RequestRecord] = []
    trap_hold: list[HeldResponse] = []

    def hold_the_trap_when_far_enough(record: RequestRecord) -> None:
        # called as the record is logged, before the trap host's next request (a Crawl-delay
        # later): the trap stays at MIN_FETCHED + 1 pages however long run 1 waits for its
        # near page, so run 1 cannot use up the trap's allowance and leave run 2 nothing
        if record.host == "trap.test" and record.path_qs.startswith("/trap/"):
            trap_served.append(record)
            if len(trap_served) == MIN_FETCHED + 1:
                trap_hold.append(server.hold_next("trap.test"))

    async with TestWebServer(spec, on_request=hold_the_trap_when_far_enough) as server:
        # every near page is held; the first one run 1 asks for is let through, so run 1
        # fetches one near page before its stop and at most one more (held then) after it
        near_holds = [server.hold_next("near.test", f"/near/{k}.html") for k in range(NEAR)]
        config = config_for(server, data, delay=0.05, traps=TRAPS + working_set)
        stop = asyncio.Event()
        first = asyncio.create_task(crawl(config, install_signals=False, stop=stop))

        async def near_page_asked() -> bool:
            return first.done() or any(h.arrived.is_set() for h in near_holds)

        await wait_for("run 1 to ask for a near page", near_page_asked, every=0.05)
        for held in near_holds:
            if held.arrived.is_set():
                held.release()
                break

        async def far_enough() -> bool:
            # the throttle fires while the MIN_FETCHED-th trap page is processed; every page
            # requested is processed before the stop saves the statistics
            return first.done() or (
                len(_paths(server, "trap.test", "/trap/")) >= MIN_FETCHED + 1
                and len(_paths(server, "near.test", "/near/")) >= 1)

        await wait_for("run 1 to fetch the trap's first pages and a near page", far_enough,
                       every=0.05)
        stop.set()
        for held in near_holds + trap_hold:  # run 1 finishes what it has in flight
            held.release()
        await asyncio.wait_for(first, 120)
        trap_run1 = _paths(server, "trap.test", "/trap/")
        near_run1 = _paths(server, "near.test", "/near/")
        assert len(near_run1) < NEAR, "run 1 fetched every near page: nothing left to test"

        await asyncio.wait_for(crawl(config, install_signals=False), 120)  # to its end
        trap_all = _paths(server, "trap.test", "/trap/")
        near_all = _paths(server, "near.test", "/near/")

    print(f"trap pages requested: {len(trap_run1)} in run 1, {len(trap_all)} in all; "
          f"one crawl's allowance {ALLOWANCE}")
    assert len(trap_all) > len(trap_run1), "run 2 never crawled the trap: nothing was tested"
    # run 2 continued run 1's throttle: one allowance in all, not a fresh one after the restart
    assert MIN_URLS <= len(trap_all) <= ALLOWANCE + SLACK, len(trap_all)

    near_run2 = near_all[len(near_run1):]
    assert near_run2, "run 2 fetched no near-duplicate page: nothing was tested"
    run1_ids = {canonicalize(u).url_key[:8].hex() for u in near_run1}
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        row = await store.get_url(canonicalize(near_run2[0]).url_key)
    finally:
        await store.close()
    assert row is not None and row["outcome"] == "ok"
    # run 2's very first near page is recognised, as a near-duplicate of a page of run 1
    assert row["near_dup_of"] in run1_ids, (row["near_dup_of"], near_run2[0])
