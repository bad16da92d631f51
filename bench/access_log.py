"""Independent observer: coverage and politeness read from nginx's access log.

The log format (see ``nginx.conf.template``) is tab-separated::

    $host  $request_uri  $msec  $request_time  $status
    $body_bytes_sent  $connection  $http_user_agent        (one line, 8 fields)

``$msec`` is when nginx wrote the line (the response was handed to the
kernel), ``$request_time`` how long the request took from its first byte, so a
request occupies ``[msec - request_time, msec]`` on the server's clock.

Politeness checks, per host (``$host``, i.e. without the port):

* **concurrency** — a request that starts before an earlier request of the
  same host has ended (``max_in_flight`` = 1) is one violation;
* **gap** — a request whose start is less than ``delay`` after the previous
  start of the same host is one violation;
* **robots order** — a request other than ``/robots.txt`` that starts before
  the host's first ``/robots.txt`` request ended (or on a host whose
  robots.txt was never requested) is one violation;
* **disallowed** — a request whose path starts with a robots-disallowed prefix
  (robots.txt itself never counts).

The prefixes and the delay are the same for every host unless ``host_rules``
gives a host its own (:class:`HostRules`: the realistic web's robots.txt answers
differ per host, and a Crawl-delay raises that host's gap).

Both timing checks allow ``tolerance`` seconds of slack for the millisecond
resolution of the log and for the loopback/event-loop latency between the
crawler's send and nginx's read; the minimum observed gap is reported too, so
the slack is visible.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROBOTS_URI = "/robots.txt"


@dataclass(frozen=True)
class LogEntry:
    """One request as nginx saw it (times in seconds since the epoch)."""

    host: str
    uri: str
    start: float
    end: float
    status: int
    size: int
    connection: int
    user_agent: str


def parse_line(line: str) -> LogEntry | None:
    """Parse one line of the ``bench`` log format; ``None`` for a malformed line."""
    parts = line.rstrip("\n").split("\t")
    if len(parts) < 8:
        return None
    try:
        end = float(parts[2])
        took = float(parts[3])
        return LogEntry(
            host=parts[0].lower(),
            uri=parts[1],
            start=end - took,
            end=end,
            status=int(parts[4]),
            size=int(parts[5]),
            connection=int(parts[6]),
            user_agent=parts[7],
        )
    except ValueError:
        return None


def read_log(path: str | Path) -> list[LogEntry]:
    """All well-formed entries of an access log file (empty list if it is absent)."""
    p = Path(path)
    if not p.exists():
        return []
    with p.open(encoding="utf-8", errors="replace") as fh:
        return [e for e in map(parse_line, fh) if e is not None]


@dataclass(frozen=True)
class HostRules:
    """What one host asks of a polite crawler: disallowed path prefixes (``"/"`` for
    all) and the smallest gap between two request starts."""

    disallow: tuple[str, ...]
    gap: float


@dataclass
class PolitenessReport:
    """Violations counted by :func:`check_politeness` (0 everywhere = polite)."""

    hosts: int = 0
    requests: int = 0
    concurrency: int = 0
    gap: int = 0
    robots_order: int = 0
    disallowed: int = 0
    min_gap: float | None = None
    max_in_flight: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        """All violations of all kinds."""
        return self.concurrency + self.gap + self.robots_order + self.disallowed

    def _note(self, text: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(text)


def check_politeness(
    entries: Iterable[LogEntry],
    delay: float,
    tolerance: float = 0.01,
    disallowed_prefixes: Iterable[str] = ("/private/",),
    host_rules: Mapping[str, HostRules] | None = None,
) -> PolitenessReport:
    """Count politeness violations per host; see the module docstring for the rules.

    A host in ``host_rules`` is judged by its own prefixes and gap instead of
    ``disallowed_prefixes`` and ``delay``."""
    by_host: dict[str, list[LogEntry]] = defaultdict(list)
    for e in entries:
        by_host[e.host].append(e)
    default = HostRules(tuple(disallowed_prefixes), delay)
    rules = host_rules or {}
    rep = PolitenessReport(hosts=len(by_host))
    for host, reqs in by_host.items():
        own = rules.get(host, default)
        reqs.sort(key=lambda e: (e.start, e.end))
        rep.requests += len(reqs)
        robots_end = min((e.end for e in reqs if e.uri == ROBOTS_URI), default=None)
        busy_until = float("-inf")
        open_ends: list[float] = []
        prev_start: float | None = None
        for e in reqs:
            open_ends = [t for t in open_ends if t > e.start + tolerance] + [e.end]
            rep.max_in_flight = max(rep.max_in_flight, len(open_ends))
            if e.start < busy_until - tolerance:
                rep.concurrency += 1
                rep._note(f"{host}: {e.uri} started {busy_until - e.start:.3f}s before end")
            busy_until = max(busy_until, e.end)
            if prev_start is not None:
                gap = e.start - prev_start
                rep.min_gap = gap if rep.min_gap is None else min(rep.min_gap, gap)
                if gap < own.gap - tolerance:
                    rep.gap += 1
                    rep._note(f"{host}: {e.uri} only {gap:.3f}s after previous start")
            prev_start = e.start
            if e.uri != ROBOTS_URI and (robots_end is None or e.start < robots_end - tolerance):
                rep.robots_order += 1
                rep._note(f"{host}: {e.uri} before robots.txt")
            path = e.uri.split("?", 1)[0]
            if e.uri != ROBOTS_URI and path.startswith(own.disallow):
                rep.disallowed += 1
                rep._note(f"{host}: fetched disallowed {e.uri}")
    return rep


@dataclass(frozen=True)
class CoverageReport:
    """How much of the web a crawl fetched, counted by the server.

    ``distinct`` counts pages that exist (from the manifest) and were served
    with status 200 at least once; ``page_requests`` counts every such
    response, so ``page_requests - distinct`` are refetches. ``first_start`` and
    ``last_end`` bound every request; ``last_page_end`` is the end of the last
    page response (the crawl window ends there: what comes later is waiting,
    such as retries of an unreachable robots.txt).
    """

    existing: int
    distinct: int
    page_requests: int
    robots_requests: int
    other_requests: int
    first_start: float | None
    last_end: float | None
    last_page_end: float | None = None

    @property
    def coverage(self) -> float:
        """distinct / existing (0.0 for an empty web)."""
        return self.distinct / self.existing if self.existing else 0.0

    @property
    def refetches(self) -> int:
        """Responses for pages that had already been served once."""
        return self.page_requests - self.distinct


def check_coverage(
    entries: Iterable[LogEntry],
    pages: Mapping[str, list[str]],
    resource: Callable[[str], str] | None = None,
) -> CoverageReport:
    """Compare served pages with ``pages`` (host → URIs that exist and are allowed).

    ``resource`` maps a request URI to the name ``pages`` gives what the server
    served for it (two spellings of one page count as one page and a refetch);
    without it a URI is its own name."""
    wanted = {(h, u) for h, uris in pages.items() for u in uris}
    seen: set[tuple[str, str]] = set()
    page_requests = robots = other = 0
    first: float | None = None
    last: float | None = None
    last_page: float | None = None
    for e in entries:
        first = e.start if first is None else min(first, e.start)
        last = e.end if last is None else max(last, e.end)
        key = (e.host, e.uri if resource is None else resource(e.uri))
        if e.uri == ROBOTS_URI:
            robots += 1
        elif e.status == 200 and key in wanted:
            page_requests += 1
            seen.add(key)
            last_page = e.end if last_page is None else max(last_page, e.end)
        else:
            other += 1
    return CoverageReport(
        existing=len(wanted),
        distinct=len(seen),
        page_requests=page_requests,
        robots_requests=robots,
        other_requests=other,
        first_start=first,
        last_end=last,
        last_page_end=last_page,
    )


def time_to_share(entries: Iterable[LogEntry], share: float) -> float | None:
    """Seconds from the first request's start to the end of the request by which
    ``share`` (0 < share ≤ 1) of all the log's requests had ended: how long a crawl took
    to get that far, on the server's clock (None for an empty log). A long tail (hosts
    with a Crawl-delay) moves the whole window's end, not the time to 90 %."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], not {share}")
    listed = list(entries)
    if not listed:
        return None
    ends = sorted(e.end for e in listed)
    reached = ends[max(1, math.ceil(share * len(ends) - 1e-9)) - 1]
    return reached - min(e.start for e in listed)


