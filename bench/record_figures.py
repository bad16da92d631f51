"""Turn one measured courtier run of the benchmark into the figures `courtier plan` reads.

``crawl_vs_scrapy.py --figures-out FILE`` calls :func:`figures_from_run` after
courtier's crawl and before the temp dir is removed, so the figures come from
the same run as the printed table: CPU from ``os.wait4`` of courtier's process,
pages from nginx's access log, bytes from courtier's data directory (WARC
files on disk, the SQLite store measured table by table with ``dbstat``).

The default output is the copy shipped inside the package
(``src/courtier/ops/measured_figures.json``), so a release plans with the
figures of its own code.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import time
from pathlib import Path
from typing import Any

from report import RunResult
from store_sizes import StoreSizes, sqlite_sizes

BENCH = Path(__file__).resolve().parent
SHIPPED = BENCH.parent / "src" / "courtier" / "ops" / "measured_figures.json"
FORMAT = 1


def figures_from_run(result: RunResult, data: Path, args: dict[str, Any],
                     command: str) -> dict[str, Any]:
    """The plan figures of one courtier run (``data``: its --data directory)."""
    if not result.pages:
        raise ValueError("courtier fetched no pages: nothing to record")
    db = data / "courtier.db"
    sizes = sqlite_sizes(db)
    warc_bytes = sum(p.stat().st_size for p in (data / "warc").rglob("*.warc.gz"))
    records = result.pages + result.robots_requests + result.other_requests
    cpu_per_page = result.cpu_s / result.pages
    with sqlite3.connect(db) as conn:
        body_bytes = int(conn.execute("SELECT coalesce(sum(bytes), 0) FROM hosts").fetchone()[0])
    return {
        "format": FORMAT,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(terse=True),
            "load1_before": round(result.load_before, 2),
        },
        "workload": {k: args[k] for k in ("hosts", "pages", "page_bytes", "links", "delay",
                                          "concurrency")},
        "pages": result.pages,
        "body_bytes_per_page": round(body_bytes / result.pages),
        "wall_seconds": round(result.wall_s, 2),
        "cpu_seconds": round(result.cpu_s, 3),
        "cpu_seconds_per_page": round(cpu_per_page, 6),
        "pages_per_core_second": round(1 / cpu_per_page, 1),
        "peak_rss_mb": round(result.max_rss_mb, 1),
        "warc_bytes_per_fetch": round(warc_bytes / records),
        "warc_compression_ratio": round(body_bytes / warc_bytes, 2),
        "store_bytes_per_url": round(sizes.per_url()),
        "store_bytes_per_event": round(sizes.per_event()),
        "store_bytes_per_fetch_log_row": round(sizes.per_audit_row()),
        "store": "sqlite",
    }


#: the figures ``store_bench.py --citus --figures-out`` and ``cluster_bench.py
#: --figures-out`` write (a crawl's run keeps them)
STORE_KEYS = ("intake_rows_per_second_per_node", "commit_results_per_second_per_node",
              "store_nodes", "database_store")


def _existing(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def write_figures(figures: dict[str, Any], path: Path) -> None:
    """Write a crawl's figures to ``path``, keeping the store's per-node figures that
    another bench wrote there."""
    kept = {k: v for k, v in _existing(path).items() if k in STORE_KEYS}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**figures, **kept}, indent=1) + "\n", encoding="utf-8")
    print(f"figures for `courtier plan` written to {path}")


def write_store_figures(path: Path, measured: dict[str, dict[str, float]], known_urls: int,
                        worker_nodes: int, command: str) -> None:
    """Put the store's per-node write figures (``measured``: ``store_bench.py --citus``'s
    figures of each back-end at ``known_urls``) into the figures file at ``path``, its
    other figures kept. A worker node's share is the Citus cluster's rate over its
    ``worker_nodes`` (the coordinator's work is in the rate: it routes every row)."""
    citus = measured["Citus"]
    raw = _existing(path)
    raw["intake_rows_per_second_per_node"] = round(
        citus["intake_rows_per_second"] / worker_nodes)
    raw["commit_results_per_second_per_node"] = round(
        citus["commit_results_per_second"] / worker_nodes)
    raw["store_nodes"] = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": f"bench/store_bench.py {command}",
        "machine": {"cpus": os.cpu_count(), "load1": round(os.getloadavg()[0], 2)},
        "known_urls": known_urls,
        "citus_worker_nodes": worker_nodes,
        **{label: {k: round(v, 9 if "cpu" in k else 1) for k, v in figures.items()}
           for label, figures in measured.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw, indent=1) + "\n", encoding="utf-8")
    print(f"per-node store figures for `courtier plan` written to {path}")


def write_database_store(path: Path, sizes: StoreSizes, store: str, command: str) -> None:
    """Put the bytes a PostgreSQL or Citus store kept after a crawl (``sizes``: what the
    crawl's rows added) into the figures file at ``path``, as ``database_store``, every
    other figure kept: `courtier plan` then sizes the database nodes by them."""
    raw = _existing(path)
    raw["database_store"] = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": f"bench/cluster_bench.py {command}",
        "store": store,
        "urls": sizes.urls,
        "bytes_per_url": round(sizes.per_url()),
        "bytes_per_event": round(sizes.per_event()),
        "bytes_per_audit_row": round(sizes.per_audit_row()),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw, indent=1) + "\n", encoding="utf-8")
    print(f"the store's bytes for `courtier plan` written to {path}")
