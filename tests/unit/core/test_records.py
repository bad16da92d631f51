"""courtier.core.records: one definition of each shared record type, imported by either side.

Behaviour checks, not timings: which modules a fresh interpreter loads (as in
test_cli_startup.py), and that the Store protocol's module re-exports the same objects.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import courtier.core.records as records
import courtier.store.base as store_base
from courtier.core.errors import StoreError


def _loaded_after(statement: str) -> set[str]:
    probe = f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_store_base_re_exports_every_record_as_the_same_object() -> None:
    public = {name for name in vars(records) if not name.startswith("_")
              and getattr(vars(records)[name], "__module__", records.__name__)
              == records.__name__}
    defined_here = {name for name in public
                    if name.isupper() or isinstance(vars(records)[name], type)}
    assert {"DueUrl", "NewUrl", "FetchCommit", "HostRecord", "OVERDUE_AFTER"} <= defined_here
    missing = sorted(name for name in defined_here - {"DAY"} if name not in store_base.__all__)
    assert missing == []
    for name in defined_here - {"DAY"}:
        assert getattr(store_base, name) is getattr(records, name), name


def test_the_frontier_loads_without_the_store_package() -> None:
    modules = _loaded_after("import courtier.frontier.scheduler")
    assert "courtier.frontier.scheduler" in modules  # the probe really imported it
    assert sorted(m for m in modules if m.startswith("courtier.store")) == []


def test_the_store_loads_without_the_frontier_package() -> None:
    modules = _loaded_after("import courtier.store.sqlite, courtier.store.postgres")
    assert "courtier.store.sqlite" in modules
    assert sorted(m for m in modules if m.startswith("courtier.frontier")) == []


def test_reparse_payload_json_is_compact_and_refuses_what_json_cannot_hold() -> None:
    event = records.ReparseEvent(bytes(16), 1, 2, {"links": ["a", "b"], "title": "é"})
    assert event.payload_json() == '{"links":["a","b"],"title":"\\u00e9"}'
    assert json.loads(event.payload_json()) == event.payload
    for payload in ({"score": float("nan")}, {"score": float("inf")}, {"tags": {1, 2}}):
        with pytest.raises(StoreError, match="reparse event payload is not JSON-serialisable"):
            records.ReparseEvent(bytes(16), 1, 2, payload).payload_json()