#: URI endings of files that are not pages (what an HTML-only crawler should not download)
NON_HTML_SUFFIXES = (".pdf", ".mp4", ".webm", ".mp3", ".png", ".jpg", ".jpeg", ".gif",
                     ".zip", ".iso", ".exe")

#: what a request of (host, URI) got, when it was not a page: (category, the file's full
#: size in bytes, 0 when unknown); None for anything else
NonHtmlOf = Callable[[str, str], tuple[str, int] | None]


def non_html_by_suffix(host: str, uri: str) -> tuple[str, int] | None:
    """The judge of a web without a manifest of its files: the URI's ending
    (:data:`NON_HTML_SUFFIXES`, query left out), size unknown."""
    suffix = uri.split("?", 1)[0].lower().rpartition(".")[2]
    return (suffix, 0) if f".{suffix}" in NON_HTML_SUFFIXES else None


@dataclass(frozen=True)
class TrafficReport:
    """What the log says about connections and non-page files (:func:`check_traffic`)."""

    #: connections nginx accepted per host (``$connection`` serial numbers): over HTTPS
    #: each one began with a TLS handshake, full or resumed
    connections: dict[str, int]
    non_html_requests: int = 0
    non_html_bytes: int = 0  # body bytes nginx sent for them
    #: the body bytes of those requests had each been read to its end (the files' sizes)
    non_html_full_bytes: int = 0
    #: category → [requests, body bytes sent]
    non_html_by_category: dict[str, list[int]] = field(default_factory=dict)

    @property
    def handshakes_total(self) -> int:
        return sum(self.connections.values())

    def handshakes_line(self) -> str:
        """``T over H hosts (median M, max X per host)``."""
        counts = sorted(self.connections.values())
        if not counts:
            return "none"
        median = counts[len(counts) // 2] if len(counts) % 2 else \
            (counts[len(counts) // 2 - 1] + counts[len(counts) // 2]) / 2
        return (f"{self.handshakes_total} over {len(counts)} hosts "
                f"(median {median:g}, max {counts[-1]} per host)")

    def non_html_line(self) -> str:
        """``N requests (pdf a, image b…), B body bytes sent[ of F in full (P %)]``."""
        kinds = ", ".join(f"{c} {n}" for c, (n, _) in sorted(self.non_html_by_category.items()))
        line = (f"{self.non_html_requests} requests{f' ({kinds})' if kinds else ''}, "
                f"{self.non_html_bytes:,} body bytes sent")
        if self.non_html_full_bytes:
            line += (f" of {self.non_html_full_bytes:,} in full "
                     f"({self.non_html_bytes / self.non_html_full_bytes:.1%})")
        return line


def check_traffic(entries: Iterable[LogEntry], non_html_of: NonHtmlOf = non_html_by_suffix
                  ) -> TrafficReport:
    """Connections per host, and the requests and body bytes of non-HTML files
    (``non_html_of`` says which requests got one: by default the URI's ending)."""
    seen: dict[str, set[int]] = defaultdict(set)
    requests = sent = full = 0
    by_category: dict[str, list[int]] = {}
    for e in entries:
        seen[e.host].add(e.connection)
        got = non_html_of(e.host, e.uri)
        if got is not None:
            requests += 1
            sent += e.size
            full += got[1]
            tally = by_category.setdefault(got[0], [0, 0])
            tally[0] += 1
            tally[1] += e.size
    return TrafficReport({h: len(c) for h, c in seen.items()}, requests, sent, full,
                         by_category)
