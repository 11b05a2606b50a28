"""The ``history`` command of ``pytest-opprof``: change points of a history directory."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_opprof.errors import OpprofError
from pytest_opprof.gate.tolerance import argparse_type, parse_positive_int, parse_tolerance
from pytest_opprof.history.changes import ALPHA, MIN_CHANGE, MIN_SIZE
from pytest_opprof.history.report import json_report, select, since_run, text_lines
from pytest_opprof.history.series import Detection, find_changes
from pytest_opprof.history.store import scan


def add_history_command(commands: Any) -> None:
    """Add ``history DIR [-k TEXT] [--op NAME] [--since REF] [--json] [--html OUT]`` to the
    subcommands."""
    history = commands.add_parser(
        "history", help="the commits where a test's or an op's figures stepped, worst first"
    )
    history.add_argument("directory", metavar="DIR", help="a history (--opprof-history DIR)")
    history.add_argument(
        "-k", dest="test", metavar="TEXT", help="only tests whose id contains TEXT (any case)"
    )
    history.add_argument(
        "--op", metavar="NAME", help="only steps of ops whose name contains NAME (any case)"
    )
    history.add_argument(
        "--since",
        metavar="REF",
        help="only steps at or after commit REF (a sha or its prefix) or date YYYY-MM-DD",
    )
    history.add_argument("--json", action="store_true", help="print the change points as JSON")
    history.add_argument(
        "--html",
        metavar="OUT.html",
        help="also write them as one self-contained page: a chart over commits of each test "
        "that stepped, and a table of every change point (needs the html extra: Jinja2)",
    )
    history.add_argument(
        "--min-change",
        type=argparse_type(parse_tolerance),
        default=MIN_CHANGE,
        metavar="X",
        help=f"smallest time step reported, 0.03 or 3%% (default {MIN_CHANGE:g})",
    )
    history.add_argument(
        "--min-runs",
        type=argparse_type(parse_positive_int),
        default=MIN_SIZE,
        metavar="N",
        help=f"fewest runs on each side of a time step (default {MIN_SIZE})",
    )
    history.add_argument(
        "--no-reference",
        dest="reference",
        action="store_false",
        help="search each time series as measured, not against the same figure of the "
        "other tests in each run (docs/history.md)",
    )
    history.set_defaults(run=run_history)


def run_history(args: argparse.Namespace) -> int:
    """Print the change points of ``args.directory``; 0, or 2 for a bad ``--since``."""
    if args.html is not None:
        from pytest_opprof.render.html import check_available

        check_available()  # before the history is read: a missing extra is said at once
    history = scan(Path(args.directory))
    since = None
    if args.since is not None:
        since = since_run(history.runs, args.since)
        if since is None:
            raise OpprofError(f"--since {args.since}: no run of that commit or on or after it")
    found = find_changes(
        history, Detection(ALPHA, args.min_runs, args.min_change, reference=args.reference)
    )
    chosen = select(
        found,
        keyword=args.test.lower() if args.test else None,
        op=args.op.lower() if args.op else None,
        since=since,
    )
    if args.json:
        print(json.dumps(json_report(found, chosen), indent=1, sort_keys=True))
    else:
        print("\n".join(text_lines(found, chosen)))
    if args.html is not None:
        from pytest_opprof.history.html import write_history_html

        write_history_html(args.html, history, found, chosen, title=str(args.directory))
        # Beside JSON on stdout, the line goes to stderr so stdout stays one document.
        print(f"wrote {args.html}", file=sys.stderr if args.json else sys.stdout)
    return 0
