"""OpenAPI paths of the refresh-plan routes (``api/freshness.py``), merged by openapi.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

FRESHNESS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "tier": {"type": ["string", "null"], "description": "a configured tier name"},
        "min_interval": {"type": ["number", "null"], "exclusiveMinimum": 0,
                         "maximum": 365 * 86400, "description": "seconds"},
        "max_interval": {"type": ["number", "null"], "exclusiveMinimum": 0,
                         "maximum": 365 * 86400, "description": "seconds"},
        "value_factor": {"type": ["number", "null"], "minimum": 0, "maximum": 1e6,
                         "description": "multiplies the derived value of the host's URLs"},
    },
}

VALUES = {
    "type": "object",
    "required": ["values"],
    "additionalProperties": False,
    "properties": {
        "values": {
            "type": "array",
            "maxItems": 10_000,
            "items": {
                "type": "object",
                "required": ["url", "value"],
                "properties": {"url": {"type": "string"},
                               "value": {"type": "number", "minimum": 0, "maximum": 1e6}},
            },
        }
    },
}


def freshness_paths(op: Callable[..., dict[str, Any]], ok: Callable[..., dict[str, Any]],
                    domain: dict[str, Any]) -> dict[str, Any]:
    """The paths, built with openapi.py's helpers (``_op``, ``_ok``, ``_DOMAIN``)."""
    answer = ok("the override now in force")
    return {
        "/v1/domains/{domain}/freshness": {
            "get": op("A domain's freshness override (tier, interval bounds, value factor)",
                      answer, params=[domain]),
            "put": op("Set a domain's freshness override (applied at the next refill)",
                      answer, params=[domain], body=FRESHNESS),
            "delete": op("Remove a domain's freshness override", answer, params=[domain]),
        },
        "/v1/urls/values": {
            "put": op("Set the values of known URLs (unknown ones are counted, not added)",
                      ok('{"updated": n, "unknown": m}'), body=VALUES),
        },
    }
