"""One frozen, typed settings object.

Precedence: defaults < TOML file (``--config``) < environment (``COURTIER_*``)
< command-line flags. Keys in the file are the flag names without the leading
dashes (``max-in-flight-per-host`` or ``max_in_flight_per_host``). Every
error names the flag, file or key at fault.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from courtier.core.authority import split_authority
from courtier.core.errors import ConfigError


def default_user_agent() -> str:
    """``courtier/<version> (…)``. The version is read from the package metadata only
    when a configuration is built: importing importlib.metadata costs every command
    ~25 ms at start-up, and most never need it (bench/README.md, "Start-up")."""
    from courtier import __version__

    return f"courtier/{__version__} (polite crawler; robots.txt token: courtier)"


SCOPES = ("seeds-hosts", "seeds-domains", "any")


@dataclass(frozen=True, slots=True)
class CrawlConfig:
    """Settings of one crawl. Defaults are polite; see docs/configuration.md."""

    data: Path = Path("crawl-data")
    store: str | None = None           # postgresql://… (None: SQLite under data)
    seeds: tuple[str, ...] = ()
    seeds_file: Path | None = None
    delay: float = 1.0
    max_in_flight_per_host: int = 1
    max_in_flight_per_ip: int = 8
    ip_delay: float = 0.0
    concurrency: int = 64
    known_urls_cap: int = 0   # URL keys held exactly in memory (dedup/known_urls.py); 0: off
    scope: str = "seeds-hosts"
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_depth: int | None = None
    max_pages: int | None = None
    max_seconds: float | None = None
    daily_budget: int | None = None    # page fetches per 24 h, all outcomes counted
    user_agent: str = field(default_factory=default_user_agent)
    resolve: Path | None = None
    allow_network: tuple[str, ...] = ()
    allowed_ports: tuple[str, ...] = ()   # when set, the only TCP ports fetched (e.g. 80, 443)
    ca_file: Path | None = None        # a private CA (PEM) trusted besides the system store
    accept_types: tuple[str, ...] = ()  # media types read besides HTML ("application/pdf",
                                        # "image/*"); other bodies stop after the headers
    strip_params: tuple[str, ...] = ()  # query parameters removed besides the default
                                        # tracking list (NAME, NAME*, DOMAIN:NAME)
    keep_params: tuple[str, ...] = ()   # tracking parameters kept after all (same forms)
    robots_expiry: float = 24 * 3600.0
    max_redirect_hops: int = 5
    recrawl_interval: float = 24 * 3600.0
    tiers: tuple[str, ...] = ()        # refresh tiers "NAME min=S max=S …" (TOML [tiers.NAME])
    tail_share: float = 0.1            # share of the daily budget the planner leaves free
    change_distance: int | None = None  # a page counts as changed only if its SimHash moved
                                        # more than this many bits (None: any new digest)
    max_retries: int = 3
    parse_timeout: float = 10.0        # seconds for a page with very many tags (child process)
    max_body_bytes: int = 10 * 1024 * 1024
    max_decoded_bytes: int = 20 * 1024 * 1024
    connect_timeout: float = 10.0
    read_timeout: float = 20.0
    total_timeout: float = 60.0
    low_speed_limit: int = 1024        # bytes/s a body must beat over low_speed_time (0: off)
    low_speed_time: float = 20.0
    header_timeout: float = 30.0       # status line + headers complete within this (from start)
    warc_max_bytes: int = 1_000_000_000
    archive: str | None = None         # WARC root: a folder or fsspec URL (None: DATA/warc)
    archive_prefix: str | None = None  # this writer's prefix in an object store (host name)
    archive_endpoint: str | None = None  # S3 endpoint URL (else AWS_ENDPOINT_URL)
    archive_region: str | None = None    # S3 region (else AWS_DEFAULT_REGION)
    archive_segment_bytes: int = 64 * 1024 * 1024  # object-store segments rotate at this size
    archive_segment_age: float = 60.0              # … or this many seconds after opening
    host_window: int = 64
    memory_window: int = 20_000
    continuous: bool = False
    probe_sitemap_xml: bool = False    # also try /sitemap.xml of every host (robots Sitemap:
                                       # lines are always followed)
    api: str | None = None             # HOST:PORT of the admin API (None: no API)
    api_token: str | None = None       # bearer token (COURTIER_API_TOKEN)
    api_token_file: Path | None = None  # file holding the token (not visible in ps)
    api_allowed_hosts: tuple[str, ...] = ()  # Host names the API answers besides loopback
    traps: tuple[str, ...] = ()        # NAME=VALUE trap thresholds (TOML table [traps])
    linger: float = 120.0
    progress: str = "auto"
    log_format: str = "text"           # text, or json: one object per line (logs.py)
    durability: str = "normal"         # SQLite synchronous: normal (WAL default) or full
    events_retention: float = 7 * 86400.0   # seconds outbox events are kept (0: for ever)
    audit_retention: float = 90 * 86400.0   # seconds audit rows are kept (0: for ever)
    lease_ttl: float = 30.0            # seconds a shard lease lasts without renewal (cluster)
    worker_id: str | None = None       # this worker's id in the cluster (DATA/worker-id)
    worker_weight: float = 1.0         # share of the shards relative to other workers
    workers: int = 1                   # crawl: worker processes on this machine (PostgreSQL)
    expect_workers: int = 1            # cluster: live workers awaited before taking shards
    join: bool = False                 # crawl: may join a store's live workers (worker: always)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def validate(self) -> CrawlConfig:
        """Check values that types alone cannot; raise ConfigError naming the flag."""
        if self.delay < 0:
            raise ConfigError("--delay must be >= 0")
        if self.max_in_flight_per_host < 1:
            raise ConfigError("--max-in-flight-per-host must be >= 1")
        if self.max_in_flight_per_ip < 0:
            raise ConfigError("--max-in-flight-per-ip must be >= 0 (0: no per-IP cap)")
        if self.ip_delay < 0:
            raise ConfigError("--ip-delay must be >= 0")
        if self.known_urls_cap < 0:
            raise ConfigError("--known-urls-cap must be >= 0 (0: no owner-local URL state)")
        if self.api is not None:
            api_address(self.api)
        for name in self.api_allowed_hosts:
            if split_authority(name) is None:
                raise ConfigError(f"--api-allowed-host {name!r} is not a host name")
        from courtier.frontier.trap_rules import trap_rules_from  # loaded on use

        trap_rules_from(self.traps)
        if self.recrawl_interval <= 0:
            raise ConfigError("--recrawl-interval must be > 0 seconds")
        from courtier.frontier.tiers import TierSet

        TierSet.from_specs(self.tiers, self.recrawl_interval)
        if not 0.0 <= self.tail_share < 1.0:
            raise ConfigError("--tail-share must be in [0, 1)")
        if self.api_token is not None and self.api_token_file is not None:
            raise ConfigError("give --api-token (or COURTIER_API_TOKEN) or --api-token-file, "
                              "not both")
        if self.change_distance is not None and not 0 <= self.change_distance <= 64:
            raise ConfigError("--change-distance must be between 0 and 64 bits")
        if self.archive_segment_bytes <= 0 or self.archive_segment_age <= 0:
            raise ConfigError("--archive-segment-bytes and --archive-segment-age must be > 0")
        if self.linger < 0:
            raise ConfigError("--linger must be >= 0")
        if self.low_speed_limit < 0:
            raise ConfigError("--low-speed-limit must be >= 0 bytes/s (0: no limit)")
        if self.low_speed_time <= 0:
            raise ConfigError("--low-speed-time must be > 0 seconds")
        if self.header_timeout <= 0:
            raise ConfigError("--header-timeout must be > 0 seconds")
        if self.events_retention < 0 or self.audit_retention < 0:
            raise ConfigError("--events-retention and --audit-retention must be >= 0 seconds "
                              "(0 keeps for ever)")
        if self.lease_ttl < 2.0:
            raise ConfigError("--lease-ttl must be >= 2 seconds")
        if self.worker_weight <= 0:
            raise ConfigError("--worker-weight must be > 0")
        if self.workers < 1:
            raise ConfigError("--workers must be >= 1")
        if self.expect_workers < 1:
            raise ConfigError("--expect-workers must be >= 1")
        if self.worker_id is not None and not re.fullmatch(r"[A-Za-z0-9._:@-]{1,100}",
                                                           self.worker_id):
            raise ConfigError("--worker-id: 1-100 letters, digits or . _ : @ -")
        if self.concurrency < 1:
            raise ConfigError("--concurrency must be >= 1")
        if self.scope not in SCOPES:
            raise ConfigError(f"--scope must be one of {', '.join(SCOPES)}, not {self.scope!r}")
        if self.robots_expiry <= 0 or self.robots_expiry > 24 * 3600:
            raise ConfigError("--robots-expiry must be in (0, 86400] seconds (RFC 9309)")
        if self.durability not in DURABILITY:
            raise ConfigError(f"--durability must be normal or full, not {self.durability!r}")
        if self.progress not in ("auto", "bar", "log", "none"):
            raise ConfigError("--progress must be auto, bar, log or none")
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"--log-format must be text or json, not {self.log_format!r}")
        for flag, patterns in (("--include", self.include), ("--exclude", self.exclude)):
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ConfigError(f"{flag} {pattern!r} is not a valid regex: {exc}") from None
        for kind in self.accept_types:
            if not MEDIA_TYPE_RE.fullmatch(kind.lower()):
                raise ConfigError(f"--accept-type {kind!r} is not a media type "
                                  "(e.g. application/pdf or image/*)")
        from courtier.core.tracking import TrackingParams

        TrackingParams.from_specs(self.strip_params, self.keep_params)
        for port in self.allowed_ports:
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(f"--allowed-port {port!r} is not a TCP port")
        if self.ca_file is not None:
            from courtier.fetch.tls import read_ca_file  # ssl: only when a CA file is set

            read_ca_file(self.ca_file)
        for cidr in self.allow_network:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise ConfigError(f"--allow-network {cidr!r} is not a CIDR range") from None
        return self


#: an ``--accept-type`` value: ``type/subtype`` or ``type/*``, lower-case
MEDIA_TYPE_RE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/(?:\*|[a-z0-9][a-z0-9!#$&^_.+-]*)")


API_FORMS = "HOST:PORT or http://HOST:PORT, e.g. 127.0.0.1:8790 or http://[::1]:8790"


def api_address(text: str) -> tuple[str, int]:
    """(host, port) of ``--api`` as a server binds it: ``HOST:PORT``, ``[v6]:PORT``, just
    ``PORT`` (loopback) or the URL ``http://HOST:PORT`` (the form the query commands
    print and take): every command takes both forms (README, "The --api address")."""
    if "://" in text:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(text)
            port: int | None = parts.port
        except ValueError:
            raise ConfigError(f"--api {text!r}: expected {API_FORMS}") from None
        if parts.scheme.lower() != "http" or not parts.hostname or port is None or \
                parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ConfigError(f"--api {text!r}: expected {API_FORMS}")
        return parts.hostname, port
    host, _, port_text = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"--api {text!r}: expected {API_FORMS}") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"--api {text!r}: port out of range")
    if any(c.isspace() or c in "/?#@" for c in host):
        raise ConfigError(f"--api {text!r}: expected {API_FORMS}")
    return host, port


def api_base_url(text: str) -> str:
    """The base URL a client sends ``--api`` requests to: ``http://HOST:PORT`` for the
    ``HOST:PORT`` form; an ``http://`` or ``https://`` URL as given (a reverse proxy may
    add a path); ConfigError naming ``--api`` otherwise."""
    if "://" in text:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError:
            raise ConfigError(f"--api {text!r}: expected {API_FORMS}") from None
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"--api {text!r}: expected {API_FORMS}")
        return text.rstrip("/")
    host, port = api_address(text)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


FIELDS = {f.name: f for f in dataclasses.fields(CrawlConfig) if f.name != "extra"}


def offline_config() -> CrawlConfig:
    """The defaults for code that sends no request (the query commands, a store-only
    admin API): of the User-Agent only its product token matters there, so the default
    skips reading the package version (importlib.metadata: ~25 ms of a command's start)."""
    return CrawlConfig(user_agent="courtier")


#: SQLite ``synchronous`` levels offered by --durability (see docs/design.md)
DURABILITY = ("normal", "full")


def _coerce(name: str, value: Any, source: str) -> Any:
    """Convert a file/env/flag value to the field's type; ConfigError names the source."""
    kind = str(FIELDS[name].type)
    try:
        if kind.startswith("tuple"):
            if isinstance(value, str):
                value = [v for v in (p.strip() for p in value.split(",")) if v]
            return tuple(str(v) for v in value)
        if value is None:
            return None
        if "Path" in kind:
            return Path(str(value))
        if kind.startswith("bool"):
            if isinstance(value, str):
                return value.strip().lower() in ("1", "true", "yes", "on")
            return bool(value)
        if kind.startswith("int"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if kind.startswith("float"):
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{source}: {name.replace('_', '-')} has an invalid value {value!r}") from None


def load_file(path: Path) -> dict[str, Any]:
    """Read a TOML config file; unknown keys are errors (a typo should not pass silently)."""
    try:
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text)
    except OSError as exc:
        raise ConfigError(f"--config {path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config {path}: invalid TOML: {exc}") from None
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        if name == "traps" and isinstance(value, dict):  # [traps] max-path-depth = 30
            value = [f"{k}={'none' if v is False else v}" for k, v in value.items()]
        if name == "tiers" and isinstance(value, dict):  # [tiers.hot] min-interval = 300
            from courtier.frontier.tiers import tier_specs_from_toml

            value = tier_specs_from_toml(value, f"--config {path}")
        if name not in FIELDS:
            raise ConfigError(f"--config {_key_place(path, text, key)}: unknown key {key!r}"
                              f"{did_you_mean(key)}")
        out[name] = _coerce(name, value, f"--config {path}")
    return out


def _key_place(path: Path, text: str, key: str) -> str:
    """``FILE:LINE`` of a top-level key's line (``FILE`` when it cannot be told)."""
    pattern = re.compile(rf"\s*[\"']?{re.escape(key)}[\"']?\s*[=.]")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return f"{path}:{number}"
    return str(path)


def did_you_mean(key: str) -> str:
    """``; did you mean 'concurrency'?`` for a key close to a known one (else empty), in
    the spelling of the key given (dashes or underscores)."""
    import difflib

    dashed = key.replace("_", "-")
    known = [name.replace("_", "-") for name in FIELDS]
    close = difflib.get_close_matches(dashed, known, n=1, cutoff=0.75)
    if not close:
        return ""
    guess = close[0].replace("-", "_") if "_" in key else close[0]
    return f"; did you mean {guess!r}?"


def load_env(environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in FIELDS:
        env_name = "COURTIER_" + name.upper()
        if env_name in environ:
            out[name] = _coerce(name, environ[env_name], f"environment {env_name}")
    return out


def build_config(
    flags: Mapping[str, Any], config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> CrawlConfig:
    """Merge defaults < file < environment < flags (flags given as None are unset)."""
    values: dict[str, Any] = {}
    if config_file is not None:
        values.update(load_file(config_file))
    values.update(load_env(os.environ if environ is None else environ))
    for name, value in flags.items():
        if name in FIELDS and value is not None and value != ():
            values[name] = _coerce(name, value, "--" + name.replace("_", "-"))
    config = CrawlConfig(**values).validate()
    if config.api_token_file is not None:
        token = read_token_file(config.api_token_file, "--api-token-file")
        config = dataclasses.replace(config, api_token=token, api_token_file=None)
    return config


def read_token_file(path: Path, flag: str) -> str:
    """The bearer token in ``path`` (surrounding whitespace stripped); ConfigError naming
    ``flag`` when the file cannot be read or holds no token."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"{flag} {path}: cannot read the token: {reason}") from None
    if not token or any(c.isspace() for c in token):
        raise ConfigError(f"{flag} {path}: expected one token (no spaces) in the file")
    return token
