"""Registration of the operators' commands (``plan``, ``config``) on the main parser.

Only argparse and the crawl flags (:mod:`courtier.cli.crawl_flags`, which the main parser
loads anyway) are imported here; each command's module is imported when that command
runs, so ``courtier --help`` and other commands pay nothing for them.
"""

from __future__ import annotations

import argparse
from typing import Any

from courtier.cli.crawl_flags import add_crawl_flags

OPS_COMMANDS = ("plan", "config")


def add_ops_commands(sub: Any) -> None:
    """Add ``plan`` and ``config show|reference`` to the subparsers action ``sub``."""
    from courtier.cli.plan_command import add_plan_arguments

    plan = sub.add_parser(
        "plan", help="capacity table (rates, bandwidth, storage, workers, PostgreSQL nodes) "
                     "from courtier's measured per-core figures")
    add_plan_arguments(plan)
    config = sub.add_parser("config", help="the effective configuration, or its reference")
    actions = config.add_subparsers(dest="config_command", required=True,
                                    parser_class=type(config))
    show = actions.add_parser(
        "show", help="print the effective settings and where each came from "
                     "(default < file < environment < flags); takes the crawl flags")
    add_crawl_flags(show)
    show.add_argument("--json", action="store_true", help="print as JSON")
    show.add_argument("--for", dest="for_command", choices=("crawl", "worker"), default="crawl",
                      help="the command whose settings to show (worker: continuous, API on)")
    actions.add_parser("reference", help="print docs/configuration.md (Markdown) from the "
                                         "settings model")


def run_ops(args: argparse.Namespace) -> int:
    if args.command == "plan":
        from courtier.cli.plan_command import run_plan

        return run_plan(args)
    from courtier.cli.config_commands import run_config

    return run_config(args)
