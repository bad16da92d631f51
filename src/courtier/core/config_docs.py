"""Documentation metadata of every setting of :class:`courtier.core.config.CrawlConfig`.

Together with the dataclass (names, types, defaults) and the crawl parser
(flags), this is the single source of ``docs/configuration.md``: ``courtier
config reference`` renders it, and a test fails when a setting has no entry
here or the committed file is stale. Kept beside config.py rather than inside
the field declarations so that adding a setting stays a one-line change there
plus one entry here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SettingDoc:
    """What a setting means (``text``), where it belongs, and its unit."""

    section: str
    text: str
    unit: str = ""
    secret: bool = False


SECTIONS = ("Crawl", "Politeness", "Scope", "Limits", "Fetching", "Freshness", "Storage",
            "Service", "Cluster")

SETTING_DOCS: dict[str, SettingDoc] = {
    "data": SettingDoc("Storage", "Crawl home: the SQLite store `courtier.db` and the WARC "
                       "files under `warc/`. Running again on the same directory resumes."),
    "store": SettingDoc("Storage", "Where the crawl state lives: a "
                        "`postgresql://user@host:port/db` URL selects the shared PostgreSQL "
                        "store (then `data` holds only the local WARC spool and lock); unset "
                        "means SQLite under `data`; also `COURTIER_STORE`. `config show` "
                        "masks a password in the URL."),
    "seeds": SettingDoc("Crawl", "Seed URLs (positional arguments on the command line)."),
    "seeds_file": SettingDoc("Crawl", "File with one seed URL per line; `#` starts a comment."),
    "delay": SettingDoc("Politeness", "Least time between the starts of two requests to one "
                        "host. robots.txt Crawl-delay and the adaptive delay can only raise "
                        "it.", "seconds"),
    "max_in_flight_per_host": SettingDoc("Politeness", "Requests to one host at the same "
                                         "time."),
    "max_in_flight_per_ip": SettingDoc("Politeness", "Requests at the same time to all hosts "
                                       "served from one IP address; 0 removes the cap."),
    "ip_delay": SettingDoc("Politeness", "Least time between request starts to one IP address "
                           "across its hosts.", "seconds"),
    "concurrency": SettingDoc("Crawl", "Fetches in flight in total across all hosts."),
    "known_urls_cap": SettingDoc("Crawl", "URL keys of the shards a worker holds that it keeps "
                                 "exactly in memory (~19 bytes each) to decide links without "
                                 "the store; shards past it fall back to the Bloom filter and "
                                 "the store's probe. 0 (the default for now) turns the owner-local "
                                 "state off: it loads numpy before a crawl's first request and "
                                 "its gain was not yet shown above the noise (docs/scale-out.md).",
                                 "keys"),
    "scope": SettingDoc("Scope", "Which hosts links are followed to: `seeds-hosts` (the seeds' "
                        "hosts), `seeds-domains` (their registrable domains) or `any`."),
    "include": SettingDoc("Scope", "Regular expressions a URL must match to be crawled "
                          "(repeatable; any one suffices)."),
    "exclude": SettingDoc("Scope", "Regular expressions that reject a URL (repeatable)."),
    "max_depth": SettingDoc("Scope", "Link hops from a seed; deeper URLs are not stored. "
                            "Unset: no limit.", "hops"),
    "max_pages": SettingDoc("Limits", "Stop after this many page fetches. Unset: no limit."
                            " With `--workers N` it is the crawl's limit, split between the"
                            " N workers (a worker whose share is spent stops, its shards go"
                            " to the others)."),
    "max_seconds": SettingDoc("Limits", "Stop after this much time. Unset: no limit.",
                              "seconds"),
    "daily_budget": SettingDoc("Limits", "Page fetches per 24 hours across all hosts (every "
                               "outcome counts), paced over the day; the workers of a "
                               "crawl share it, each pacing its share of the shards. "
                               "Unset: no budget."),
    "user_agent": SettingDoc("Fetching", "User-Agent header; its product token (before the "
                             "`/`) is the name robots.txt groups are matched against."),
    "resolve": SettingDoc("Fetching", "Hosts file (`IP name…` per line) that overrides DNS for "
                          "the names it lists."),
    "allow_network": SettingDoc("Fetching", "CIDR ranges the SSRF guard lets through although "
                                "they are private or loopback (repeatable), e.g. "
                                "`127.0.0.0/8` for a test web."),
    "allowed_ports": SettingDoc("Fetching", "When set, the only TCP ports fetched from "
                                "(repeatable), e.g. 80 and 443."),
    "ca_file": SettingDoc("Fetching", "A private CA certificate (PEM file) trusted for "
                          "HTTPS besides the system trust store; certificates are always "
                          "verified (docs/fetch.md)."),
    "accept_types": SettingDoc("Fetching", "Media types whose bodies page fetches read "
                               "besides HTML and XHTML (repeatable; `type/subtype` or "
                               "`type/*`), e.g. `application/pdf`. Any other 2xx type stops "
                               "after the headers: outcome `not_html`, nothing archived, "
                               "fetched again after the longest recrawl interval; a missing "
                               "or generic type is decided by the first 512 bytes "
                               "(docs/fetch.md)."),
    "strip_params": SettingDoc("Scope", "Query parameters removed from every URL taken in, "
                               "besides the default tracking list (`utm_*`, `gclid`, "
                               "`fbclid`, `msclkid`, `mc_cid`… docs/fetch.md); repeatable: "
                               "`NAME`, a prefix `NAME*`, or `DOMAIN:NAME` for one domain "
                               "and its subdomains."),
    "keep_params": SettingDoc("Scope", "Tracking parameters kept after all (repeatable; "
                              "`NAME`, `NAME*` or `DOMAIN:NAME`); a domain's rule beats a "
                              "general one."),
    "robots_expiry": SettingDoc("Politeness", "How long a robots.txt copy is used before it is "
                                "fetched again; at most 86,400 (RFC 9309).", "seconds"),
    "max_redirect_hops": SettingDoc("Fetching", "Redirects followed from one URL (each hop is "
                                    "scheduled as a new URL under its own host's politeness)."),
    "recrawl_interval": SettingDoc("Freshness", "Starting interval before a fetched page is due "
                                   "again; the recrawl policy then adapts it to the page's "
                                   "change rate.", "seconds"),
    "tiers": SettingDoc("Freshness", "Refresh tiers, each `NAME min=S max=S [start=S] "
                        "[value=V] [url=REGEX …]` (repeatable flag `--tier`, TOML tables "
                        "`[tiers.NAME]` with `min-interval`, `max-interval`, `start-interval`, "
                        "`min-value`, `urls`). A URL's tier bounds its recrawl interval; "
                        "hosts join one with `policy set HOST --tier`. Rules in "
                        "docs/freshness.md."),
    "tail_share": SettingDoc("Freshness", "Share of `daily-budget` the refresh planner leaves "
                             "unplanned, for new URLs and the long tail that the overdue rule "
                             "brings back (0 to below 1)."),
    "change_distance": SettingDoc("Freshness", "A page counts as changed only when its SimHash "
                                  "moved more than this many bits (0–64). Unset: any new "
                                  "payload digest is a change.", "bits"),
    "max_retries": SettingDoc("Fetching", "Retries of a URL after network errors or 5xx before "
                              "it is given up until its next recrawl."),
    "parse_timeout": SettingDoc("Limits", "Time one parse off the event loop may take (large "
                                "or pathological page, sitemap); on overrun the page is kept "
                                "without links.",
                                "seconds"),
    "max_body_bytes": SettingDoc("Limits", "Largest response body read (bytes on the wire); "
                                 "longer bodies are truncated and marked so.", "bytes"),
    "max_decoded_bytes": SettingDoc("Limits", "Largest body after Content-Encoding is undone "
                                    "(guards against compression bombs).", "bytes"),
    "connect_timeout": SettingDoc("Fetching", "Time to open a TCP/TLS connection.", "seconds"),
    "read_timeout": SettingDoc("Fetching", "Longest wait for the next bytes of a response.",
                               "seconds"),
    "total_timeout": SettingDoc("Fetching", "Longest time for one whole fetch.", "seconds"),
    "low_speed_limit": SettingDoc("Fetching", "A body slower than this over low-speed-time "
                                  "is cut (WARC-Truncated: time) and retried later; 0 turns "
                                  "it off.", "bytes/s"),
    "low_speed_time": SettingDoc("Fetching", "Window over which the low-speed limit is "
                                 "judged.", "seconds"),
    "header_timeout": SettingDoc("Fetching", "The status line and all headers must arrive "
                                 "within this time of a fetch's start (DNS and connect "
                                 "included); a server dripping its headers is cut "
                                 "(error_kind `header_timeout`) and retried later.",
                                 "seconds"),
    "warc_max_bytes": SettingDoc("Storage", "WARC files are rotated when they reach this size.",
                                 "bytes"),
    "archive": SettingDoc("Storage", "WARC root: a folder (default `DATA/warc`) or an fsspec "
                          "URL such as `s3://bucket/prefix`; object-store segments are "
                          "spooled under `DATA/spool` and uploaded (docs/archive.md)."),
    "archive_prefix": SettingDoc("Storage", "This worker's prefix in the object store "
                                 "(default: the host name)."),
    "archive_endpoint": SettingDoc("Storage", "S3 endpoint URL (default: `AWS_ENDPOINT_URL`)."),
    "archive_region": SettingDoc("Storage", "S3 region (default: `AWS_DEFAULT_REGION`)."),
    "archive_segment_bytes": SettingDoc("Storage", "Object-store segments are closed and "
                                        "uploaded at this size.", "bytes"),
    "archive_segment_age": SettingDoc("Storage", "… or this long after they were opened.",
                                      "seconds"),
    "host_window": SettingDoc("Crawl", "URLs of one host held in memory at a time (the rest "
                              "wait in the store)."),
    "memory_window": SettingDoc("Crawl", "URLs held in memory across all hosts; memory depends "
                                "on this, never on the number of known URLs."),
    "continuous": SettingDoc("Crawl", "Keep running for recrawls instead of ending when nothing "
                             "is due (`courtier worker` always does)."),
    "probe_sitemap_xml": SettingDoc("Crawl", "Also fetch `/sitemap.xml` of every host; "
                                    "`Sitemap:` lines of robots.txt are always followed."),
    "api": SettingDoc("Service", "`HOST:PORT` (or `http://HOST:PORT`, `[::1]:PORT`) of the "
                      "admin API, `/metrics` and the dashboard. "
                      "Non-loopback addresses need `api-token`. `courtier worker` defaults to "
                      "127.0.0.1:8790."),
    "api_token": SettingDoc("Service", "Bearer token the admin API requires. Prefer the "
                            "environment (`COURTIER_API_TOKEN`) or `api-token-file`: a flag shows "
                            "in `ps`.", secret=True),
    "api_token_file": SettingDoc("Service", "File whose first line is the admin API token "
                                 "(instead of `api-token`; not both)."),
    "api_allowed_hosts": SettingDoc("Service", "Host header values the API accepts besides "
                                    "loopback names when it runs without a token (a defence "
                                    "against DNS rebinding); others get 421 (repeatable)."),
    "traps": SettingDoc("Scope", "Crawler-trap thresholds as `NAME=VALUE` (repeatable flag "
                        "`--trap`, TOML table `[traps]`, `COURTIER_TRAPS`); names and defaults "
                        "in docs/traps.md."),
    "linger": SettingDoc("Crawl", "How long a one-shot crawl waits for retries and backed-off "
                         "hosts before ending; later ones are kept for the next run.",
                         "seconds"),
    "progress": SettingDoc("Service", "Progress display: `auto` (a live line on a terminal, log "
                           "lines otherwise), `bar`, `log` or `none`."),
    "log_format": SettingDoc("Service", "Log lines on stderr: `text` (`TIME LEVEL LOGGER: "
                             "message`, the default on a terminal and off it) or `json`: one "
                             "object per line with the stable keys `time`, `level`, `logger`, "
                             "`event`, `message` and, when known, `host`, `url`, `shard`, "
                             "`worker`, `outcome`, `reason` (docs/operations.md, \"Logs\"). "
                             "Also `COURTIER_LOG_FORMAT`."),
    "durability": SettingDoc("Storage", "SQLite commits: `normal` (WAL, survives kill -9; the "
                             "last commits may be lost on power loss or an OS crash) or "
                             "`full` (fsync every commit)."),
    "events_retention": SettingDoc("Storage", "How long outbox events are kept: older events "
                                   "that every registered consumer (`events --consumer`, "
                                   "`?consumer=`) has passed are removed, about every 10 "
                                   "minutes; a reader below them is told its position was "
                                   "pruned. `0` keeps them for ever (docs/scale-out.md, "
                                   "\"Bounded growth\").", "seconds"),
    "audit_retention": SettingDoc("Storage", "How long audit rows (`courtier export audit`: "
                                  "one per fetch, with robots.txt version and delay) are "
                                  "kept. `0` keeps them for ever.", "seconds"),
    "lease_ttl": SettingDoc("Cluster", "How long a shard lease lasts without renewal (PostgreSQL "
                            "store). Renewed every sixth of it; a worker that cannot renew "
                            "stops starting requests a quarter of it before expiry; a dead "
                            "worker's shards are taken over after it (docs/deployment.md).",
                            "seconds"),
    "worker_id": SettingDoc("Cluster", "This worker's id among the workers of one crawl "
                            "(default: `HOSTNAME-RANDOM`, kept in `DATA/worker-id` so a restart "
                            "takes its own leases back at once)."),
    "worker_weight": SettingDoc("Cluster", "Share of the shards this worker takes relative to "
                                "the others (2: twice as many as a worker of weight 1)."),
    "expect_workers": SettingDoc("Cluster", "Start-up: live workers (this one included) to "
                                 "wait for before taking any shard, for at most one lease "
                                 "TTL, so that workers started together split the shards at "
                                 "once instead of the first taking all and handing most "
                                 "over. The children of `crawl --workers N` wait for each "
                                 "other without it, and without a time limit (their start "
                                 "gate: docs/scale-out.md, \"Membership\"); given to "
                                 "`crawl --workers N` above N, its children then also wait "
                                 "for workers started elsewhere, up to that many in all."),
    "join": SettingDoc("Cluster", "`courtier crawl` on a shared (PostgreSQL) store: join the "
                       "live workers already crawling it. Without it, a crawl that finds "
                       "another live worker (a fresh heartbeat or an unexpired shard lease) "
                       "refuses to start, naming them, instead of silently joining their "
                       "cluster. `courtier worker` always joins."),
    "workers": SettingDoc("Cluster", "`courtier crawl`: worker processes to run on this machine "
                          "(one per core); more than 1 needs a PostgreSQL `--store`."),
}
