"""Workers that find a one-shot crawl over wait for each other, take their word back when
work arrives, and leave together without moving a shard.

Two real workers (crawl/worker.py, each with its shard coordinator) on one memory store
in virtual time, with the end gate of ``crawl --workers N`` (cluster/end_gate.py): the
parent's keeper, in this process, awaits the two and a third name that the test answers
for. Once both have said the crawl is over, a seed arrives from outside (straight into
the store, as another process would add it); the test opens the gate once it has been
crawled and both have found the crawl over again. The simulated web's request log is
the judge of what was fetched; the store's handover counters of shard moves.

Seen red on a scratch edit (restored since): with the pacer leaving as soon as it finds
the crawl over (``may_leave`` not asked), both workers ended before the gate opened and
the late seed's host was never crawled; with a look that finds work not taking the word
back (``found_work`` not called by the pacer), the words were ``[True]`` only and the
gate would have opened on the word of a worker crawling.
"""

from __future__ import annotations

import asyncio
import threading

from courtier.cluster.coordinator import LeaseSettings, ShardCoordinator
from courtier.cluster.end_gate import CrawlEnd, EndKeeper, SiblingEndGate
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.worker import Worker
from courtier.frontier.traps import TemplateTracker, TrapRules
from courtier.sim.archive import DigestOnlyArchive
from courtier.sim.loop import run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.sim.web import SimHost, SimWeb
from tests.sim.test_faults import allowed, page_counts

NAMES = ("w1", "w2")
POLL = 1.0  # virtual seconds between two looks of the test


def test_workers_wait_for_each_other_take_their_word_back_and_leave_without_a_move(
) -> None:
    async def go() -> None:
        # no links between hosts: the last host is crawled only once its seed arrives
        web = SimWeb([SimHost(f"h{i}.sim", ip=f"192.0.2.{i + 1}", pages=8, latency=0.3,
                              cross_links=0) for i in range(6)])
        crawl = SimCrawl(web, sim_config(delay=0.5, linger=0.0))
        store, clock = crawl.store, crawl.clock
        await store.open()
        opened = threading.Event()
        keeper = EndKeeper([*NAMES, "held"], opened)
        words: dict[str, list[bool]] = {name: [] for name in NAMES}

        def say(name: str) -> SiblingEndGate:
            def said(over: bool) -> None:
                words[name].append(over)
                keeper.said(name, over)
            return SiblingEndGate(opened, said)

        for name in NAMES:  # both registered before either plans: no move at the start
            await store.heartbeat(name, 1.0, {}, clock.now())
        workers = []
        for name in NAMES:
            coordinator = ShardCoordinator(store, name, clock, LeaseSettings(30.0))
            intake = Intake(Scope(crawl.config, []),
                            traps=TemplateTracker(TrapRules(), clock))
            workers.append(Worker(crawl.config, store, crawl.transport, DigestOnlyArchive(),
                                  clock, intake, coordinator=coordinator,
                                  end=CrawlEnd(say(name))))
        first = workers[0]
        rows, problems = first.intake.seed_urls(list(enumerate(web.seeds()[:-1], 1)), "sim",
                                                clock.now())
        assert not problems
        await first.add_seeds(rows)
        runs = [asyncio.create_task(worker.run()) for worker in workers]

        async def until(condition: str, check: object) -> None:
            for _ in range(100_000):  # virtual seconds: a bound, never reached
                if callable(check) and check():
                    return
                assert not any(run.done() for run in runs), f"a worker ended before {condition}"
                await asyncio.sleep(POLL)
            raise AssertionError(f"never {condition}")

        await until("both found the crawl over", lambda: keeper.waiting == ["held"])
        assert words == {"w1": [True], "w2": [True]}
        late = web.hosts[-1]
        assert not any(host == late.name for host, _ in page_counts(crawl))
        rows, problems = first.intake.seed_urls([(1, web.seeds()[-1])], "late", clock.now())
        assert not problems
        await store.add_urls(rows)  # from outside: no worker is told
        late_pages = {(late.name, path) for host, path in allowed(web) if host == late.name}
        await until("the late host was crawled",
                    lambda: late_pages <= set(page_counts(crawl)))
        await until("both found the crawl over again", lambda: keeper.waiting == ["held"])
        keeper.said("held", True)
        statuses = await asyncio.gather(*runs)

        assert [s.stop_reason for s in statuses] == ["nothing due", "nothing due"]
        assert words == {"w1": [True, False, True], "w2": [True, False, True]}
        counts = page_counts(crawl)
        assert set(counts) == allowed(web) and max(counts.values()) == 1
        view = await store.cluster_view()  # type: ignore[attr-defined]
        assert view.handovers == {"graceful": 0, "takeover": 0}

    run_virtual(go())
