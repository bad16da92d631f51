"""The admin HTTP API (aiohttp.web): seeds, per-domain policy, URL and host state,
crawl figures, the event outbox, Prometheus ``/metrics`` and the live dashboard.

Contract of every route:

* JSON in, JSON out (``/metrics``: Prometheus text; ``/``: the dashboard page).
* Wrong input (bad JSON, bad hex, bad policy values, unknown route…) is a 4xx
  with a body ``{"error": "…"}``; the API never answers 500 for bad input.
  A failing store answers 503 ``{"error": …}``.
* With a token configured, every call but the static dashboard page needs
  ``Authorization: Bearer TOKEN`` (401 ``{"error": …}`` otherwise). The page
  holds no data; its script sends the token with each call.
* :func:`start_api` binds to loopback unless told otherwise, and refuses a
  non-loopback address without a token.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web

from courtier.api import views
from courtier.api.control import MAX_EVENTS_PER_CALL, CrawlControl
from courtier.api.openapi import openapi_document
from courtier.errors import ConfigError, InvalidURL, StoreError
from courtier.urls import canonicalize

log = logging.getLogger("courtier.api")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_BODY_BYTES = 2 * 1024 * 1024
URL_KEY_HEX_LENGTH = 32

CONTROL = web.AppKey("control", CrawlControl)
METRICS: web.AppKey[Callable[[], bytes] | None] = web.AppKey("metrics")
TOKEN: web.AppKey[str | None] = web.AppKey("token")
DASHBOARD = web.AppKey("dashboard", str)


def reply(data: Any, status: int = 200) -> web.Response:
    """A JSON answer; bytes, NaN and infinities are made JSON-safe first."""
    text = json.dumps(views.json_safe(data), allow_nan=False, separators=(",", ":"))
    return web.Response(text=text, status=status, content_type="application/json")


def error(status: int, message: str) -> web.Response:
    return reply({"error": message}, status)


@web.middleware
async def errors_and_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Check the bearer token, then map every failure to a JSON error answer."""
    token = request.app[TOKEN]
    if token is not None and not (request.method == "GET" and request.path == "/"):
        given = request.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            value.strip().encode(), token.encode()
        ):
            answer = error(401, "missing or wrong bearer token")
            answer.headers["WWW-Authenticate"] = 'Bearer realm="courtier"'
            return answer
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error(exc.status, exc.reason)
    except (views.ApiInputError, InvalidURL) as exc:
        return error(400, str(exc))
    except views.ApiNotFound as exc:
        return error(404, str(exc))
    except StoreError as exc:
        log.warning("admin API: store failed: %s", exc)
        return error(503, f"store unavailable: {exc}")
    except Exception:
        log.exception("admin API: %s %s failed", request.method, request.path)
        return error(500, "internal error (logged)")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Cache-Control", "no-store")
    return response


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; 400 when it is not JSON, 413 when too large."""
    try:
        text = await request.text()
    except web.HTTPRequestEntityTooLarge:
        raise
    except UnicodeDecodeError:
        raise views.ApiInputError("request body is not UTF-8") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise views.ApiInputError(f"request body is not valid JSON: {exc}") from None


def int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    text = request.query.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise views.ApiInputError(f"{name} must be an integer") from None
    if not low <= value <= high:
        raise views.ApiInputError(f"{name} must be between {low} and {high}")
    return value


# ---- handlers ------------------------------------------------------------------------------


async def post_seeds(request: web.Request) -> web.Response:
    body = await read_json(request)
    extend = False
    if isinstance(body, dict):
        unknown = sorted(set(body) - {"urls", "extend_scope"})
        if unknown:
            raise views.ApiInputError(f"unknown field(s): {', '.join(unknown)}")
        extend = body.get("extend_scope", False)
        if not isinstance(extend, bool):
            raise views.ApiInputError("extend_scope must be true or false")
        body = body.get("urls")
    if not isinstance(body, list) or not body:
        raise views.ApiInputError('expected {"urls": [URL, …]} or a non-empty JSON list')
    results = await request.app[CONTROL].add_seeds(body, extend_scope=extend)
    summary = {
        kind: sum(1 for r in results if r["result"] == kind)
        for kind in ("accepted", "duplicate", "rejected")
    }
    return reply({**summary, "results": results})


async def get_policy(request: web.Request) -> web.Response:
    return reply(await request.app[CONTROL].get_policy(request.match_info["domain"]))


async def put_policy(request: web.Request) -> web.Response:
    domain = request.match_info["domain"]
    views.host_keys_for(domain)  # a bad domain is reported before a bad body
    policy = views.parse_policy(await read_json(request))
    return reply(await request.app[CONTROL].put_policy(domain, policy))


async def delete_policy(request: web.Request) -> web.Response:
    return reply(await request.app[CONTROL].delete_policy(request.match_info["domain"]))


async def get_url_by_key(request: web.Request) -> web.Response:
    text = request.match_info["url_hash"]
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise views.ApiInputError(f"not a hex URL key: {text!r}") from None
    if len(text) != URL_KEY_HEX_LENGTH:
        raise views.ApiInputError(f"a URL key is {URL_KEY_HEX_LENGTH} hex digits")
    return reply(await request.app[CONTROL].url_state(key))


async def get_url_by_text(request: web.Request) -> web.Response:
    raw = request.query.get("url")
    if not raw:
        raise views.ApiInputError("query parameter url is required")
    key = canonicalize(raw).url_key
    return reply(await request.app[CONTROL].url_state(key))


async def get_domain_stats(request: web.Request) -> web.Response:
    return reply(await request.app[CONTROL].domain_stats(request.match_info["domain"]))


async def get_stats(request: web.Request) -> web.Response:
    return reply(await request.app[CONTROL].crawl_stats())


async def get_top_hosts(request: web.Request) -> web.Response:
    by = request.query.get("by", "queue")
    limit = int_param(request, "limit", 10, 1, 100)
    return reply({"by": by, "hosts": await request.app[CONTROL].top_hosts(by, limit)})


async def get_events(request: web.Request) -> web.Response:
    after = int_param(request, "after", 0, 0, 2**63 - 1)
    limit = int_param(request, "limit", 100, 1, MAX_EVENTS_PER_CALL)
    return reply(await request.app[CONTROL].events(after, limit))


async def get_event_schema(request: web.Request) -> web.Response:
    """The JSON Schema of event payloads (``courtier/events/schema/event-v1.json``)."""
    from courtier.events import load_schema

    return web.json_response(load_schema())


async def get_health(request: web.Request) -> web.Response:
    return reply({"status": "ok"})


async def get_metrics(request: web.Request) -> web.Response:
    render = request.app[METRICS]
    if render is None:
        return error(404, "no metrics in this process (no crawl running)")
    response = web.Response(body=render())
    response.headers["Content-Type"] = PROMETHEUS_CONTENT_TYPE
    return response


async def get_openapi(request: web.Request) -> web.Response:
    return reply(openapi_document())


async def get_dashboard(request: web.Request) -> web.Response:
    response = web.Response(text=request.app[DASHBOARD], content_type="text/html")
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; script-src 'self' 'unsafe-inline'; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:"
    )
    return response


ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", "/v1/seeds", post_seeds),
    ("GET", "/v1/domains/{domain}/policy", get_policy),
    ("PUT", "/v1/domains/{domain}/policy", put_policy),
    ("DELETE", "/v1/domains/{domain}/policy", delete_policy),
    ("GET", "/v1/domains/{domain}/stats", get_domain_stats),
    ("GET", "/v1/urls/{url_hash}", get_url_by_key),
    ("GET", "/v1/urls", get_url_by_text),
    ("GET", "/v1/stats", get_stats),
    ("GET", "/v1/hosts/top", get_top_hosts),
    ("GET", "/v1/events", get_events),
    ("GET", "/v1/events/schema", get_event_schema),
    ("GET", "/healthz", get_health),
    ("GET", "/metrics", get_metrics),
    ("GET", "/openapi.json", get_openapi),
    ("GET", "/", get_dashboard),
]


def dashboard_html() -> str:
    """The dashboard page shipped in the package (``api/dashboard.html``)."""
    return resources.files("courtier.api").joinpath("dashboard.html").read_text("utf-8")


def make_app(
    control: CrawlControl, metrics_render: Callable[[], bytes] | None, token: str | None
) -> web.Application:
    """The admin application. ``metrics_render`` gives the Prometheus text (None: 404);
    ``token`` (None or empty: no auth) is the bearer token every call must carry."""
    app = web.Application(middlewares=[errors_and_auth], client_max_size=MAX_BODY_BYTES)
    app[CONTROL] = control
    app[METRICS] = metrics_render
    app[TOKEN] = token or None
    app[DASHBOARD] = dashboard_html()
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    return app


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def start_api(
    app: web.Application, host: str = "127.0.0.1", port: int = 0
) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``host:port`` (0: any free port); return the runner and the port.

    Stop with ``await runner.cleanup()``. A non-loopback ``host`` needs a token
    (:class:`ConfigError` otherwise): the API can change what the crawler fetches.
    """
    if not is_loopback(host) and app[TOKEN] is None:
        raise ConfigError(
            f"--api-host {host}: serving the admin API beyond loopback needs a token (--api-token)"
        )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise ConfigError(f"--api-port {port}: cannot listen on {host}: {exc.strerror}") from None
    address = runner.addresses[0]
    return runner, int(address[1])
