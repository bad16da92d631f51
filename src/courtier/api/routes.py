"""The admin API's JSON operations, apart from HTTP.

Each operation takes a :class:`~courtier.api.control.CrawlControl` and an
:class:`ApiCall` (path parameters, query, parsed JSON body) and returns
JSON-able data; wrong input raises. The HTTP server (:mod:`courtier.api.server`)
serves :data:`OPERATIONS` over aiohttp, and :func:`invoke` runs the very same
operations in-process for the command line (``seed add``, ``policy set`` …
with ``--data``), so no server — and no unauthenticated socket — is started
for a one-off call, and the JSON answers are identical either way.

:func:`failure_of` is the one mapping from exceptions to answers, used by both:
wrong input 400, unknown thing 404, store failure 503.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from courtier.api import freshness, views
from courtier.api.control import MAX_EVENTS_PER_CALL, CrawlControl
from courtier.api.jsonable import json_safe
from courtier.core.errors import EventsPruned, InvalidURL, ShardEventsPruned, StoreError
from courtier.core.urls import canonicalize
from courtier.store.base import HostTierRecord

URL_KEY_HEX_LENGTH = 32
#: a request body nested deeper than this is refused (no answer needs more than 4)
MAX_JSON_DEPTH = 32


@dataclass(frozen=True, slots=True)
class ApiCall:
    """One call's input: path parameters, query parameters and the parsed JSON body."""

    params: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    body: Any = None


Operation = Callable[[CrawlControl, ApiCall], Awaitable[Any]]


# ---- input ---------------------------------------------------------------------------------


