"""The OpenAPI 3.1 description of the admin API, as a plain Python dict.

Served at ``/openapi.json``. Every route of :data:`courtier.api.server.ROUTES`
appears here (a test checks it); keep both in step. The paths are here (the
refresh-plan ones in ``openapi_freshness.py``); the shared responses and named
schemas in ``openapi_components.py``.
"""

from __future__ import annotations

import copy
from typing import Any

from courtier import __version__
from courtier.api.openapi_components import COMPONENTS, JSON, schema_ref
from courtier.api.openapi_freshness import freshness_paths


def _ok(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    content = {JSON: {"schema": schema or {"type": "object"}}}
    return {"description": description, "content": content}


_ERRORS: dict[str, Any] = {
    "400": {"$ref": "#/components/responses/BadRequest"},
    "401": {"$ref": "#/components/responses/Unauthorized"},
    "403": {"$ref": "#/components/responses/ForeignOrigin"},
    "421": {"$ref": "#/components/responses/ForeignHost"},
}
_WRITE_ERRORS: dict[str, Any] = {"415": {"$ref": "#/components/responses/NotJson"}}
_NOT_FOUND: dict[str, Any] = {"404": {"$ref": "#/components/responses/NotFound"}}
_DOMAIN = {
    "name": "domain",
    "in": "path",
    "required": True,
    "description": "an authority: host or host:port (names its http and https hosts)",
    "schema": {"type": "string", "examples": ["example.com", "h00.courtier.test:8080"]},
}


def _op(
    summary: str,
    ok: dict[str, Any],
    *,
    params: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": ok, **_ERRORS, **(extra or {})},
    }
    if params:
        operation["parameters"] = params
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {JSON: {"schema": body}}}
        operation["responses"].update(_WRITE_ERRORS)
    return operation


_SEED_RESULT = {
    "type": "object",
    "required": ["url", "result"],
    "properties": {
        "url": {"description": "the input item as given"},
        "result": {"enum": ["accepted", "duplicate", "rejected"]},
        "reason": {
            "type": ["string", "null"],
            "description": "bad URL: …, out of scope: …, blocked by policy, already known",
        },
        "canonical": {"type": ["string", "null"]},
        "url_key": {"type": ["string", "null"], "pattern": "^[0-9a-f]{32}$"},
    },
}

_DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "courtier admin API",
        "version": __version__,
        "description": "Control and observe a running courtier crawl. With a token "
        "configured, every call needs `Authorization: Bearer TOKEN`. Without one, only "
        "loopback Host values (and --api-allowed-host names) are answered. Writes need "
        "`Content-Type: application/json`; a foreign `Origin` is refused.",
    },
    "servers": [{"url": "http://127.0.0.1:8300"}],
    "security": [{"bearer": []}],
    "paths": {
        "/v1/seeds": {
            "post": _op(
                "Add URLs to the crawl (per-item answer; accepted ones are durable at once)",
                _ok(
                    "one result per input URL",
                    {
                        "type": "object",
                        "properties": {
                            "accepted": {"type": "integer"},
                            "duplicate": {"type": "integer"},
                            "rejected": {"type": "integer"},
                            "results": {"type": "array", "items": _SEED_RESULT},
                        },
                    },
                ),
                body={
                    "oneOf": [
                        {
                            "type": "object",
                            "required": ["urls"],
                            "additionalProperties": False,
                            "properties": {
                                "urls": {
                                    "type": "array",
                                    "minItems": 1,
                                    "maxItems": 10000,
                                    "items": {"type": "string"},
                                },
                                "extend_scope": {"type": "boolean", "default": False},
                                "priority": {
                                    "type": ["integer", "null"],
                                    "minimum": 0,
                                    "maximum": 99,
                                    "description": "rank of these URLs (null: 20, ahead of "
                                    "start seeds (10) and links (0))",
                                },
                                "value": {
                                    "type": ["number", "null"],
                                    "minimum": 0,
                                    "maximum": 1e6,
                                    "description": "value of these URLs for the refresh "
                                    "planner (null: derived; docs/freshness.md)",
                                },
                            },
                        },
                        {"type": "array", "minItems": 1, "items": {"type": "string"}},
                    ]
                },
                extra={"413": {"description": "body larger than 2 MiB"}},
            )
        },
        "/v1/domains/{domain}/policy": {
            "get": _op(
                "Policy override of a domain",
                _ok("the policy", schema_ref("PolicyAnswer")),
                params=[_DOMAIN],
            ),
            "put": _op(
                "Set a domain's policy (replaces it; applied within a second)",
                _ok("the policy now in force", schema_ref("PolicyAnswer")),
                params=[_DOMAIN],
                body=schema_ref("Policy"),
            ),
            "delete": _op(
                "Return a domain to the crawl defaults",
                _ok("the policy now in force", schema_ref("PolicyAnswer")),
                params=[_DOMAIN],
            ),
        },
        "/v1/domains/{domain}/stats": {
            "get": _op(
                "Stored counters and live frontier state of a domain's hosts",
                _ok("per-host figures"),
                params=[_DOMAIN],
                extra=_NOT_FOUND,
            )
        },
        "/v1/urls/{urlHash}": {
            "get": _op(
                "State of one URL by its 128-bit key (32 hex digits)",
                _ok("row, robots decision, fetch history", schema_ref("UrlState")),
                params=[
                    {
                        "name": "urlHash",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{32}$"},
                    }
                ],
                extra=_NOT_FOUND,
            )
        },
        "/v1/urls": {
            "get": _op(
                "State of one URL by its text (canonicalized first)",
                _ok("row, robots decision, fetch history", schema_ref("UrlState")),
                params=[
                    {"name": "url", "in": "query", "required": True, "schema": {"type": "string"}}
                ],
                extra=_NOT_FOUND,
            )
        },
        "/v1/stats": {"get": _op("Crawl-wide figures", _ok("figures", schema_ref("Stats")))},
        "/v1/hosts/top": {
            "get": _op(
                "Hosts with the longest queues or the most errors",
                _ok("hosts"),
                params=[
                    {
                        "name": "by",
                        "in": "query",
                        "schema": {"enum": ["queue", "errors"], "default": "queue"},
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                    },
                ],
            )
        },
        "/v1/events": {
            "get": _op(
                "Outbox events after a cursor (id order); with consumer=NAME after the "
                "cursor registered in the store under NAME, which after=N moves forward "
                "to N (acknowledged) first; with cursor=TOKEN (empty: from the first) "
                "the events above a per-shard cursor (each shard's events in commit "
                "order, no outbox sequencer) and the token to read on from; with "
                "consumer=NAME&by_shard=1 (or a NAME registered per shard) the events "
                "above NAME's per-shard cursor, which cursor=TOKEN moves forward first",
                _ok(
                    "events",
                    {
                        "type": "object",
                        "properties": {
                            "events": {"type": "array", "items": schema_ref("Event")},
                            "next_after": {"type": "integer"},
                            "cursor": {"type": "string"},
                            "consumer": {"type": "string"},
                            "position": {"oneOf": [{"type": "integer"},
                                                   {"type": "string"}]},
                        },
                    },
                ),
                params=[
                    {
                        "name": "after",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 0, "default": 0},
                    },
                    {
                        "name": "cursor",
                        "in": "query",
                        "schema": {"type": "string", "pattern": "^(c1\\.[A-Za-z0-9_-]*)?$"},
                    },
                    {
                        "name": "consumer",
                        "in": "query",
                        "schema": {"type": "string", "minLength": 1, "maxLength": 100,
                                   "pattern": "^[^\\s]+$"},
                    },
                    {
                        "name": "by_shard",
                        "in": "query",
                        "schema": {"type": "string", "enum": ["1", "true"]},
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": 1000,
                            "default": 100,
                        },
                    },
                ],
                extra={"410": {
                    "description": "events after this position were removed by the "
                                   "retention (--events-retention); the error names the "
                                   "oldest position still readable and what to do",
                    "content": {JSON: {"schema": schema_ref("Error")}},
                }},
            )
        },
        "/v1/events/cursor": {
            "get": _op(
                "The per-shard cursor token of a reader that has read every event up to "
                "the event id at (a crawl-wide position, GET /v1/events?after=): every "
                "event below it has an id at or below at, some above it may have been "
                "read already (read again, never skipped); converts an integer cursor "
                "(docs/events.md)",
                _ok("the cursor", {
                    "type": "object",
                    "required": ["at", "cursor"],
                    "properties": {
                        "at": {"type": "integer"},
                        "cursor": {"type": "string", "pattern": "^c1\\.[A-Za-z0-9_-]*$"},
                    },
                }),
                params=[{
                    "name": "at",
                    "in": "query",
                    "required": True,
                    "description": "an event id (crawl-wide position)",
                    "schema": {"type": "integer", "minimum": 0},
                }],
                extra={"410": {
                    "description": "events after this position were removed by the "
                                   "retention (--events-retention): the same error as "
                                   "GET /v1/events?after= gives",
                    "content": {JSON: {"schema": schema_ref("Error")}},
                }},
            )
        },
        "/v1/events/schema": {
            "get": _op(
                "JSON Schema (draft 2020-12) of event payloads (docs/events.md)",
                _ok("the schema", {"type": "object", "required": ["$schema", "properties"]}),
            )
        },
        "/v1/cluster": {
            "get": _op(
                "Workers, shards per worker, epochs, lease ages, handovers (store clock)",
                _ok("the cluster", {
                    "type": "object",
                    "required": ["now", "workers", "shards", "handovers", "live_workers"],
                    "properties": {
                        "now": {"type": "number"},
                        "worker_ttl": {"type": "number"},
                        "live_workers": {"type": "integer"},
                        "workers": {"type": "array", "items": {"type": "object"}},
                        "shards": {"type": "object"},
                        "max_epoch": {"type": "integer"},
                        "handovers": {"type": "object"},
                    },
                }),
                params=[{
                    "name": "worker_ttl",
                    "in": "query",
                    "description": "a worker is live while its heartbeat is younger (s)",
                    "schema": {"type": "number", "exclusiveMinimum": 0, "maximum": 86399,
                               "default": 30},
                }],
            )
        },
        "/healthz": {
            "get": _op(
                "Liveness",
                _ok("alive", {"type": "object", "properties": {"status": {"const": "ok"}}}),
            )
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics (text exposition format 0.0.4)",
                "responses": {
                    "200": {
                        "description": "metrics",
                        "content": {"text/plain; version=0.0.4": {"schema": {"type": "string"}}},
                    },
                    "401": {"$ref": "#/components/responses/Unauthorized"},
                    "404": {"description": "no crawl (no metrics) in this process"},
                },
            }
        },
        "/openapi.json": {"get": _op("This document", _ok("OpenAPI 3.1 document"))},
        "/": {
            "get": {
                "summary": "Live dashboard (static page; needs no token itself)",
                "security": [],
                "responses": {
                    "200": {
                        "description": "HTML page",
                        "content": {"text/html": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
    },
    "components": COMPONENTS,
}


_DOCUMENT["paths"].update(freshness_paths(_op, _ok, _DOMAIN))


def openapi_document() -> dict[str, Any]:
    """A fresh copy of the OpenAPI 3.1 document (callers may modify it)."""
    return copy.deepcopy(_DOCUMENT)
