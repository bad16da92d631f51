"""The indexer feed: what each outbox event carries, and its published JSON Schema.

* :mod:`courtier.events.feed` builds the payload of a fetch (or re-parse) event
  from a commit and the parsed page, so an indexer never has to re-parse.
* ``schema/event-v1.json`` is the versioned schema of that payload (served at
  ``GET /v1/events/schema``, described in ``docs/events.md``).
"""

from courtier.events.feed import EVENT_VERSION, link_entries, load_schema, page_fields

__all__ = ["EVENT_VERSION", "link_entries", "load_schema", "page_fields"]