def parse_json_body(text: str) -> Any:
    """A request body as JSON; :class:`~courtier.api.views.ApiInputError` when it is not
    JSON, is nested deeper than :data:`MAX_JSON_DEPTH`, or holds an integer too long to
    convert (Python's digit limit)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise views.ApiInputError(f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise views.ApiInputError(
            f"request body is nested too deeply (at most {MAX_JSON_DEPTH} levels)") from None
    except ValueError as exc:  # e.g. an integer literal past the int conversion digit limit
        raise views.ApiInputError(f"request body is not acceptable JSON: {exc}") from None
    check_depth(value)
    return value


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise ApiInputError when ``value`` nests lists/objects deeper than ``limit``
    (iterative: a deep value cannot exhaust the stack here)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Any
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise views.ApiInputError(
                f"request body is nested too deeply (at most {limit} levels)")
        stack.extend((child, depth + 1) for child in children)


def int_param(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = query.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise views.ApiInputError(f"{name} must be an integer") from None
    if not low <= value <= high:
        raise views.ApiInputError(f"{name} must be between {low} and {high}")
    return value


# ---- operations ------------------------------------------------------------------------------


async def post_seeds(control: CrawlControl, call: ApiCall) -> Any:
    body, extend, priority, value = call.body, False, None, None
    if isinstance(body, dict):
        unknown = sorted(set(body) - {"urls", "extend_scope", "priority", "value"})
        if unknown:
            raise views.ApiInputError(f"unknown field(s): {', '.join(unknown)}")
        extend = body.get("extend_scope", False)
        if not isinstance(extend, bool):
            raise views.ApiInputError("extend_scope must be true or false")
        priority = views.parse_seed_priority(body.get("priority"))
        value = freshness.parse_seed_value(body.get("value"))
        body = body.get("urls")
    if not isinstance(body, list) or not body:
        raise views.ApiInputError('expected {"urls": [URL, …]} or a non-empty JSON list')
    results = await control.add_seeds(body, extend_scope=extend, priority=priority)
    if value is not None:  # a given value, for the new seeds and the known ones alike
        await control.set_values([(r["canonical"], value) for r in results
                                  if r["result"] != "rejected" and r.get("canonical")])
    summary = {
        kind: sum(1 for r in results if r["result"] == kind)
        for kind in ("accepted", "duplicate", "rejected")
    }
    return {**summary, "results": results}


async def get_policy(control: CrawlControl, call: ApiCall) -> Any:
    return await control.get_policy(call.params["domain"])


async def put_policy(control: CrawlControl, call: ApiCall) -> Any:
    domain = call.params["domain"]
    views.host_keys_for(domain)  # a bad domain is reported before a bad body
    return await control.put_policy(domain, views.parse_policy(call.body))


async def delete_policy(control: CrawlControl, call: ApiCall) -> Any:
    return await control.delete_policy(call.params["domain"])


async def get_freshness(control: CrawlControl, call: ApiCall) -> Any:
    return await control.get_freshness(call.params["domain"])


async def put_freshness(control: CrawlControl, call: ApiCall) -> Any:
    domain = call.params["domain"]
    views.host_keys_for(domain)
    return await control.put_freshness(domain, freshness.parse_freshness(call.body))


async def delete_freshness(control: CrawlControl, call: ApiCall) -> Any:
    return await control.put_freshness(call.params["domain"], HostTierRecord(""))


async def put_url_values(control: CrawlControl, call: ApiCall) -> Any:
    return await control.set_values(freshness.parse_values(call.body))


async def get_url_by_key(control: CrawlControl, call: ApiCall) -> Any:
    text = call.params["url_hash"]
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise views.ApiInputError(f"not a hex URL key: {text!r}") from None
    if len(text) != URL_KEY_HEX_LENGTH:
        raise views.ApiInputError(f"a URL key is {URL_KEY_HEX_LENGTH} hex digits")
    return await control.url_state(key)


async def get_url_by_text(control: CrawlControl, call: ApiCall) -> Any:
    raw = call.query.get("url")
    if not raw:
        raise views.ApiInputError("query parameter url is required")
    return await control.url_state(canonicalize(raw).url_key)


async def get_domain_stats(control: CrawlControl, call: ApiCall) -> Any:
    return await control.domain_stats(call.params["domain"])


async def get_stats(control: CrawlControl, call: ApiCall) -> Any:
    return await control.crawl_stats()


async def get_top_hosts(control: CrawlControl, call: ApiCall) -> Any:
    by = call.query.get("by", "queue")
    limit = int_param(call.query, "limit", 10, 1, 100)
    return {"by": by, "hosts": await control.top_hosts(by, limit)}


async def get_events(control: CrawlControl, call: ApiCall) -> Any:
    after = int_param(call.query, "after", 0, 0, 2**63 - 1)
    limit = int_param(call.query, "limit", 100, 1, MAX_EVENTS_PER_CALL)
    token = call.query.get("cursor")
    consumer = call.query.get("consumer")
    by_shard = call.query.get("by_shard") in ("1", "true")
    if "after" in call.query and (token is not None or by_shard):
        raise views.ApiInputError("after is a crawl-wide position: not with cursor or by_shard")
    if consumer is None:
        if by_shard:
            raise views.ApiInputError("by_shard: give it with consumer")
        return await (control.events(after, limit) if token is None
                      else control.shard_events(token, limit))
    from courtier.events.cursor import consumer_name_problem

    problem = consumer_name_problem(consumer)
    if problem is not None:
        raise views.ApiInputError(f"consumer: {problem}")
    if token is not None or by_shard:
        return await control.shard_consumer_events(consumer, token, limit)
    acknowledged = after if "after" in call.query else None
    return await control.consumer_events(consumer, acknowledged, limit)


async def get_event_cursor(control: CrawlControl, call: ApiCall) -> Any:
    """The per-shard cursor token of a reader that has read every event up to the event id
    (crawl-wide position) ``at``: what an integer cursor converts to (docs/events.md)."""
    if "at" not in call.query:
        raise views.ApiInputError("query parameter at (an event id) is required")
    return await control.shard_cursor_at(int_param(call.query, "at", 0, 0, 2**63 - 1))


async def get_event_schema(control: CrawlControl, call: ApiCall) -> Any:
    """The JSON Schema of event payloads (``courtier/events/schema/event-v1.json``)."""
    from courtier.events import load_schema

    return load_schema()


async def get_cluster(control: CrawlControl, call: ApiCall) -> Any:
    from courtier.cluster.report import DEFAULT_WORKER_TTL

    raw = call.query.get("worker_ttl", str(DEFAULT_WORKER_TTL))
    try:
        ttl = float(raw)
    except ValueError:
        raise views.ApiInputError(f"worker_ttl must be a number of seconds, not {raw!r}") \
            from None
    if not 0 < ttl < 86_400:
        raise views.ApiInputError("worker_ttl must be between 0 and 86400 seconds")
    return await control.cluster(ttl)


async def get_health(control: CrawlControl, call: ApiCall) -> Any:
    return {"status": "ok"}


#: (method, path, operation, takes a JSON body)
OPERATIONS: list[tuple[str, str, Operation, bool]] = [
    ("POST", "/v1/seeds", post_seeds, True),
    ("GET", "/v1/domains/{domain}/policy", get_policy, False),
    ("PUT", "/v1/domains/{domain}/policy", put_policy, True),
    ("DELETE", "/v1/domains/{domain}/policy", delete_policy, False),
    ("GET", "/v1/domains/{domain}/stats", get_domain_stats, False),
    ("GET", "/v1/domains/{domain}/freshness", get_freshness, False),
    ("PUT", "/v1/domains/{domain}/freshness", put_freshness, True),
    ("DELETE", "/v1/domains/{domain}/freshness", delete_freshness, False),
    ("PUT", "/v1/urls/values", put_url_values, True),
    ("GET", "/v1/urls/{url_hash}", get_url_by_key, False),
    ("GET", "/v1/urls", get_url_by_text, False),
    ("GET", "/v1/stats", get_stats, False),
    ("GET", "/v1/hosts/top", get_top_hosts, False),
    ("GET", "/v1/events", get_events, False),
    ("GET", "/v1/events/schema", get_event_schema, False),
    ("GET", "/v1/events/cursor", get_event_cursor, False),
    ("GET", "/v1/cluster", get_cluster, False),
    ("GET", "/healthz", get_health, False),
]


# ---- failures and in-process calls -----------------------------------------------------------


def failure_of(exc: BaseException) -> tuple[int, str] | None:
    """(status, message) answering an expected failure, or None for a bug."""
    if isinstance(exc, views.ApiInputError | InvalidURL):
        return 400, str(exc)
    if isinstance(exc, views.ApiNotFound):
        return 404, str(exc)
    if isinstance(exc, EventsPruned | ShardEventsPruned):
        return 410, str(exc)
    if isinstance(exc, StoreError):
        return 503, f"store unavailable: {exc}"
    return None


def _pattern(path: str) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)\}", path)
    regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/]+)" for i, p in enumerate(parts))
    return re.compile(f"^{regex}$")


_MATCHERS = [(method, _pattern(path), op, body) for method, path, op, body in OPERATIONS]


async def invoke(
    control: CrawlControl, method: str, target: str, body: Any = None
) -> tuple[int, Any]:
    """Run the operation a ``METHOD /path?query`` names in this process: (status, JSON).

    Answers as the HTTP server does (404/405 for an unknown route or method, 4xx/503
    ``{"error": …}`` for failures), without opening any socket. The body goes through
    JSON text, so it reaches the operation exactly as an HTTP body would.
    """
    parts = urlsplit(target)
    path = parts.path
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    allowed = False
    for route_method, pattern, operation, takes_body in _MATCHERS:
        found = pattern.match(path)
        if found is None:
            continue
        allowed = True
        if route_method != method.upper():
            continue
        params = {k: unquote(v) for k, v in found.groupdict().items()}
        try:
            parsed = parse_json_body(json.dumps(body)) if takes_body else None
            data = await operation(control, ApiCall(params, query, parsed))
        except Exception as exc:
            failure = failure_of(exc)
            if failure is None:
                raise
            return failure[0], {"error": failure[1]}
        return 200, json_safe(data)
    if allowed:
        return 405, {"error": "Method Not Allowed"}
    return 404, {"error": "Not Found"}
