#!/usr/bin/env python3
"""The CPU of a PostgreSQL server's processes by kind (client backends, autovacuum
workers and launcher, WAL writer, checkpointer, background writer, the postmaster,
others), sampled from /proc every 0.2 s while a bench runs against it.

Run it beside a bench that starts its own throwaway server (``cluster_bench.py
--plain-server``): it waits for a postmaster whose command line holds ``--match``
(default: the bench's ``courtier-bench-plain-`` data directory), samples each child's
``utime + stime`` with its ``ps`` title (``/proc/PID/cmdline``, which PostgreSQL
rewrites: ``postgres: autovacuum worker dbname``, ``postgres: user db [local] idle``),
and stops when the postmaster exits or after ``--seconds``. A child that exits between
two samples loses the CPU it spent after the last one; the postmaster's ``cutime +
cstime`` (its reaped children) bounds that: the report shows the difference as
``exited, after their last sample``.

With ``--perf SECONDS`` it also runs ``perf record -p`` on the server's processes then
alive (the pool's backends, the WAL writer, …; not autovacuum workers started later)
for that long, starting
``--perf-after`` seconds after the first backend of ``--database-prefix`` appears, and
prints the samples of the server's processes by symbol group (``--perf-report``
redoes that from a kept ``perf.data`` and pid list).

    nice -n 5 .venv/bin/python bench/cluster_bench.py --plain-server ... &
    .venv/bin/python bench/pg_cpu_breakdown.py --out /tmp/breakdown --perf 40
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")

#: (kind, pattern of the ps title after "postgres: "), first match wins; else a client
#: backend ("user database host state")
KINDS = [
    ("autovacuum worker", r"^autovacuum worker"),
    ("autovacuum launcher", r"^autovacuum launcher"),
    ("WAL writer", r"^walwriter"),
    ("checkpointer", r"^checkpointer"),
    ("background writer", r"^background writer"),
    ("logical replication launcher", r"^logical replication launcher"),
    # anchored: a client backend's title ends in its state, "startup" while it connects
    ("other background", r"^(archiver|stats|walsender|walreceiver|startup|parallel worker"
                         r"|logical replication worker|TimescaleDB|Citus|citus)"),
]

#: (group, pattern of a symbol or its shared object), first match wins
GROUPS = [
    ("TOAST compression (pglz / lz4)", r"^(pglz_|LZ4_|lz4|toast_compress|ZSTD)"),
    ("TOAST (other)", r"^(toast_|heap_toast|detoast|heap_tuple_untoast|"
                      r"heap_fetch_toast|toast_tuple)"),
    ("WAL insertion / CRC", r"^(XLog|CopyXLogRecordToWAL|ReserveXLog|pg_comp_crc32c|"
                            r"log_heap|XLogRecordAssemble|WALInsert|GetXLogBuffer|"
                            r"AdvanceXLInsertBuffer|XLogWrite|issue_xlog_fsync)"),
    ("B-tree index (insert, search)", r"^(_bt|bt|index_insert|index_getnext|"
                                      r"index_fetch|ExecInsertIndexTuples|"
                                      r"ExecCheckIndexConstraints|_hash|index_)"),
    ("heap access", r"^(heap|heapam|RelationGetBufferForTuple|HeapTuple|"
                    r"heap_page_prune|page_|PageAdd|PageRepair|PageGetHeapFreeSpace|"
                    r"HeapCheck|HeapTupleSatisfies|slot_deform|tts_|ExecStoreBuffer|"
                    r"ExecFetch|ExecMaterialize|ExecCopySlot|ExecStoreHeap|"
                    r"heapgettup|heap_getnext|visibilitymap)"),
    ("buffer manager", r"^(ReadBuffer|ReleaseBuffer|LockBuffer|UnlockReleaseBuffer|"
                       r"MarkBuffer|PinBuffer|UnpinBuffer|BufTable|StrategyGetBuffer|"
                       r"BufferAlloc|FlushBuffer|BufferGet|ConditionalLockBuffer|"
                       r"IncrBufferRefCount|BufferIsPermanent|ResourceOwner|"
                       r"LockBufHdr|smgr|md|mdwrite|FileWrite|FileRead|pg_pwrite|"
                       r"pg_pread)"),
    ("locks, LWLocks, snapshots, xact", r"^(LWLock|LockAcquire|LockRelease|"
                                        r"LockRelationOid|LockTuple|Lock|SetupLockIn|"
                                        r"s_lock|GetSnapshotData|TransactionId|"
                                        r"XactLockTable|CommitTransaction|"
                                        r"StartTransaction|AtEOXact|AtCommit|"
                                        r"ProcArray|GetNewTransactionId|"
                                        r"RecordTransactionCommit|pgstat_|"
                                        r"ProcessInvalidation|AcceptInvalidation|"
                                        r"ReceiveSharedInvalid|SIGet|CallSyscache|"
                                        r"LocalExecuteInvalidation|ResetCatalog)"),
    ("JSON / jsonb", r"^(json|jsonb|JsonbValue|pushJsonbValue|JsonLex|"
                     r"pg_parse_json|parse_|convertJsonb|fillJsonbValue|"
                     r"findJsonbValue|getIthJsonbValue|IsValidJsonNumber|"
                     r"datum_to_json|composite_to_json|escape_json|"
                     r"lengthCompareJsonbPair|uniqueifyJsonbObject|"
                     r"reserveFromBuffer|appendToBuffer|copyToBuffer|JsonbDeep|"
                     r"JsonbIterator|JsonbToCString|compareJsonb)"),
    ("PL/pgSQL", r"(^exec_|^plpgsql_|plpgsql\.so)"),
    ("planner", r"^(planner|standard_planner|subquery_planner|grouping_planner|"
                r"query_planner|make_one_rel|set_rel|set_base_rel|set_append|"
                r"create_|cost_|add_path|build_|make_|expand_|get_relation_info|"
                r"preprocess_|pull_up|eval_const|estimate_|clauselist_|"
                r"restriction_selectivity|get_attstatsslot|examine_variable|"
                r"generate_|prune_append|match_|find_|fix_|set_plan|"
                r"set_cheapest|choose_custom_plan|BuildCachedPlan|"
                r"GetCachedPlan|CheckCachedPlan|RevalidateCachedQuery|"
                r"pg_plan_|get_partition|partkey|plan_)"),
    ("parser / analyze / rewrite", r"^(raw_parser|base_yyparse|core_yylex|"
                                   r"parse_analyze|transform|pg_analyze|"
                                   r"QueryRewrite|pg_rewrite|scanner|"
                                   r"pg_parse_query|addRangeTable|make_var)"),
    ("executor", r"^(Exec|exec|ExecutorStart|ExecutorRun|ExecutorEnd|"
                 r"standard_Executor|InitPlan|ExecInit|ExecEnd|ExecProc|"
                 r"ExecScan|ExecModifyTable|ExecInsert|ExecUpdate|ExecOnConflict|"
                 r"ExecInterp|ExecJust|ExecEval|ExecAgg|ExecHash|ExecSort|"
                 r"ExecNestLoop|ExecResult|ExecProject|ExecQual|"
                 r"ExecFindPartition|ExecSetupPartitionTupleRouting|"
                 r"ExecInitPartitionInfo|ExecBuildProjectionInfo|"
                 r"ExecReadyInterpretedExpr|CreateExecutorState|"
                 r"FreeExecutorState|tuplesort|tuplestore|ExecOpenIndices|"
                 r"ExecCloseIndices|ExecGetTriggerResultRel|"
                 r"ExecInitModifyTable|ExecInitRangeTable|ExecCreatePartitionPruneState)"),
    ("catalog caches, relcache", r"^(SearchCatCache|SearchSysCache|"
                                 r"CatalogCache|RelationIdGetRelation|"
                                 r"RelationBuild|RelationClose|relation_open|"
                                 r"table_open|try_relation_open|"
                                 r"RelationGetIndexList|RelationGetPartition|"
                                 r"get_rel_|get_attname|get_opfamily|get_op|"
                                 r"get_typ|get_func|lookup_type_cache|"
                                 r"ReleaseCatCache|ReleaseSysCache|SysCache|"
                                 r"RelnameGetRelid|LookupTypeName|"
                                 r"typeidType|getBaseType|"
                                 r"PartitionDirectory|RelationGetPartitionDesc|"
                                 r"find_inheritance|find_all_inheritors)"),
    ("memory (palloc, hash tables)", r"^(AllocSet|palloc|pfree|repalloc|"
                                     r"MemoryContext|GenerationAlloc|SlabAlloc|"
                                     r"hash_search|hash_seq|hash_bytes|hash_any|"
                                     r"hash_uint32|tag_hash|string_hash|"
                                     r"hash_create|hash_destroy|list_|lappend|"
                                     r"lcons|bms_|copyObject|_copy|equal|_equal|"
                                     r"nodeToString|outNode|stringToNode|"
                                     r"_read|pnstrdup|pstrdup|datumCopy|"
                                     r"makeStringInfo|appendStringInfo|"
                                     r"enlargeStringInfo|initStringInfo)"),
    ("text, numbers, comparisons", r"^(text|varstr|bttext|varlena|texteq|"
                                   r"pg_mbstrlen|pg_verify|pg_utf8|int4|int8|"
                                   r"numeric|timestamp|float|byteacmp|byteaout|"
                                   r"byteain|FunctionCall|DirectFunctionCall|"
                                   r"OidFunctionCall|pg_detoast|array|construct_|"
                                   r"deconstruct_|ArrayGet|record_|"
                                   r"heap_form_tuple|heap_deform_tuple|"
                                   r"heap_fill_tuple|heap_compute_data_size|"
                                   r"nocachegetattr|pg_ltoa|pg_lltoa|"
                                   r"pg_ultoa|ReadArrayStr|array_in|"
                                   r"InputFunctionCall|OutputFunctionCall|"
                                   r"ReceiveFunctionCall|SendFunctionCall|"
                                   r"byteasend|bytearecv|textsend|textrecv|"
                                   r"pq_|hashtext|hash_numeric|uuid|md5|sha)"),
    ("protocol, portals, plan cache", r"^(exec_bind|exec_execute|exec_parse|"
                                      r"exec_simple|PostgresMain|PortalRun|"
                                      r"PortalStart|PortalDrop|CreatePortal|"
                                      r"SPI_|_SPI|pq_|socket_|secure_|"
                                      r"ProcessClientReadInterrupt|"
                                      r"CompleteCachedPlan|CreateCachedPlan|"
                                      r"ReleaseCachedPlan|SaveCachedPlan|"
                                      r"PortalRunMulti|ProcessQuery|"
                                      r"printtup|SendRowDescription|"
                                      r"ProcessUtility|standard_ProcessUtility)"),
    ("vacuum", r"^(lazy_|heap_vacuum|vacuum|vac_|btvacuum|btbulkdelete|"
               r"heap_page_prune|lazy_scan|do_autovacuum|table_recheck_autovac|"
               r"relation_needs_vacanalyze|pgstat_fetch_stat|acquire_sample_rows|"
               r"compute_scalar_stats|compute_|analyze_|do_analyze)"),
    ("libc (memcpy, memset, strlen, …)", r"(^__memcpy|^__memmove|^__memset|"
                                        r"^__strlen|^__strcmp|^__memcmp|^__strncmp|"
                                        r"libc\.so|^__GI_|^_IO_|^malloc|^free|"
                                        r"^_int_malloc|^_int_free|^cfree|^__libc)"),
    ("kernel", r"^\[k\]"),
]
_GROUPS = [(name, re.compile(p)) for name, p in GROUPS]


def group_of(symbol: str, dso: str) -> str:
    for name, pattern in _GROUPS:
        if pattern.search(symbol) or (dso and pattern.search(dso)):
            return name
    if dso.startswith("[kernel") or symbol.startswith("[k]"):
        return "kernel"
    if symbol.startswith("0x") or symbol.startswith("[unknown]"):
        return f"unresolved ({dso or '?'})"
    return "other named"


def kind_of(title: str, is_postmaster: bool) -> str:
    if is_postmaster:
        return "postmaster"
    body = title.removeprefix("postgres:").strip()
    for name, pattern in KINDS:
        if re.search(pattern, body):
            return name
    return "client backend"


def _stat(pid: int | str) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def find_postmaster(match: str) -> int | None:
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if match in cmd and cmd.split(" ")[0].endswith("postgres") and " -D " in cmd:
            return int(entry.name)
    return None


def children(postmaster: int) -> dict[int, tuple[str, float]]:
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat(entry.name)
            if int(fields[1]) != postmaster:
                continue
            title = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        out[int(entry.name)] = (title.strip(), (int(fields[11]) + int(fields[12])) / TICK)
    return out


def perf_report(data: Path, pids: list[int]) -> list[tuple[str, str, float]]:
    """(symbol, dso, percent of the listed pids' samples) from ``perf report``."""
    text = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--stdio", "-q",
         "--percent-limit", "0", "--sort", "dso,sym", "-g", "none",
         "--pid", ",".join(map(str, pids))],
        capture_output=True, text=True, check=False).stdout
    rows = []
    for line in text.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)$", line)
        if m:
            pct, dso, level, sym = m.groups()
            sym = sym.strip()
            rows.append((("[k] " if level == "k" else "") + sym, dso, float(pct)))
    return rows


