"""``courtier plan``: the capacity table of a crawl, as text or JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from courtier.ops import plan as p
from courtier.ops.figures import load_figures


def add_plan_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--known-urls", required=True,
                    help="URLs in the store, e.g. 10e9 or 10B")
    sp.add_argument("--fetches-per-day", required=True, help="fetch budget a day, e.g. 1e9")
    sp.add_argument("--page-kb", type=float, required=True,
                    help="average body size in KB (1 KB = 1,000 bytes), e.g. 200")
    sp.add_argument("--peak-factor", type=float, default=p.DEFAULT_PEAK_FACTOR,
                    help=f"planned peak ÷ average rate ({p.DEFAULT_PEAK_FACTOR})")
    sp.add_argument("--compression", type=float, default=p.DEFAULT_COMPRESSION,
                    help=f"body bytes ÷ WARC bytes ({p.DEFAULT_COMPRESSION}, an assumption "
                         "for HTML; measure your own WARCs)")
    sp.add_argument("--refresh-split", default=p.DEFAULT_REFRESH_SPLIT,
                    help="COUNT:DAYS tiers, 'rest' for the remaining known URLs "
                         f"({p.DEFAULT_REFRESH_SPLIT})")
    sp.add_argument("--retention-days", type=float, default=p.DEFAULT_RETENTION_DAYS,
                    help=f"days WARC files are kept ({p.DEFAULT_RETENTION_DAYS})")
    sp.add_argument("--events-retention", type=float, default=p.DEFAULT_EVENTS_RETENTION,
                    metavar="SECONDS", help="the crawl's --events-retention: seconds outbox "
                    f"events are kept ({p.DEFAULT_EVENTS_RETENTION:.0f} = 7 days)")
    sp.add_argument("--audit-retention", type=float, default=p.DEFAULT_AUDIT_RETENTION,
                    metavar="SECONDS", help="the crawl's --audit-retention: seconds audit "
                    f"rows are kept ({p.DEFAULT_AUDIT_RETENTION:.0f} = 90 days)")
    sp.add_argument("--core-utilisation", type=float, default=p.DEFAULT_CORE_UTILISATION,
                    help=f"share of a core a worker may use at peak "
                         f"({p.DEFAULT_CORE_UTILISATION})")
    sp.add_argument("--cores-per-machine", type=int, default=p.DEFAULT_CORES_PER_MACHINE,
                    help=f"cores of one crawl machine ({p.DEFAULT_CORES_PER_MACHINE})")
    sp.add_argument("--pg-node-tb", type=float, default=p.DEFAULT_PG_NODE_TB,
                    help=f"usable TB of one PostgreSQL node ({p.DEFAULT_PG_NODE_TB})")
    sp.add_argument("--commit-results-per-second", type=float,
                    help="fetch results one database node commits a second (default: the "
                         "figures file's commit_results_per_second_per_node)")
    sp.add_argument("--intake-rows-per-second", type=float,
                    help="new URL rows one database node takes in a second (default: the "
                         "figures file's intake_rows_per_second_per_node)")
    sp.add_argument("--figures", type=Path,
                    help="measured figures file (default: the one shipped with courtier)")
    sp.add_argument("--json", action="store_true", help="print the plan as JSON")


def shape_from_args(args: argparse.Namespace) -> p.CrawlShape:
    return p.CrawlShape(
        known_urls=p.parse_count(args.known_urls, "--known-urls"),
        fetches_per_day=p.parse_count(args.fetches_per_day, "--fetches-per-day"),
        page_kb=args.page_kb, peak_factor=args.peak_factor, compression=args.compression,
        refresh=p.parse_refresh_split(args.refresh_split),
        retention_days=args.retention_days, events_retention=args.events_retention,
        audit_retention=args.audit_retention, core_utilisation=args.core_utilisation,
        cores_per_machine=args.cores_per_machine, pg_node_tb=args.pg_node_tb,
        commit_results_per_second=args.commit_results_per_second,
        intake_rows_per_second=args.intake_rows_per_second,
    ).validate()


def size(n: float) -> str:
    """Decimal units: 200e12 → '200 TB'."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:,.3g} {unit}" if n / scale < 100 else f"{n / scale:,.0f} {unit}"
    return f"{n:,.0f} B"


def bandwidth(bytes_per_s: float) -> str:
    return f"{size(bytes_per_s)}/s ({bytes_per_s * 8 / 1e9:,.1f} Gbit/s)"


