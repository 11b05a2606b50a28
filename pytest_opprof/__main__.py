"""``pytest-opprof`` (also ``python -m pytest_opprof``): compare two runs, show a
stored baseline, or render a saved report as HTML.

``compare A B`` judges B against A (each a JSON report from ``--opprof-report``
or a baseline file) and prints the op-level diff of every test found in both;
exit status 1 when something regressed.  ``show FILE`` prints a baseline file (or
a report) as tables.  ``html REPORT.json -o OUT.html`` writes the HTML report of a
JSON report (what ``--opprof-html`` writes at the end of a run).  Errors print one
line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tabulate import tabulate

from pytest_opprof.errors import BaselineError, OpprofError
from pytest_opprof.gate.results import REPORT_KIND, TestResult, read_report
from pytest_opprof.gate.store import BaselineEntry, load
from pytest_opprof.gate.tolerance import (
    DEFAULT_ROW_LIMIT,
    argparse_type,
    parse_duration_ns,
    parse_positive_int,
    parse_tolerance,
)
from pytest_opprof.gate.verdict import Tolerances, compare
from pytest_opprof.render.report import format_value, render_text


def read_any(path: str) -> dict[str, BaselineEntry]:
    """Entries of a baseline file or a JSON report (by its ``kind``); raises BaselineError."""
    file = Path(path)
    if not file.exists():
        raise BaselineError(path, "no such file")
    if not file.is_file():
        raise BaselineError(path, "not a regular file")
    try:
        kind = json.loads(file.read_text(encoding="utf-8")).get("kind")
    except (ValueError, AttributeError):
        kind = None  # load() below names what is wrong
    return read_report(file) if kind == REPORT_KIND else load(file)


def _match(old: dict[str, BaselineEntry], name: str) -> str | None:
    """``name`` in ``old``, else the one entry with its test name (node id vs. baseline key)."""
    if name in old:
        return name
    test = name.partition("::")[2] or name
    hits = [key for key in old if (key.partition("::")[2] or key) == test]
    return hits[0] if len(hits) == 1 else None


def _compare(args: argparse.Namespace) -> int:
    old, new = read_any(args.old), read_any(args.new)
    tolerances = Tolerances(
        time=args.time_tolerance,
        memory=args.memory_tolerance,
        flops=args.flops_tolerance,
        min_time_ns=args.min_time,
        speed_scaled=not args.raw_times,
    )
    regressed = 0
    matched: set[str] = set()
    for name in sorted(new):
        key = _match(old, name)
        if key is None:
            print(f"opprof NEW: {name} (not in {args.old})\n")
            continue
        matched.add(key)
        now = new[name]
        verdict = compare(
            now.summary,
            old[key],
            fingerprint=now.machine.fingerprint,
            tolerances=tolerances,
            force_time=args.force_time,
            machine=now.machine,
        )
        regressed += verdict.failed
        result = TestResult(name, now.summary, verdict, baseline_file=args.old)
        print(render_text(result, row_limit=args.row_limit) + "\n")
    for key in sorted(set(old) - matched):
        print(f"opprof GONE: {key} (not in {args.new})\n")
    print(f"{len(new)} tests in {args.new}, {regressed} regressed against {args.old}")
    return 1 if regressed else 0


def _show(args: argparse.Namespace) -> int:
    entries = read_any(args.file)
    if not entries:
        print(f"{args.file}: no tests")
    for name, entry in sorted(entries.items()):
        s = entry.summary
        print(f"{name}")
        print(f"  recorded {entry.recorded_at} on {entry.machine.describe()}")
        memory = s.memory
        facts = [
            ("rounds", str(s.rounds)),
            ("wall time (median)", format_value(s.wall_time.median_ns, "ns")),
            ("wall time (MAD)", format_value(s.wall_time.mad_ns, "ns")),
            ("cpu time (median)", format_value(s.cpu_time.median_ns, "ns")),
            ("ops", format_value(s.op_count, "ops")),
            ("FLOPs", format_value(s.flops, "flops")),
            ("time in ops", format_value(s.op_time_share, "share")),
        ]
        if memory is not None:
            facts += [
                ("peak memory", format_value(memory.peak_bytes, "bytes")),
                ("allocated", format_value(memory.allocated_bytes, "bytes")),
                ("allocations", format_value(memory.allocations, "allocations")),
                ("leaked", format_value(memory.leaked_bytes, "bytes")),
            ]
        print(tabulate(facts, tablefmt="plain"))
        ops = sorted(s.ops.values(), key=lambda op: (-op.self_cpu_time.median_ns, op.key))
        device = any(op.self_device_time is not None for op in ops)
        headers = ["op", "count", "self CPU", "MAD", "CPU total", "self mem", "FLOPs"]
        rows = []
        for op in ops[: args.row_limit]:
            line = [
                op.key,
                op.count,
                format_value(op.self_cpu_time.median_ns, "ns"),
                format_value(op.self_cpu_time.mad_ns, "ns"),
                format_value(op.cpu_time.median_ns, "ns"),
                format_value(op.self_memory_bytes, "bytes"),
                format_value(op.flops, "flops") if op.flops else "",
            ]
            if device:
                t = op.self_device_time
                line.append(format_value(t.median_ns, "ns") if t is not None else "")
            rows.append(line)
        print(tabulate(rows, headers=headers + (["self device"] if device else [])))
        if len(ops) > args.row_limit:
            print(f"... {len(ops) - args.row_limit} more ops")
        print()
    return 0


def _html(args: argparse.Namespace) -> int:
    from pytest_opprof.render.html import check_available, write_html

    check_available()
    source = Path(args.report)
    if not source.is_file():
        raise BaselineError(
            args.report, "no such file" if not source.exists() else "not a regular file"
        )
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(args.report, f"cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(
            args.report, f"not valid JSON: {exc.msg} at line {exc.lineno}"
        ) from None
    if not isinstance(data, dict) or data.get("kind") != REPORT_KIND:
        raise BaselineError(
            args.report,
            f"not a JSON report (kind is not {REPORT_KIND!r}); write one with --opprof-report",
        )
    out = Path(args.output) if args.output else source.with_suffix(".html")
    write_html(out, data)
    print(f"wrote {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m pytest_opprof`` argument parser."""
    default = Tolerances()
    parser = argparse.ArgumentParser(
        prog="pytest-opprof",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    cmp = commands.add_parser("compare", help="judge run B against run A, op by op")
    cmp.add_argument("old", metavar="A", help="JSON report or baseline file (the reference)")
    cmp.add_argument("new", metavar="B", help="JSON report or baseline file (judged)")
    for name, value, what in (
        ("time", default.time, "slowdown"),
        ("memory", default.memory, "memory growth"),
        ("flops", default.flops, "FLOPs growth"),
    ):
        cmp.add_argument(
            f"--{name}-tolerance",
            type=argparse_type(parse_tolerance),
            default=value,
            metavar="X",
            help=f"allowed relative {what}, 0.2 or 20%% (default {value:g})",
        )
    cmp.add_argument(
        "--min-time",
        type=argparse_type(parse_duration_ns),
        default=default.min_time_ns,
        metavar="T",
        help=f"times shorter than this are not judged, e.g. 50us "
        f"(default {default.min_time_ns // 1000}us)",
    )
    cmp.add_argument(
        "--force-time",
        action="store_true",
        help="judge times even when the machines' fingerprints differ",
    )
    cmp.add_argument(
        "--raw-times",
        action="store_true",
        help="judge times as measured, not scaled to the baseline's machine speed",
    )
    cmp.add_argument(
        "--row-limit",
        type=argparse_type(parse_positive_int),
        default=DEFAULT_ROW_LIMIT,
        metavar="N",
    )
    cmp.set_defaults(run=_compare)
    show = commands.add_parser("show", help="print a baseline file or report as tables")
    show.add_argument("file", metavar="FILE")
    show.add_argument(
        "--row-limit",
        type=argparse_type(parse_positive_int),
        default=DEFAULT_ROW_LIMIT,
        metavar="N",
    )
    show.set_defaults(run=_show)
    html = commands.add_parser("html", help="write the HTML report of a JSON report")
    html.add_argument("report", metavar="REPORT.json", help="a JSON report (--opprof-report)")
    html.add_argument(
        "-o", "--output", metavar="OUT.html", help="where to write it (default: beside REPORT)"
    )
    html.set_defaults(run=_html)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status: int = args.run(args)
    except OpprofError as exc:  # BaselineError among them: one line naming the file
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return status


def main_exit() -> None:
    """The ``pytest-opprof`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    main_exit()