#: (phase, frames any of which puts a sample in it), first match from the top: each
#: sample counted once, by the innermost recognisable work its call stack shows
PHASES = [
    ("protocol: receiving parameters (array_recv, record_recv)",
     {"array_recv", "record_recv", "exec_bind_message"}),
    ("ON CONFLICT pre-checks (a unique-index probe before each insert)",
     {"ExecCheckIndexConstraints"}),
    ("index insertion (B-tree entries of inserted and non-HOT updated rows)",
     {"ExecInsertIndexTuples", "_bt_doinsert", "btinsert", "index_insert"}),
    ("index scans (look-ups, probes, ranges)",
     {"index_getnext_slot", "index_getnext_tid", "btgettuple", "_bt_first",
      "index_fetch_heap", "IndexNext", "ExecIndexScan", "index_beginscan",
      "index_rescan"}),
    ("WAL insertion", {"XLogInsert", "XLogInsertRecord", "XLogRecordAssemble"}),
    ("TOAST compression", {"toast_compress_datum", "LZ4_compress_fast_extState",
                           "pglz_compress", "heap_toast_insert_or_update"}),
    ("heap insert / update / scan", {"heap_insert", "heap_update", "heap_multi_insert",
                                     "heap_getnextslot", "heap_hot_search_buffer",
                                     "heap_page_prune_opt", "RelationGetBufferForTuple",
                                     "heapgettup", "heap_lock_tuple", "heap_delete"}),
    ("planning (custom plans, plan-cache checks)",
     {"GetCachedPlan", "pg_plan_queries", "standard_planner", "BuildCachedPlan",
      "RevalidateCachedQuery", "pg_analyze_and_rewrite_fixedparams",
      "pg_analyze_and_rewrite_withcb", "raw_parser"}),
    ("executor start / end (plan trees, opening partitions and indexes)",
     {"standard_ExecutorStart", "ExecInitNode", "standard_ExecutorEnd", "ExecEndNode",
      "ExecOpenIndices", "ExecCloseIndices", "AcquireExecutorLocks",
      "CreateExecutorState", "FreeExecutorState"}),
    ("transaction start / commit, locks",
     {"CommitTransactionCommand", "StartTransactionCommand", "LockAcquireExtended",
      "LockRelationOid", "LockReleaseAll", "GetSnapshotData"}),
    ("sorts, tuplestores, aggregates", {"tuplesort_performsort", "tuplesort_puttupleslot",
                                        "tuplestore_puttupleslot", "tuplestore_gettupleslot",
                                        "tuplesort_gettupleslot", "ExecAgg"}),
]


