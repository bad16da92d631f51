"""The ``courtier`` command line.

Exit codes: 0 finished normally (limits reached count as normal), 2 usage or
configuration error (the message names the flag, file or line), 1 anything else.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from courtier.cli.admin import add_admin_commands, run_admin
from courtier.cli.crawl_flags import add_crawl_flags, config_from_args, worker_defaults
from courtier.cli.index_commands import add_index_commands, run_index_commands
from courtier.cli.ops_commands import add_ops_commands, run_ops
from courtier.cli.query import add_query_commands, run_query
from courtier.cli.testweb_command import add_testweb_command, run_testweb
from courtier.core.errors import ConfigError, CourtierError
from courtier.crawl.progress import summary_line
from courtier.store.open import is_shared, make_data_dir, store_url

if TYPE_CHECKING:
    from courtier.core.config import CrawlConfig
    from courtier.crawl.intake import SeedProblem

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """Usage errors answer in one line naming the command and the flag, then a one-line
    hint to ``--help`` (no usage block), exit 2."""

    def error(self, message: str) -> Any:
        self.exit(EXIT_USAGE, f"{self.prog}: {self._plain(message)}\n"
                              f"(see '{self.prog} --help')\n")

    def _plain(self, message: str) -> str:
        """argparse's message in the project's words: ``--delay: 'fast' is not a number of
        seconds`` for ``argument --delay: invalid float value: 'fast'``."""
        match = re.fullmatch(r"argument (\S+): invalid (int|float|Path) value: (.*)", message)
        if match is None:
            message = re.sub(r"^argument (command|action): invalid choice: ",
                             r"unknown \1 ", message)
            return re.sub(r"^argument (\S+): ", r"\1: ", message)
        flag, kind, value = match.groups()
        what = {"int": "a whole number", "float": "a number", "Path": "a path"}[kind]
        action = next((a for a in self._actions if flag.split("/")[0] in a.option_strings),
                      None)
        if kind == "float" and action is not None and (
                "second" in (action.help or "") or action.metavar == "SECONDS"):
            what = "a number of seconds"
        return f"{flag.split('/')[0]}: {value} is not {what}"


class _VersionAction(argparse.Action):
    """``--version``: argparse's own action needs the version when the parser is built,
    which made every command read the package metadata (~25 ms); this reads it only when
    asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS,
                 help: str = "show the program's version number and exit") -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0,
                         help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from courtier import __version__

        print(f"courtier {__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="courtier", description="A polite, large-scale web crawler.")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    crawl = sub.add_parser("crawl", help="crawl from seeds; resumes on the same --data")
    add_crawl_flags(crawl)
    crawl.add_argument("--workers", type=int,
                       help="worker processes on this machine, one per core "
                            "(needs a PostgreSQL --store; 1)")
    crawl.add_argument("--join", action="store_true", default=None,
                       help="join the live workers of a shared --store (else a crawl that "
                            "finds any refuses to start; `courtier worker` always joins)")
    worker = sub.add_parser(
        "worker", help="long-running service: crawl continuously (recrawls included) and "
                       "always serve the admin API (default 127.0.0.1:8790)")
    add_crawl_flags(worker)
    demo = sub.add_parser("demo", help="crawl a built-in multi-host test web on loopback")
    demo.add_argument("--data", type=Path, help="where to put the demo crawl (a temp dir)")
    demo.add_argument("--hosts", type=int, default=6, help="virtual hosts (6)")
    demo.add_argument("--pages", type=int, default=12, help="pages per host (12)")
    demo.add_argument("--delay", type=float, default=0.2, help="per-host delay (0.2)")
    demo.add_argument("--progress", choices=("auto", "bar", "log", "none"), default="auto")
    add_testweb_command(sub)
    add_admin_commands(sub)
    add_query_commands(sub)
    add_ops_commands(sub)
    add_index_commands(sub)
    return parser


def _print_problem(problem: SeedProblem) -> None:
    print(f"courtier: skipped seed {problem}", file=sys.stderr)


def refuse_all_bad_seeds(config: CrawlConfig) -> None:
    """ConfigError naming the seeds when seeds were given and none is a crawlable URL
    (the crawl would end at once with nothing due). When some are good, the bad ones are
    reported one per line while the crawl goes on (``_print_problem``)."""
    from courtier.core.errors import InvalidURL
    from courtier.core.urls import canonicalize
    from courtier.crawl.intake import SeedProblem, read_seed_lines

    given = [("argument", number, text) for number, text in enumerate(config.seeds, 1)]
    if config.seeds_file is not None:
        try:
            lines = read_seed_lines(config.seeds_file)
        except OSError as exc:
            raise ConfigError(f"--seeds-file {config.seeds_file}: {exc.strerror}") from None
        given += [(str(config.seeds_file), number, text) for number, text in lines]
    problems: list[SeedProblem] = []
    for source, number, text in given:
        try:
            canonicalize(text)
        except InvalidURL as exc:
            problems.append(SeedProblem(source, number, text, str(exc)))
        else:
            return
    if problems:
        shown = "; ".join(str(problem) for problem in problems[:3])
        more = f"; … and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise ConfigError(f"no valid seed, nothing to crawl: {shown}{more}")


def _setup_logging(args: argparse.Namespace, log_format: str | None = None) -> None:
    """Logging before a command runs (``COURTIER_LOG_FORMAT`` or text; an invalid value
    is reported by the crawl's configuration) and again once a crawl's is known."""
    from courtier.core.logs import LOG_FORMATS, setup_logging

    chosen = log_format or os.environ.get("COURTIER_LOG_FORMAT", "text")
    setup_logging(chosen if chosen in LOG_FORMATS else "text",
                  bool(getattr(args, "verbose", False)))


def _seed_problem_logger(log_format: str) -> Any:
    """How a skipped seed is reported: a stderr line, or a JSON log line with json."""
    if log_format != "json":
        return _print_problem
    from courtier.core.logs import log_event

    def report(problem: SeedProblem) -> None:
        log_event(logging.getLogger("courtier"), logging.WARNING, "seed_skipped",
                  "skipped seed %s", problem, reason=str(problem))

    return report


@contextlib.contextmanager
def start_up_without_collections() -> Iterator[None]:
    """No cyclic garbage collection while a crawl starts, then everything start-up made
    frozen out of every later collection (``gc.freeze``).

    Importing the crawler allocates ~100,000 objects that live as long as the process
    and ~2,000 that are cyclic garbage; CPython's collector walked the young ones ~140
    times meanwhile, 60–90 ms of the ~0.55 CPU-s to the first request (bench/README.md,
    "Start-up"). The garbage is frozen with the rest (~2,000 small objects kept for the
    process's life). The crawl's own collector settings are ``crawl.app.crawl_gc``'s."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()  # also sets the young generation's count back to 0
        if was_enabled:
            gc.enable()


def cmd_crawl(args: argparse.Namespace) -> int:
    with start_up_without_collections():
        from courtier.crawl.app import run

    if args.command == "worker":
        args.continuous = True
        args.join = True  # a service joins whatever cluster runs on its store
    config = config_from_args(args)
    _setup_logging(args, config.log_format)
    report_problem = _seed_problem_logger(config.log_format)
    if args.command == "worker":
        config = worker_defaults(config)
    resuming = is_shared(store_url(config.store)) or (config.data / "courtier.db").exists()
    if args.command == "worker":
        pass  # a service may start empty: seeds arrive through the API
    elif not config.seeds and config.seeds_file is None and not resuming:
        raise ConfigError("no seeds: give seed URLs, --seeds-file, or --data of an earlier crawl")
    refuse_all_bad_seeds(config)
    make_data_dir(config.data)
    if config.workers > 1:
        from courtier.cluster.local import run_local_cluster

        status = run_local_cluster(config, report_problem)
    else:
        status = run(config, config.progress, report_problem)
    print(summary_line(status))
    if config.workers > 1:
        from courtier.cluster.local import warc_folders

        folders = warc_folders(config)
        where = ", ".join(folders) if len(folders) <= 3 else f"{folders[0]} … {folders[-1]}"
    else:
        where = str(config.archive or config.data / "warc")
    print(f"courtier: data in {config.data} (WARC files under {where})")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from courtier.cli.demo import run_demo

    if args.data is not None:
        make_data_dir(args.data)
    return run_demo(args.data, args.hosts, args.pages, args.delay, args.progress)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args)
    try:
        if args.command in ("crawl", "worker"):
            return cmd_crawl(args)
        if args.command == "demo":
            return cmd_demo(args)
        if args.command == "testweb":
            return run_testweb(args)
        if args.command in ("policy", "events", "export", "reparse", "archive"):
            return run_admin(args)
        if args.command in ("seed", "url", "domain", "stats", "cluster"):
            return run_query(args)
        if args.command in ("plan", "config"):
            return run_ops(args)
        if args.command in ("index", "search"):
            return run_index_commands(args)
    except ConfigError as exc:
        print(f"courtier: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CourtierError as exc:
        print(f"courtier: failed: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("courtier: interrupted", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:
        # the reader of the output went away (`courtier events | head`): what it read is
        # whole lines, nothing is lost (no command moves a cursor for what it prints)
        _drop_stdout()
        return EXIT_OK
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


def _drop_stdout() -> None:
    """Point the closed stdout at /dev/null so the interpreter's final flush does not
    report the broken pipe a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor behind sys.stdout
        pass


if __name__ == "__main__":
    sys.exit(main())
