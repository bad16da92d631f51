"""Reading the measured figures file that ``bench/crawl_vs_scrapy.py --figures-out`` writes.

The crawl's figures (CPU per page, bytes per URL, event and audit row, WARC bytes) come
from that run; a database node's write rates (commit results/s, intake rows/s) from
``bench/store_bench.py --citus --figures-out``, which adds them to the same file (each
bench keeps the other's). The database's own bytes per URL, event and audit row, when
``bench/cluster_bench.py --figures-out`` measured them after a crawl on PostgreSQL or
Citus (``database_store``), replace the crawl's SQLite ones: the plan sizes PostgreSQL
nodes. The package ships the figures of its own last measured runs
(``measured_figures.json`` beside this module); ``courtier plan --figures FILE`` reads
another one (for example measured on your own machines).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from courtier.core.errors import ConfigError
from courtier.ops.plan import Figures

SHIPPED_NAME = "measured_figures.json"
REQUIRED = ("measured_at", "cpu_seconds_per_page", "store_bytes_per_url",
            "store_bytes_per_event", "warc_bytes_per_fetch", "warc_compression_ratio",
            "peak_rss_mb")
#: a database node's write rates (bench/store_bench.py --citus --figures-out)
OPTIONAL = ("commit_results_per_second_per_node", "intake_rows_per_second_per_node")
#: the bytes a PostgreSQL or Citus store keeps, ``database_store`` (cluster_bench.py
#: --figures-out), and the plan's figure each one replaces (and ``bytes_per_audit_row``
#: the audit row's)
DATABASE_BYTES = {"bytes_per_url": "store_bytes_per_url",
                  "bytes_per_event": "store_bytes_per_event"}


def shipped_text() -> str:
    return resources.files("courtier.ops").joinpath(SHIPPED_NAME).read_text(encoding="utf-8")


def load_figures(path: Path | None) -> tuple[Figures, dict[str, Any]]:
    """The figures (typed) and the whole file (for display); ConfigError names the file."""
    where = "--figures " + str(path) if path is not None else f"the shipped {SHIPPED_NAME}"
    try:
        text = path.read_text(encoding="utf-8") if path is not None else shipped_text()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read: {exc.strerror}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a JSON object")
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)} (write it with "
                          "bench/crawl_vs_scrapy.py --figures-out FILE)")
    try:
        numbers = {k: float(raw[k]) for k in REQUIRED if k != "measured_at"}
        commit, intake = (None if raw.get(k) is None else float(raw[k]) for k in OPTIONAL)
        audit = raw.get("store_bytes_per_audit_row", raw.get("store_bytes_per_fetch_log_row"))
        database = raw.get("database_store")
        if database is not None:
            if not isinstance(database, dict):
                raise ConfigError(f"{where}: database_store must be a JSON object")
            numbers.update({ours: float(database[key]) for key, ours in DATABASE_BYTES.items()
                            if key in database and ours in numbers})
            audit = database.get("bytes_per_audit_row", audit)
        figures = Figures(
            measured_at=str(raw["measured_at"]),
            source=str(raw.get("command", "")),
            store_bytes_per_audit_row=None if audit is None else float(audit),
            commit_results_per_second_per_node=commit,
            intake_rows_per_second_per_node=intake,
            **numbers,
        )
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: every figure must be a number") from None
    if figures.cpu_seconds_per_page <= 0:
        raise ConfigError(f"{where}: cpu_seconds_per_page must be > 0")
    return figures, raw
