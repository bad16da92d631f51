"""A churn soak: worker processes crawl a recrawled test web while faults come and go.

Three ``courtier worker`` processes (:mod:`tests.integration.cluster.harness`) crawl
the local test web of :func:`churn_web` continuously — every page is due again
:data:`RECRAWL` seconds after its fetch (a ``default`` refresh tier of that fixed
interval; redirects and 404s keep their own long intervals, so they are fetched once)
— on a PostgreSQL server of the soak's own (:mod:`tests.pg_server`), while one fault
after another is applied, ``gap`` seconds apart (drawn from a seeded generator):

``kill``        ``kill -9`` of a worker
``leave``       SIGTERM: a graceful leave (drain, commit, release, leave), exit status 0
``join``        a worker with a new id started
``stop``        SIGSTOP for twice the lease TTL, then SIGCONT
``pg_restart``  ``pg_ctl restart -m immediate`` of the server (crash recovery on start)

The soak lasts ``seconds`` and until every kind has happened once. Between two and
four workers run at any time; the oldest (``w0``) is never killed nor made to leave, so
one worker lives through the whole soak (its memory is judged over all of it). The
victim of a kill, leave or stop holds a Crawl-delay host when one does, and a joining
worker's id is one that takes a Crawl-delay host: each fault moves such a host, whose
3 s Crawl-delay is longer than a handover takes (a new owner that ignored the host's
saved politeness clock would come too early). A fault waits until the cluster settled
after the previous one: every shard held by its rendezvous target among the up
workers (a worker that never gives shards back fails that wait).

Judged afterwards from the test web's log and the store (:meth:`SoakReport.problems`):

* politeness: no violation in the server's whole log, each host at its own delay;
* no URL lost: every expected URL fetched and with an event, and every URL that
  answered 200 or 304 fetched again after the last fault had settled;
* no duplicate event: one event per (url_key, version), each URL's versions 1…n;
* every shard owned again after each fault: :attr:`Outage.seen` (until the first read
  that saw every shard owned by an up worker) at most the caller's bound;
* no shard without an up owner while no fault is going on, unless a worker's
  coordinator went longer than the lease TTL between two rounds when it began (the
  machine kept the worker from renewing: the leases lapse by design) — such a lapse
  must end within the caller's bound too (:meth:`SoakReport.stall_behind`);
* graceful exits (the leaves, the final stop) with status 0;
* memory (:meth:`SoakReport.rss_problems`): each worker's RSS, sampled every
  ``rss_every`` seconds, at its end within 10 % of its first sample after ``warm_up``
  seconds of its life and its first :data:`WARM_UP_PAGES` page requests.

:class:`~tests.integration.cluster.coverage.CoverageWatch` reads the lease rows all along.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from courtier.cluster.rendezvous import target_owners
from courtier.core.urls import SHARD_COUNT, canonicalize
from courtier.testweb.spec import HostSpec, WebSpec, default_web
from tests.integration.cluster.coverage import (
    CoverageWatch,
    Episode,
    RoundGap,
    episodes,
    round_gaps,
)
from tests.integration.cluster.harness import (
    DEADLINE,
    TTL,
    Cluster,
    WorkerProcess,
    agent_of,
    serving,
    wait_for,
)
from tests.pg_server import ThrowawayServer, throwaway_server

KINDS = ("kill", "leave", "join", "stop", "pg_restart")
#: seconds after its fetch a page is due again
RECRAWL = 20.0
#: worker flags of the soak: every page due again RECRAWL seconds after its fetch
RECRAWL_FLAGS = ["--tier", f"default min={RECRAWL:g} max={RECRAWL:g}"]
#: Crawl-delay of the slow hosts: longer than a graceful handover takes
SLOW_DELAY = 3.0
#: fewest and most workers running between faults
FEWEST, MOST = 2, 4
#: seconds of a worker's life before its RSS counts as warmed up (the bench's)
WARM_UP = 300.0
#: pages a worker must have requested before its RSS counts as warmed up: the HTML
#: parser, numpy and the SimHash are loaded at a worker's first page, not at its start
#: (seen: a worker whose sample at 300 s came before its first pages, 15 MiB below the
#: others', judged as a 28 % growth)
WARM_UP_PAGES = 20
#: a worker's RSS at its end within this share of its RSS after the warm-up
RSS_FLAT = 0.10
#: seconds after a long round (its second heartbeat first seen) in which a lapse still
#: counts as behind it: five of the watch's reads (every 0.2 s)
STALL_SLACK = 1.0


def churn_web() -> WebSpec:
    """Five hosts at ``--delay`` (every robots flavour but Crawl-delay: allow all,
    disallow some, 404, 500, redirect) and four with a Crawl-delay of :data:`SLOW_DELAY`."""
    fast = [h for h in default_web(n_hosts=6, pages_per_host=6, latency=0.02).hosts
            if h.robots != "crawl_delay"]
    slow = [HostSpec(f"slow{i}.courtier.test", pages=2, robots="crawl_delay",
                     crawl_delay=SLOW_DELAY, latency=0.02) for i in range(4)]
    return WebSpec(hosts=fast + slow)


@contextlib.asynccontextmanager
async def churn_cluster(root: Path) -> AsyncIterator[tuple[Cluster, ThrowawayServer]]:
    """A throwaway PostgreSQL server, the test web of :func:`churn_web` and a
    :class:`Cluster` of recrawling workers on them (none started yet)."""
    with throwaway_server() as server:
        dsn = await server.create_database("churn")
        async with serving(dsn, root, churn_web(), extra=RECRAWL_FLAGS) as cluster:
            yield cluster, server


# ---- what a soak records -----------------------------------------------------------------


@dataclass
class Moment:
    """A moment of a fault after which every shard must be owned again: ``acted`` when
    the soak acted (monotonic), ``ref`` where the outage is counted from (a join: the
    newcomer's first heartbeat in the store, its start-up being no cluster matter),
    ``downtime`` seconds the store was down (a restart)."""

    label: str
    acted: float
    ref: float
    downtime: float = 0.0


@dataclass
class Fault:
    kind: str
    victim: str
    moments: list[Moment] = field(default_factory=list)
    settled: float | None = None  # monotonic: every shard held by its rendezvous target
    exit_code: int | None = None  # a leave's


@dataclass(frozen=True)
class Outage:
    """How long after ``moment.ref`` every shard was owned again: ``sure`` the last read
    that saw one without an up owner (a lower bound), ``seen`` the end of the first read
    that saw them all owned (an upper bound; None: never). 0 when no read saw a gap."""

    moment: Moment
    sure: float
    seen: float | None
    worst: int


@dataclass
class RssFigures:
    """A worker's VmRSS (KiB) when its warm-up ended and at its last sample."""

    worker_id: str
    lived: float
    warm: int | None
    last: int

    @property
    def ratio(self) -> float | None:
        return None if not self.warm else self.last / self.warm


@dataclass
class SoakReport:
    began: float
    ended: float
    faults: list[Fault]
    outages: list[Outage]
    quiet_lapses: list[Episode]  # shards without an up owner while no fault was going on
    round_gap: RoundGap  # the longest between two coordinator rounds of a worker, no fault on
    long_rounds: list[RoundGap]  # gaps between two rounds longer than the lease TTL, no fault on
    requests: int
    pages: int
    events: int
    violations: list[str]
    never_fetched: list[str]
    without_event: list[str]
    not_recrawled: list[str]
    duplicate_events: list[str]
    version_gaps: list[str]
    exit_codes: dict[str, int | None]
    rss: list[RssFigures]
    stopped_early: str | None = None  # why faults stopped before the end, if they did

    def stall_behind(self, lapse: Episode) -> RoundGap | None:
        """The round gap longer than the lease TTL that ``lapse`` began in, or just
        after (:data:`STALL_SLACK`: the watch runs on the same machine and may have been
        held up too): a worker's coordinator could not renew its leases in time, so they
        lapsed as the protocol says they must. None: the lapse has no such excuse."""
        return next((gap for gap in self.long_rounds
                     if gap.seen - gap.seconds <= lapse.first <= gap.seen + STALL_SLACK),
                    None)

    def lapse_lines(self) -> list[str]:
        """A line for each lapse with no fault going on, with the long round behind it."""
        lines = []
        for lapse in self.quiet_lapses:
            stall = self.stall_behind(lapse)
            behind = "no long round" if stall is None else (
                f"a round of {stall.seconds:.2f} s ({stall.worker})")
            lines.append(f"lapse with no fault going on {lapse.first - self.began:.1f} s in, "
                         f"{lapse.worst} shards out, behind {behind}")
        return lines

    def problems(self, outage_bound: Callable[[Outage], float],
                 stall_bound: float) -> list[str]:
        """Everything that went wrong (empty: the soak passed); an outage is a problem
        when its ``seen`` is above ``outage_bound(outage)``, a lapse with no fault going
        on when no long round is behind it or it lasted (first uncovered read to the end
        of the first covered one) more than ``stall_bound`` seconds."""
        found = []
        if self.stopped_early:
            found.append(self.stopped_early)
        for outage in self.outages:
            bound = outage_bound(outage)
            if outage.seen is None or outage.seen > bound:
                seen = "never" if outage.seen is None else f"{outage.seen:.2f} s"
                found.append(f"{outage.moment.label}: shards owned again after {seen}, "
                             f"bound {bound:.2f} s")
        for lapse in self.quiet_lapses:
            what = (f"{lapse.worst} shards without an up owner with no fault going on, "
                    f"{lapse.first - self.began:.1f} s into the soak"
                    + (f" ({lapse.failed} reads of the store failed)" if lapse.failed else ""))
            stall = self.stall_behind(lapse)
            if stall is None:
                found.append(what)
                continue
            lasted = None if lapse.owned_by is None else lapse.owned_by - lapse.first
            if lasted is None or lasted > stall_bound:
                owned = "never" if lasted is None else f"after {lasted:.2f} s"
                found.append(f"{what}, behind a round of {stall.seconds:.2f} s "
                             f"({stall.worker}): owned again {owned}, bound "
                             f"{stall_bound:.2f} s")
        named = [("politeness violations", self.violations),
                 ("expected URLs never fetched", self.never_fetched),
                 ("expected URLs without an event", self.without_event),
                 ("URLs not fetched again after the last fault", self.not_recrawled),
                 ("duplicate events", self.duplicate_events),
                 ("URLs whose versions are not 1..n", self.version_gaps)]
        found += [f"{len(items)} {name}, e.g. {items[:3]}" for name, items in named if items]
        bad_exits = {w: c for w, c in self.exit_codes.items() if c != 0}
        if bad_exits:
            found.append(f"graceful stops that did not exit 0: {bad_exits}")
        return found

    def rss_problems(self, judged_after: float, flat: float = RSS_FLAT) -> list[str]:
        """Workers that lived at least ``judged_after`` seconds whose last RSS is not
        within ``flat`` of their RSS after the warm-up; a problem too when no worker
        lived that long."""
        judged = [r for r in self.rss if r.ratio is not None and r.lived >= judged_after]
        if not judged:
            return [f"no worker lived {judged_after:.0f} s to have its RSS judged"]
        return [f"{r.worker_id}: RSS {r.warm} KiB after the warm-up, {r.last} KiB at the end "
                f"(ratio {r.ratio:.3f})" for r in judged
                if r.ratio is not None and abs(r.ratio - 1) > flat]

    def kinds(self) -> collections.Counter[str]:
        return collections.Counter(f.kind for f in self.faults)


# ---- the soak ------------------------------------------------------------------------------


class Soak:
    """Drives one soak on ``cluster`` (workers not started yet) and ``server`` (the
    PostgreSQL server the cluster's store is on): see the module docstring."""

    def __init__(self, cluster: Cluster, server: ThrowawayServer, seconds: float,
                 gap: tuple[float, float], seed: int, rss_every: float = 5.0,
                 warm_up: float = WARM_UP, say: Callable[[str], None] = lambda _: None) -> None:
        self.cluster = cluster
        self.server = server
        self.seconds = seconds
        self.gap = gap
        self.rng = random.Random(seed)
        self.rss_every = rss_every
        self.warm_up = warm_up
        self.say = say
        self.state: dict[str, str] = {}  # worker id → "up", "stopped" or "gone"
        self.started: dict[str, float] = {}
        self.rss: dict[str, list[tuple[float, int]]] = collections.defaultdict(list)
        self.watch = CoverageWatch(cluster, self.up)
        self.faults: list[Fault] = []
        self.exit_codes: dict[str, int | None] = {}
        self.began = 0.0
        self._next_id = 3
        slow = [h.name for h in cluster.spec.of_kind("crawl_delay")]
        self.slow_shards = {canonicalize(cluster.server.url(h, "/")).shard for h in slow}

    def up(self) -> frozenset[str]:
        return frozenset(w for w, s in self.state.items() if s == "up")

    # ---- the run -------------------------------------------------------------------------

    async def run(self) -> SoakReport:
        watching = asyncio.create_task(self.watch.run())
        sampling = asyncio.create_task(self._sample_rss())
        stopped_early = None
        try:
            await self._start_three()
            self.began = time.monotonic()
            pending = list(KINDS)
            self.rng.shuffle(pending)
            next_at = self.began + self.rng.uniform(*self.gap)
            while pending or next_at < self.began + self.seconds:
                await wait_for("the next fault's time", self._reached(next_at),
                               deadline=max(DEADLINE, next_at - time.monotonic() + 60))
                kind = self._next_kind(pending)
                fault = await self._apply(kind)
                self.faults.append(fault)
                try:
                    await wait_for(f"the cluster settled after {kind} {fault.victim}",
                                   self._settled)
                except AssertionError as exc:
                    stopped_early = str(exc)
                    break
                fault.settled = time.monotonic()
                self.say(f"{fault.settled - self.began:7.1f} s  {fault.moments[0].label}: "
                         f"settled {fault.settled - fault.moments[0].acted:.1f} s after")
                next_at = fault.moments[0].acted + self.rng.uniform(*self.gap)
            last_mark = time.monotonic()
            not_recrawled = await self._recrawled_since(last_mark)
            ended = time.monotonic()
            await self._stop_all()
        finally:
            for task in (watching, sampling):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        return await self._report(ended, not_recrawled, stopped_early)

    async def _start_three(self) -> None:
        await self._start("w0", *self.cluster.server.web.seeds())
        await self._start("w1")
        await self._start("w2")
        await wait_for("three workers holding their rendezvous targets", self._settled)
        hosts = {canonicalize(u).host for u in self.cluster.server.web.expected_fetches()}

        async def every_host_under_way() -> bool:
            return hosts <= {r.host for r in self.cluster.page_log()}

        await wait_for("every host under way", every_host_under_way)

    async def _start(self, worker_id: str, *seeds: str) -> WorkerProcess:
        worker = await self.cluster.start(worker_id, *seeds)
        self.state[worker_id] = "up"
        self.started[worker_id] = time.monotonic()
        return worker

    def _reached(self, at: float) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return time.monotonic() >= at
        return check

    def _check_alive(self) -> None:
        """Fail when a worker the soak did not end has exited (with the end of its log)."""
        for worker_id, state in self.state.items():
            worker = self.cluster.workers[worker_id]
            if state != "gone" and not worker.alive:
                tail = worker.stderr.read_text(errors="replace").splitlines()[-30:]
                raise AssertionError(f"{worker_id} exited by itself with status "
                                     f"{worker.proc.returncode}:\n" + "\n".join(tail))

    async def _settled(self) -> bool:
        """Every shard held (unexpired) by its rendezvous target among the up members."""
        self._check_alive()
        view = await self.cluster.view()
        members = {w.worker_id for w in view.workers} & self.up()
        owners = {lease.shard: lease.owner for lease in view.leases
                  if lease.owner is not None and lease.expires_at > view.now}
        targets = target_owners(range(SHARD_COUNT), dict.fromkeys(members, 1.0))
        return members == self.up() and owners == targets

    def _next_kind(self, pending: list[str]) -> str:
        """The first pending kind the number of workers allows, else a random allowed
        one (a join when only FEWEST run, never a join when MOST run)."""
        running = sum(1 for s in self.state.values() if s != "gone")
        allowed = [k for k in KINDS if not (k == "join" and running >= MOST)
                   and not (k in ("kill", "leave") and running <= FEWEST)]
        for kind in pending:
            if kind in allowed:
                pending.remove(kind)
                return kind
        return self.rng.choice(allowed)

    # ---- faults ----------------------------------------------------------------------------

    async def _apply(self, kind: str) -> Fault:
        if kind == "join":
            return await self._join()
        if kind == "pg_restart":
            return await self._pg_restart()
        victim = await self._victim(spare_oldest=kind in ("kill", "leave"))
        process = self.cluster.workers[victim].proc
        fault = Fault(kind, victim)
        acted = time.monotonic()
        if kind == "kill":
            self.state[victim] = "gone"
            process.send_signal(signal.SIGKILL)
            fault.moments.append(Moment(f"kill {victim}", acted, acted))
            await process.wait()
        elif kind == "leave":
            process.send_signal(signal.SIGTERM)
            fault.moments.append(Moment(f"leave {victim}", acted, acted))
            try:
                fault.exit_code = await asyncio.wait_for(process.wait(), DEADLINE)
            except TimeoutError:
                process.kill()
                fault.exit_code = await process.wait()
            self.state[victim] = "gone"
            self.exit_codes[f"{victim} (leave)"] = fault.exit_code
        else:  # stop
            self.state[victim] = "stopped"
            process.send_signal(signal.SIGSTOP)
            fault.moments.append(Moment(f"stop {victim}", acted, acted))
            await wait_for("twice the lease TTL stopped", self._reached(acted + 2 * TTL))
            process.send_signal(signal.SIGCONT)
            woken = time.monotonic()
            self.state[victim] = "up"
            fault.moments.append(Moment(f"cont {victim}", woken, woken))
        return fault

    async def _victim(self, spare_oldest: bool) -> str:
        """A random up worker holding a Crawl-delay host if one does (the oldest spared)."""
        eligible = sorted(w for w in self.up() if not (spare_oldest and w == "w0"))
        owners = await self.cluster.owners()
        holding = sorted({owners[s] for s in self.slow_shards if owners.get(s) in eligible})
        return self.rng.choice(holding or eligible)

    async def _join(self) -> Fault:
        members = tuple(sorted(self.up()))
        newcomer = self._newcomer(members)
        acted = time.monotonic()
        await self._start(newcomer)

        async def joined() -> bool:
            return newcomer in {w.worker_id for w in (await self.cluster.view()).workers}

        await wait_for(f"{newcomer} in the membership", joined)
        return Fault("join", newcomer, [Moment(f"join {newcomer}", acted, time.monotonic())])

    def _newcomer(self, members: tuple[str, ...]) -> str:
        """The first fresh id whose join moves a Crawl-delay host to it (else the first)."""
        first = f"w{self._next_id}"
        for n in range(self._next_id, self._next_id + 100):
            newcomer = f"w{n}"
            targets = target_owners(sorted(self.slow_shards),
                                    dict.fromkeys((*members, newcomer), 1.0))
            if newcomer in targets.values():
                self._next_id = n + 1
                return newcomer
        self._next_id += 1
        return first

    async def _pg_restart(self) -> Fault:
        acted = time.monotonic()
        await self.server.arestart_immediate()
        downtime = time.monotonic() - acted
        return Fault("pg_restart", "", [Moment("pg_restart", acted, acted, downtime)])

    # ---- the end -------------------------------------------------------------------------

    async def _recrawled_since(self, mark: float) -> list[str]:
        """Wait until every URL that answered 200 or 304 was fetched again after ``mark``
        and every expected URL was fetched; return those that were not (on giving up)."""
        cluster = self.cluster
        cycling = {cluster.server.url(r.host, r.path_qs) for r in cluster.page_log()
                   if r.status in (200, 304)}
        cycling &= cluster.server.web.expected_fetches()
        seen: set[str] = set()
        index = 0

        async def all_again() -> bool:
            nonlocal index
            log = cluster.server.log
            for record in log[index:]:
                if record.start > mark:
                    seen.add(cluster.server.url(record.host, record.path_qs))
            index = len(log)
            return cycling <= seen

        try:
            await wait_for("every recrawled URL fetched again after the last fault", all_again)
        except AssertionError:
            return sorted(cycling - seen)
        return []

    async def _stop_all(self) -> None:
        for worker_id, state in self.state.items():
            if state == "stopped":
                self.cluster.workers[worker_id].proc.send_signal(signal.SIGCONT)
        live = [w for w, s in self.state.items() if s != "gone"]
        codes = await self.cluster.stop_all()
        for worker_id in live:
            self.exit_codes[worker_id] = codes.get(worker_id)
            self.state[worker_id] = "gone"

    async def _sample_rss(self) -> None:
        while True:
            for worker_id, state in list(self.state.items()):
                if state != "gone":
                    kib = vm_rss_kib(self.cluster.workers[worker_id].proc.pid)
                    if kib:
                        self.rss[worker_id].append((time.monotonic(), kib))
            await asyncio.sleep(self.rss_every)

    async def _report(self, ended: float, not_recrawled: list[str],
                      stopped_early: str | None) -> SoakReport:
        cluster = self.cluster
        expected = cluster.server.web.expected_fetches()
        events = await cluster.events()
        versions: dict[str, list[int]] = collections.defaultdict(list)
        url_of: dict[str, str] = {}
        for event in events:
            versions[event.url_key].append(event.version)
            url_of[event.url_key] = event.payload["url"]
        duplicates = sorted(f"{url_of[k]} v{v}" for k, vs in versions.items()
                            for v, n in collections.Counter(vs).items() if n > 1)
        gaps = sorted(url_of[k] for k, vs in versions.items()
                      if sorted(set(vs)) != list(range(1, len(set(vs)) + 1)))
        with_event = set(url_of.values())
        fetched = cluster.fetched()
        outages, lapses = self._outages(ended)
        rounds = round_gaps(self.watch.reads, self._quiet_spans(ended))
        return SoakReport(
            began=self.began, ended=ended, faults=self.faults, outages=outages,
            quiet_lapses=lapses,
            round_gap=max(rounds, key=lambda g: g.seconds,
                          default=RoundGap(0.0, "", self.began)),
            long_rounds=[g for g in rounds if g.seconds > self.cluster.lease_ttl],
            requests=len(cluster.log()), pages=len(cluster.page_log()), events=len(events),
            violations=cluster.violations(), never_fetched=sorted(expected - fetched),
            without_event=sorted(expected - with_event), not_recrawled=not_recrawled,
            duplicate_events=duplicates, version_gaps=gaps, exit_codes=self.exit_codes,
            rss=self._rss_figures(), stopped_early=stopped_early)

    def _windows(self) -> list[tuple[Moment, float]]:
        """Each moment with the time its window ends: the next moment of its fault, else
        the fault's settling."""
        spans: list[tuple[Moment, float]] = []
        for fault in self.faults:
            ends = [m.acted for m in fault.moments[1:]] + [fault.settled or float("inf")]
            spans += list(zip(fault.moments, ends, strict=True))
        return spans

    def _outages(self, ended: float) -> tuple[list[Outage], list[Episode]]:
        """Each moment's outage (the uncovered reads that began in its window), and the
        runs of uncovered reads outside every window (before the final stop)."""
        found = episodes(r for r in self.watch.reads if self.began <= r.before < ended)
        outages = []
        claimed: set[int] = set()
        for moment, end in self._windows():
            # (a read under way when the soak acted may see the victim down already)
            mine = [e for e in found if id(e) not in claimed
                    and moment.acted <= e.first_end and e.first < end]
            claimed |= {id(e) for e in mine}
            if not mine:
                outages.append(Outage(moment, 0.0, 0.0, 0))
                continue
            last = mine[-1]
            seen = None if last.owned_by is None else max(0.0, last.owned_by - moment.ref)
            outages.append(Outage(moment, max(0.0, last.last - moment.ref), seen,
                                  max(e.worst for e in mine)))
        return outages, [e for e in found if id(e) not in claimed]

    def _quiet_spans(self, ended: float) -> list[tuple[float, float]]:
        """Monotonic spans with no fault going on: from the soak's start (or a fault's
        settling) to the next fault."""
        starts = [self.began] + [f.settled for f in self.faults if f.settled is not None]
        ends = [f.moments[0].acted for f in self.faults] + [ended]
        return [(a, b) for a, b in zip(starts, ends, strict=False) if b > a]

    def _rss_figures(self) -> list[RssFigures]:
        figures = []
        for worker_id, samples in sorted(self.rss.items()):
            born = self.started[worker_id]
            warmed = born + self.warm_up
            pages = sorted(r.start for r in self.cluster.page_log()
                           if r.user_agent == agent_of(worker_id) and r.start >= born)
            if len(pages) < WARM_UP_PAGES:
                figures.append(RssFigures(worker_id, samples[-1][0] - born, None,
                                          samples[-1][1]))
                continue
            warmed = max(warmed, pages[WARM_UP_PAGES - 1])
            warm = next((kib for at, kib in samples if at >= warmed), None)
            figures.append(RssFigures(worker_id, samples[-1][0] - born, warm, samples[-1][1]))
        return figures


def vm_rss_kib(pid: int) -> int:
    """A process's VmRSS in KiB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
