"""The ``components`` of the admin API's OpenAPI document (``api/openapi.py``).

The bearer security scheme, the error responses the operations refer to, and the named
schemas that request bodies and answers point to with :func:`schema_ref`.
"""

from __future__ import annotations

from typing import Any

JSON = "application/json"


def schema_ref(name: str) -> dict[str, Any]:
    """A ``$ref`` to the schema ``name`` of :data:`COMPONENTS`."""
    return {"$ref": f"#/components/schemas/{name}"}


def _error(description: str) -> dict[str, Any]:
    """An error response: its description and the ``Error`` schema."""
    return {"description": description, "content": {JSON: {"schema": schema_ref("Error")}}}


_POLICY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "delay": {
            "type": ["number", "null"],
            "minimum": 0,
            "maximum": 86400,
            "description": "seconds between request starts (null: crawl default)",
        },
        "max_in_flight": {"type": ["integer", "null"], "minimum": 1, "maximum": 64},
        "max_pages": {"type": ["integer", "null"], "minimum": 0, "maximum": 1_000_000_000},
        "blocked": {
            "type": "boolean",
            "default": False,
            "description": "fetch nothing from this host; queued URLs end as blocked",
        },
    },
}

#: the document's ``components`` section
COMPONENTS: dict[str, Any] = {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    "responses": {
        "BadRequest": _error("wrong input"),
        "Unauthorized": _error("missing or wrong bearer token"),
        "NotFound": _error("not known"),
        "ForeignOrigin": _error("Origin is neither this API's own nor an allowed host"),
        "ForeignHost": _error("without a token: Host is not loopback nor an allowed host "
                              "(DNS-rebinding defence)"),
        "NotJson": _error("a write without Content-Type: application/json"),
    },
    "schemas": {
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"type": "string"}},
        },
        "Policy": _POLICY,
        "PolicyAnswer": {
            "type": "object",
            "properties": {
                "domain": {"type": "string"},
                "policy": _POLICY,
                "override": {"type": "boolean"},
                "hosts": {"type": "array", "items": {"type": "object"}},
                "defaults": {"type": "object"},
                "applied_live": {"type": "array", "items": {"type": "string"}},
            },
        },
        "UrlState": {
            "type": "object",
            "properties": {
                "url": {"type": "object", "description": "the store row (url_key in hex)"},
                "robots": {
                    "type": "object",
                    "properties": {
                        "source": {"enum": ["live", "store", "none"]},
                        "decision": {"enum": ["allowed", "disallowed", "unknown"]},
                    },
                },
                "history": {
                    "type": "array",
                    "description": "fetch audit trail, oldest first (at most 50)",
                },
            },
        },
        "Stats": {
            "type": "object",
            "properties": {
                "running": {"type": "boolean",
                            "description": "this process crawls, or workers heartbeat in "
                                           "the store, or another process holds the "
                                           "embedded crawl's --data"},
                "figures": {"type": "object",
                            "description": "which keys are crawl-wide (crawl_wide) and "
                                           "which the answering worker's (this_worker)"},
                "live_workers": {"type": "array", "items": {"type": "string"}},
                "status": {"type": ["object", "null"]},
                "store": {"type": "object"},
                "status_mix": {"type": "object"},
                "outcomes": {"type": "object"},
                "politeness": {"type": ["object", "null"]},
                "budget": {"type": "object"},
            },
        },
        "Event": {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "url_key": {"type": "string"},
                "version": {"type": "integer"},
                "created_at": {"type": "number"},
                "payload": {
                    "type": "object",
                    "description": "described by GET /v1/events/schema (event-v1.json)",
                },
            },
        },
    },
}
