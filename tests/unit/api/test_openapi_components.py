"""The components section of the OpenAPI document (api/openapi_components.py): every
reference of the document resolves into it, every entry of it is used, and a served
document is a copy that callers may change."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from courtier.api.openapi import openapi_document
from courtier.api.openapi_components import COMPONENTS, schema_ref


def _refs(node: Any) -> Iterator[str]:
    """Every ``$ref`` value below ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def test_schema_ref_points_into_the_components_schemas() -> None:
    assert schema_ref("Policy") == {"$ref": "#/components/schemas/Policy"}


def test_every_reference_of_the_document_names_a_component() -> None:
    document = openapi_document()
    refs = set(_refs(document))
    assert refs, "the document refers to no component at all"
    for ref in refs:
        prefix, section, name = ref.rsplit("/", 2)
        assert prefix == "#/components", ref
        assert name in document["components"][section], ref


def test_every_component_is_used() -> None:
    document = openapi_document()
    used = {tuple(ref.rsplit("/", 2)[1:]) for ref in _refs(document)}
    named = {(section, name) for section in ("schemas", "responses")
             for name in COMPONENTS[section]}
    assert named - used == set()
    schemes = {name for item in document["security"] for name in item}
    assert schemes == set(COMPONENTS["securitySchemes"])


def test_a_served_document_does_not_share_the_components() -> None:
    first = openapi_document()
    first["components"]["schemas"]["Policy"]["properties"].clear()
    first["components"]["responses"].pop("NotFound")
    assert COMPONENTS["schemas"]["Policy"]["properties"]
    assert "NotFound" in COMPONENTS["responses"]
    again = openapi_document()
    assert again["components"]["schemas"]["Policy"]["properties"]
    assert again["components"]["schemas"]["PolicyAnswer"]["properties"]["policy"]["properties"]
    assert "NotFound" in again["components"]["responses"]
