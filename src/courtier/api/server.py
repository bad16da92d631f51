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
* Browser defences (:mod:`courtier.api.browser`): without a token only loopback
  Host values and ``--api-allowed-host`` names are answered (421 otherwise);
  an ``Origin`` must be the API's own (403); writes need
  ``Content-Type: application/json`` (415); no CORS permission is ever granted;
  no answer may be framed.
* :func:`start_api` binds to loopback unless told otherwise, and refuses a
  non-loopback address without a token.

The JSON operations themselves live in :mod:`courtier.api.routes`, shared with
in-process calls from the command line.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, Collection
from importlib import resources
from typing import Any

from aiohttp import web

from courtier.api import browser, routes, views
from courtier.api.control import CrawlControl
from courtier.api.jsonable import json_safe
from courtier.api.openapi import openapi_document
from courtier.core.errors import ConfigError
from courtier.core.logs import log_event

log = logging.getLogger("courtier.api")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_BODY_BYTES = 2 * 1024 * 1024

CONTROL = web.AppKey("control", CrawlControl)
METRICS: web.AppKey[Callable[[], bytes] | None] = web.AppKey("metrics")
TOKEN: web.AppKey[str | None] = web.AppKey("token")
ALLOWED_HOSTS = web.AppKey("allowed_hosts", frozenset[str])
#: every answer but the dashboard page: nothing to load, never framed
API_CSP = "default-src 'none'; frame-ancestors 'none'"
DASHBOARD = web.AppKey("dashboard", str)


def reply(data: Any, status: int = 200) -> web.Response:
    """A JSON answer; bytes, NaN and infinities are made JSON-safe first."""
    text = json.dumps(json_safe(data), allow_nan=False, separators=(",", ":"))
    return web.Response(text=text, status=status, content_type="application/json")


def error(status: int, message: str) -> web.Response:
    return reply({"error": message}, status)


@web.middleware
async def browser_auth_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Browser defences (:mod:`courtier.api.browser`), the bearer token, then every
    failure mapped to a JSON error answer; security headers on every answer."""
    try:
        response = await _checked(request, handler)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = error(exc.status, exc.reason)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Cache-Control", "no-store")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Content-Security-Policy", API_CSP)
    return response


async def _checked(request: web.Request, handler: Handler) -> web.StreamResponse:
    token = request.app[TOKEN]
    allowed = request.app[ALLOWED_HOSTS]
    host = request.headers.get("Host")
    why = browser.host_refusal(host, allowed, token is not None)
    if why is not None:
        return error(421, why)
    why = browser.origin_refusal(request.headers.get("Origin"), host, allowed)
    if why is not None:
        return error(403, why)
    if token is not None and not (request.method == "GET" and request.path == "/"):
        given = request.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            value.strip().encode(), token.encode()
        ):
            answer = error(401, "missing or wrong bearer token")
            answer.headers["WWW-Authenticate"] = 'Bearer realm="courtier"'
            return answer
    routed = request.match_info.http_exception is None  # else 404/405 from the router
    why = browser.content_type_refusal(
        request.method, request.headers.get("Content-Type"), request.body_exists)
    if routed and why is not None:
        return error(415, why)
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception as exc:
        failure = routes.failure_of(exc)
        if failure is None:
            log_event(log, logging.ERROR, "api_error", "admin API: %s %s failed", request.method,
                      request.path, exc_info=True, url=request.path, reason="internal error")
            return error(500, "internal error (logged)")
        if failure[0] == 503:
            log_event(log, logging.WARNING, "api_store_unavailable", "admin API: %s", failure[1],
                      url=request.path, reason=failure[1])
        return error(*failure)


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; 400 when it is not JSON (or too deep), 413 when too large."""
    try:
        text = await request.text()
    except web.HTTPRequestEntityTooLarge:
        raise
    except UnicodeDecodeError:
        raise views.ApiInputError("request body is not UTF-8") from None
    return routes.parse_json_body(text)


def json_handler(operation: routes.Operation, takes_body: bool) -> Handler:
    """An aiohttp handler serving one JSON operation of :data:`routes.OPERATIONS`."""

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await read_json(request) if takes_body else None
        call = routes.ApiCall(request.match_info, request.query, body)
        return reply(await operation(request.app[CONTROL], call))

    handle.__name__ = operation.__name__
    return handle


# ---- handlers that are not JSON operations --------------------------------------------------


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
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"
    )
    return response


ROUTES: list[tuple[str, str, Handler]] = [
    *((method, path, json_handler(op, body)) for method, path, op, body in routes.OPERATIONS),
    ("GET", "/metrics", get_metrics),
    ("GET", "/openapi.json", get_openapi),
    ("GET", "/", get_dashboard),
]


def dashboard_html() -> str:
    """The dashboard page shipped in the package (``api/dashboard.html``)."""
    return resources.files("courtier.api").joinpath("dashboard.html").read_text("utf-8")


def make_app(
    control: CrawlControl,
    metrics_render: Callable[[], bytes] | None,
    token: str | None,
    allowed_hosts: Collection[str] = (),
) -> web.Application:
    """The admin application. ``metrics_render`` gives the Prometheus text (None: 404);
    ``token`` (None or empty: no auth) is the bearer token every call must carry;
    ``allowed_hosts`` are Host names answered besides loopback (``--api-allowed-host``)."""
    app = web.Application(middlewares=[browser_auth_errors], client_max_size=MAX_BODY_BYTES)
    app[CONTROL] = control
    app[METRICS] = metrics_render
    app[TOKEN] = token or None
    app[ALLOWED_HOSTS] = browser.normalize_allowed(allowed_hosts)
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
            f"--api {host}: serving the admin API beyond loopback needs a token (--api-token)"
        )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise ConfigError(f"--api {where}: cannot listen: {exc.strerror}") from None
    address = runner.addresses[0]
    return runner, int(address[1])