def phases_of(script: str) -> Counter[str]:
    """Samples of ``perf script -F pid,ip,sym,dso`` output by :data:`PHASES` (the first
    phase one of whose frames is on the sample's stack; else the kernel's when the leaf
    is in it, PL/pgSQL's when the leaf is in plpgsql.so, else the executor's rest)."""
    out: Counter[str] = Counter()
    for block in script.split("\n\n"):
        frames = [line.split() for line in block.strip().splitlines()[1:]]
        if not frames:
            continue
        names = {f[1] for f in frames if len(f) > 1}
        for name, marks in PHASES:
            if names & marks:
                out[name] += 1
                break
        else:
            leaf = " ".join(frames[0][1:])
            if "kernel" in leaf:
                out["kernel (socket I/O, scheduling, page faults)"] += 1
            elif "plpgsql" in leaf:
                out["PL/pgSQL interpreter"] += 1
            else:
                out["executor expressions, tuples, memory, other"] += 1
    return out


def phase_shares(data: Path, pids: list[int]) -> Counter[str]:
    """:func:`phases_of` the samples of ``pids`` in ``data``."""
    return phases_of(subprocess.run(
        ["perf", "script", "-i", str(data), "--pid", ",".join(map(str, pids)),
         "-F", "pid,ip,sym,dso"], capture_output=True, text=True, check=False).stdout)


