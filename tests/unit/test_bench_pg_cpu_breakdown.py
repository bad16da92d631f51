"""bench/pg_cpu_breakdown.py's pure parts: a PostgreSQL process's kind from its ps title,
and a perf sample's phase from its call stack (the figures in bench/README.md's
"Where PostgreSQL's CPU goes" section are made of these)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def _tool() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "bench" / "pg_cpu_breakdown.py"
    spec = importlib.util.spec_from_file_location("pg_cpu_breakdown", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_process_kind_is_read_from_its_ps_title() -> None:
    tool = _tool()
    assert tool.kind_of("postgres: autovacuum worker courtier_bench_1", False) == \
        "autovacuum worker"
    assert tool.kind_of("postgres: walwriter", False) == "WAL writer"
    assert tool.kind_of("postgres: checkpointer", False) == "checkpointer"
    assert tool.kind_of("postgres: background writer", False) == "background writer"
    # a client backend's title names its user, database and state, which change
    assert tool.kind_of("postgres: root courtier_bench_1 127.0.0.1(5561) idle", False) == \
        "client backend"
    assert tool.kind_of("postgres: root courtier_bench_1 127.0.0.1(5561) SELECT", False) \
        == "client backend"
    # its title while it connects ends in "startup", which is not the startup process
    assert tool.kind_of("postgres: root courtier_bench_1 127.0.0.1(5561) startup", False) \
        == "client backend"
    assert tool.kind_of("postgres: startup recovering 000000010000000000000001", False) \
        == "other background"


PG = "/usr/lib/postgresql/15/bin/postgres"


def _sample(*frames: str, dso: str = PG) -> str:
    """One sample of ``perf script -F pid,ip,sym,dso``: its leaf first."""
    return "postgres   310\n" + "".join(f"\t  4a1c20 {name} ({dso})\n" for name in frames)


_SCRIPT = "\n".join([
    _sample("palloc0", "heap_form_tuple", "record_recv", "PostgresMain"),
    _sample("_bt_compare", "_bt_check_unique", "_bt_doinsert", "btinsert",
            "ExecInsertIndexTuples", "standard_ExecutorFinish"),
    _sample("_bt_compare", "_bt_first", "ExecCheckIndexConstraints"),
    _sample("[unknown]", "do_syscall_64", dso="[kernel.kallsyms]"),
    _sample("[unknown]", dso="/usr/lib/postgresql/15/lib/plpgsql.so"),
    _sample("ExecInterpExprStillValid"),
])


def test_a_sample_counts_once_in_the_first_phase_on_its_stack() -> None:
    phases = _tool().phases_of(_SCRIPT)
    assert sum(phases.values()) == 6
    assert phases["protocol: receiving parameters (array_recv, record_recv)"] == 1
    assert phases["index insertion (B-tree entries of inserted and non-HOT updated rows)"] \
        == 1
    # a pre-check's index descent is the pre-check's, not an index scan's
    assert phases["ON CONFLICT pre-checks (a unique-index probe before each insert)"] == 1
    assert phases["index scans (look-ups, probes, ranges)"] == 0
    assert phases["kernel (socket I/O, scheduling, page faults)"] == 1
    assert phases["PL/pgSQL interpreter"] == 1
    assert phases["executor expressions, tuples, memory, other"] == 1