def render(shape: p.CrawlShape, plan: p.Plan, raw: dict[str, Any], where: str) -> str:
    """The capacity table as text."""
    rows: list[tuple[str, str]] = [
        ("known URLs", f"{shape.known_urls:,.0f}"),
        ("fetch budget", f"{shape.fetches_per_day:,.0f} / day"),
        ("average fetch rate", f"{plan.average_fetches_per_second:,.0f} /s"),
        (f"planned peak (× {shape.peak_factor:g})", f"{plan.peak_fetches_per_second:,.0f} /s"),
        ("average bandwidth", bandwidth(plan.average_bandwidth_bytes_per_second)),
        ("peak bandwidth", bandwidth(plan.peak_bandwidth_bytes_per_second)),
        (f"bodies at {shape.page_kb:g} KB, before compression", f"{size(plan.body_bytes_per_day)}"
                                                                " / day"),
        (f"WARC (÷ {shape.compression:g})", f"{size(plan.warc_bytes_per_day)} / day, "
         f"{size(plan.warc_bytes_retained)} per {shape.retention_days:g} days"),
        ("store: URL rows", f"{size(plan.url_store_bytes)}"),
        ("store: outbox events", f"{size(plan.event_bytes_per_day)} / day, "
         f"{size(plan.event_bytes_retained)} kept "
         f"(--events-retention {shape.events_retention / p.DAY:g} days + today)"),
        ("store: audit log", f"{size(plan.audit_bytes_per_day)} / day, "
         f"{size(plan.audit_bytes_retained)} kept "
         f"(--audit-retention {shape.audit_retention / p.DAY:g} days + today)"),
    ]
    for tier in plan.tiers:
        rows.append((f"refresh {tier.label} every {tier.days:g} d",
                     f"{tier.fetches_per_day:,.0f} / day"))
    rows.append(("refresh total", f"{plan.refresh_fetches_per_day:,.0f} / day"))
    if plan.discovery_fetches_per_day >= 0:
        rows.append(("left for new URLs", f"{plan.discovery_fetches_per_day:,.0f} / day"))
    else:
        fits = plan.rest_days_that_fit
        hint = (f"; the rest fits on a {fits:,.1f}-day cycle" if fits is not None
                else "")
        rows.append(("OVER BUDGET by", f"{-plan.discovery_fetches_per_day:,.0f} / day{hint}"))
    rows += [
        (f"cores (at {shape.core_utilisation:.0%} each)", f"{plan.cores:,}"),
        ("workers (one per core)", f"{plan.workers:,} on {plan.machines:,} machines of "
                                   f"{shape.cores_per_machine} cores, "
                                   f"≈{plan.worker_memory_mb:,.0f} MB each"),
        ("store writes at peak", f"{plan.commits_per_second_peak:,.0f} commit results/s, "
                                 f"{plan.new_urls_per_second_peak:,.0f} new URLs/s"),
        ("PostgreSQL nodes", f"{plan.pg_nodes:,} (writes {plan.pg_nodes_for_writes:,} at "
                             f"{plan.commit_results_per_second_per_node:,.0f} commit results/s"
                             f" and {plan.intake_rows_per_second_per_node:,.0f} intake rows/s"
                             f" a node, "
                             f"{'measured' if plan.store_rates_measured else 'given'}; "
                             f"storage {plan.pg_nodes_for_storage:,} at "
                             f"{shape.pg_node_tb:g} TB)"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines += ["", f"measured figures ({where}), measured {raw.get('measured_at')}:"]
    lines.append(f"  {raw.get('cpu_seconds_per_page', 0) * 1000:.2f} ms CPU per page "
                 f"({raw.get('pages_per_core_second', '?')} pages per core-second), "
                 f"{raw.get('pages', '?')} pages")
    lines.append(f"  WARC compression on the bench's synthetic pages: "
                 f"{raw.get('warc_compression_ratio')}")
    database = raw.get("database_store")
    used = "" if isinstance(database, dict) else ", used by the plan"
    lines.append(f"  store {raw.get('store_bytes_per_url')} B per URL, "
                 f"{raw.get('store_bytes_per_event')} B per event ({raw.get('store', '?')}"
                 f"{used}); peak RSS {raw.get('peak_rss_mb')} MB")
    if isinstance(database, dict):
        lines.append(f"  store on {database.get('store', '?')}, used by the plan: "
                     f"{database.get('bytes_per_url')} B per URL, "
                     f"{database.get('bytes_per_event')} B per event, "
                     f"{database.get('bytes_per_audit_row')} B per audit row, measured "
                     f"{database.get('measured_at')} by {database.get('command')}")
    if raw.get("command"):
        lines.append(f"  by: {raw['command']}")
    nodes = raw.get("store_nodes")
    if isinstance(nodes, dict):
        lines.append(f"  a database node's write rates: Citus, {nodes.get('citus_worker_nodes')}"
                     f" worker nodes at {nodes.get('known_urls', 0):,} known URLs, measured "
                     f"{nodes.get('measured_at')}")
        lines.append(f"  by: {nodes.get('command')}")
    return "\n".join(lines)


def run_plan(args: argparse.Namespace) -> int:
    shape = shape_from_args(args)
    figures, raw = load_figures(args.figures)
    result = p.plan(shape, figures)
    where = str(args.figures) if args.figures else "shipped with courtier"
    if args.json:
        out = {"shape": dataclasses.asdict(shape), "plan": dataclasses.asdict(result),
               "figures": raw, "figures_file": where}
        print(json.dumps(out, indent=1, default=str))
    else:
        print(render(shape, result, raw, where))
    return 0