def print_perf(data: Path, pids: list[int], top: int) -> None:
    phases = phase_shares(data, pids)
    samples = sum(phases.values()) or 1
    print(f"\nperf samples of the server's processes by phase ({samples} samples, each "
          "counted once by the first phase on its stack):")
    print("| phase | share |\n|---|---|")
    for name, n in phases.most_common():
        print(f"| {name} | {100 * n / samples:.1f} % |")
    rows = perf_report(data, pids)
    total = sum(p for _, _, p in rows) or 1.0
    groups: dict[str, float] = defaultdict(float)
    for sym, dso, pct in rows:
        groups[group_of(sym, dso)] += pct
    print(f"\nperf samples of the server's processes by symbol group ({total:.1f} % listed):")
    print("| group | share of the samples |\n|---|---|")
    for name, pct in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {100 * pct / total:.1f} % |")
    print(f"\ntop {top} symbols:")
    print("| symbol | object | share | group |\n|---|---|---|---|")
    for sym, dso, pct in sorted(rows, key=lambda r: -r[2])[:top]:
        print(f"| `{sym}` | {dso} | {100 * pct / total:.2f} % | {group_of(sym, dso)} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--match", default="courtier-bench-plain-")
    ap.add_argument("--database-prefix", default="",
                    help="start perf when a backend whose title holds this appears")
    ap.add_argument("--seconds", type=float, default=3600)
    ap.add_argument("--out", type=Path, required=True, help="folder for the samples")
    ap.add_argument("--perf", type=float, default=0.0, help="seconds of perf record")
    ap.add_argument("--perf-after", type=float, default=20.0)
    ap.add_argument("--perf-freq", type=int, default=499)
    ap.add_argument("--call-graph", default="fp",
                    help="perf's --call-graph: fp (cheap; postgres has no frame pointers, so "
                    "flat) or dwarf (callers of static code too, ~8 KB a sample)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--perf-report", action="store_true",
                    help="only print the kept perf.data's symbol groups")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if a.perf_report:
        kept = a.out / ("perf_pids.json" if (a.out / "perf_pids.json").exists()
                        else "pids.json")
        pids = json.loads(kept.read_text())
        print_perf(a.out / "perf.data", [int(p) for p in pids], a.top)
        return 0
    postmaster = None
    deadline = time.monotonic() + a.seconds
    while postmaster is None and time.monotonic() < deadline:
        postmaster = find_postmaster(a.match)
        time.sleep(0.2)
    if postmaster is None:
        print("no postmaster", file=sys.stderr)
        return 1
    print(f"postmaster {postmaster}", flush=True)
    first: dict[int, float] = {}
    last: dict[int, tuple[str, float]] = {}
    kinds: dict[int, str] = {}
    reaped0 = None
    own0 = None
    perf: subprocess.Popen[bytes] | None = None
    backend_seen = None
    began = time.monotonic()
    while time.monotonic() < deadline:
        try:
            pm = _stat(postmaster)
        except OSError:
            break
        own = (int(pm[11]) + int(pm[12])) / TICK
        reaped = (int(pm[13]) + int(pm[14])) / TICK
        if reaped0 is None:
            reaped0, own0 = reaped, own
        reaped1, own1 = reaped, own
        now = children(postmaster)
        initial = not last
        for pid, (title, cpu) in now.items():
            if pid not in last:
                first[pid] = cpu if initial else 0.0
            kind = kind_of(title, False)
            # a backend's title changes (idle, INSERT, …); its kind does not
            kinds.setdefault(pid, kind)
            last[pid] = (title, cpu)
            if (backend_seen is None and kind == "client backend"
                    and a.database_prefix in title):
                backend_seen = time.monotonic()
        if (a.perf and perf is None and backend_seen is not None
                and time.monotonic() - backend_seen >= a.perf_after):
            # the server's processes then (the pool's backends live as long as the
            # crawl); a machine-wide record would mostly sample other work
            alive_now = children(postmaster)
            targets = ",".join(str(p) for p in sorted(alive_now)
                               if kinds.get(p) != "autovacuum worker")
            (a.out / "perf_pids.json").write_text(json.dumps(targets.split(",")))
            perf = subprocess.Popen(
                ["perf", "record", "-p", targets, "--call-graph", a.call_graph, "-F",
                 str(a.perf_freq), "-o",
                 str(a.out / "perf.data"), "--", "sleep", str(a.perf)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(f"perf from {time.monotonic() - began:.0f} s", flush=True)
        time.sleep(0.2)
    alive = set(children(postmaster)) if Path(f"/proc/{postmaster}").exists() else set()
    if perf is not None:
        perf.wait()
    by_kind: dict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    exited_sampled = 0.0
    for pid, (_, cpu) in last.items():
        spent = cpu - first.get(pid, 0.0)
        by_kind[kinds[pid]] += spent
        count[kinds[pid]] += 1
        if pid not in alive:
            exited_sampled += spent
    assert reaped0 is not None and own0 is not None
    by_kind["postmaster"] += own1 - own0
    unsampled = max(0.0, (reaped1 - reaped0) - exited_sampled)
    by_kind["exited, after their last sample"] += unsampled
    total = sum(by_kind.values())
    print(f"\nCPU of the server's processes over {time.monotonic() - began:.0f} s: "
          f"{total:.2f} s")
    print("| process kind | processes | CPU s | share |\n|---|---|---|---|")
    for kind, cpu in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"| {kind} | {count.get(kind, '')} | {cpu:.2f} | {100 * cpu / total:.1f} % |")
    (a.out / "pids.json").write_text(json.dumps(sorted(last)))
    (a.out / "kinds.json").write_text(json.dumps(
        {str(p): [kinds[p], last[p][0], last[p][1] - first.get(p, 0.0)] for p in last}))
    if perf is not None:
        print_perf(a.out / "perf.data", sorted(last), a.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
