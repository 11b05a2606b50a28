"""``pytest-opprof`` (also ``python -m pytest_opprof``): compare two runs, show a
stored baseline, render a saved report as HTML, or find steps in a history.

``compare A B`` judges B against A (each a JSON report from ``--opprof-report``, a
baseline file, or a directory of them, such as a baseline directory) and prints
the op-level diff of each test that regressed (of every test with ``-v``/``--all``)
and a line of totals; exit status 1 when something regressed.  ``show PATH`` prints
a baseline file, a report or a directory of them as tables (``-k`` and ``--op``
filter by test and op).  ``html REPORT.json -o OUT.html`` writes the HTML report of a
JSON report (what ``--opprof-html`` writes at the end of a run).  ``history DIR``
prints the commits where a test's or op's figures stepped in a history that
``--opprof-history DIR`` wrote (docs/history.md).  Errors print one line and exit
with status 2.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from tabulate import tabulate

from pytest_opprof.errors import BaselineError, OpprofError
from pytest_opprof.gate.files import read_text, same_file
from pytest_opprof.gate.jsonio import DocumentError, parse
from pytest_opprof.gate.results import REPORT_KIND, TestResult, read_report
from pytest_opprof.gate.store import BaselineEntry, load
from pytest_opprof.gate.summary import OTHER_OPS
from pytest_opprof.gate.tolerance import (
    DEFAULT_ROW_LIMIT,
    argparse_type,
    parse_duration_ns,
    parse_positive_int,
    parse_tolerance,
    parse_tolerance_or_off,
)
from pytest_opprof.gate.verdict import Tolerances, compare
from pytest_opprof.history.cli import add_history_command
from pytest_opprof.render.report import format_value, render_text


def read_any(path: str) -> dict[str, BaselineEntry]:
    """Entries of a baseline file, a JSON report (by its ``kind``) or a directory of them
    (``read_dir``); raises BaselineError."""
    file = Path(path)
    if file.is_dir():
        return read_dir(file)
    return _read_file(file)[1]


def read_dir(directory: Path) -> dict[str, BaselineEntry]:
    """The entries of every ``*.json`` under ``directory`` (a baseline directory, a folder
    of reports), keyed by node id: a baseline file's tests as ``<its path less .json>.py::
    <test>`` (the node id of a test under the rootdir the baselines were recorded from)."""
    files = sorted(p for p in directory.rglob("*.json") if p.is_file())
    if not files:
        raise BaselineError(directory, "no baseline files or JSON reports (*.json) in it")
    out: dict[str, BaselineEntry] = {}
    for file in files:
        kind, entries = _read_file(file)
        if kind == REPORT_KIND:
            out.update(entries)
            continue
        module = file.relative_to(directory).with_suffix(".py").as_posix()
        out.update({f"{module}::{name}": entry for name, entry in entries.items()})
    return out


def _read_file(file: Path) -> tuple[object, dict[str, BaselineEntry]]:
    """(the file's ``kind``, its entries); raises BaselineError naming the file (a FIFO or
    device is refused without blocking, see ``gate.files.read_text``)."""
    try:
        data = parse(read_text(file))
    except FileNotFoundError:
        raise BaselineError(file, "no such file or directory") from None
    except DocumentError as exc:
        raise BaselineError(file, str(exc)) from None
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind, (read_report(file) if kind == REPORT_KIND else load(file))


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
        count=args.count_tolerance,
        min_time_ns=args.min_time,
        speed_scaled=not args.raw_times,
    )
    counts: Counter[str] = Counter()
    matched: set[str] = set()
    for name in sorted(new):
        key = _match(old, name)
        if key is None:
            counts["new"] += 1
            if args.all:
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
        counts[verdict.status] += 1
        if verdict.failed or args.all:
            result = TestResult(name, now.summary, verdict, baseline_file=args.old)
            print(render_text(result, row_limit=args.row_limit) + "\n")
    gone = sorted(set(old) - matched)
    counts["gone"] = len(gone)
    if args.all:
        for key in gone:
            print(f"opprof GONE: {key} (not in {args.new})\n")
    totals = ", ".join(f"{counts[s]} {s}" for s in ("improved", "pass", "new", "gone") if counts[s])
    hint = "" if args.all else " (-v/--all prints every test)"
    print(
        f"{len(new)} tests in {args.new}, {counts['regressed']} regressed against {args.old}"
        + (f"; {totals}" if totals else "")
        + hint
    )
    return 1 if counts["regressed"] else 0


def _show(args: argparse.Namespace) -> int:
    entries = read_any(args.file)
    if not entries:
        print(f"{args.file}: no tests")
    shown = 0
    for name, entry in sorted(entries.items()):
        s = entry.summary
        if args.test is not None and args.test.lower() not in name.lower():
            continue
        ops = sorted(s.ops.values(), key=lambda op: (-op.self_cpu_time.median_ns, op.key))
        if args.op is not None:
            ops = [op for op in ops if args.op.lower() in op.key.lower()]
            if not ops:
                continue
        shown += 1
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
        if s.left_out is not None:
            print(
                f"  {OTHER_OPS}: the {s.left_out.keys} ops this baseline left out (each under "
                "the share of time, FLOPs or memory that explains its test), as one"
            )
        device = any(op.self_device_time is not None for op in ops)
        headers = ["op", "count", "self CPU", "MAD", "CPU total", "self mem", "FLOPs"]
        rows = []
        for op in ops[: args.row_limit]:
            line = [
                op.key,
                op.count,
                format_value(op.self_cpu_time.median_ns, "ns"),
                format_value(op.self_cpu_time.mad_ns, "ns"),
                format_value(op.cpu_time.median_ns, "ns") if op.cpu_time is not None else "",
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
    if entries and not shown:
        print(
            f"{args.file}: no test matches"
            + (f" -k {args.test!r}" if args.test else "")
            + (f" --op {args.op!r}" if args.op else "")
        )
    return 0


def _html(args: argparse.Namespace) -> int:
    from pytest_opprof.render.html import check_available, write_html

    check_available()
    source = Path(args.report)
    try:
        data = parse(read_text(source))  # refuses a FIFO or device without blocking
    except FileNotFoundError:
        raise BaselineError(args.report, "no such file") from None
    except DocumentError as exc:
        raise BaselineError(args.report, str(exc)) from None
    if not isinstance(data, dict) or data.get("kind") != REPORT_KIND:
        raise BaselineError(
            args.report,
            f"not a JSON report (kind is not {REPORT_KIND!r}); write one with --opprof-report",
        )
    out = Path(args.output) if args.output else source.with_suffix(".html")
    if same_file(out, source):
        raise OpprofError(
            f"the page {out} would be written onto the JSON report {source}: give another "
            "path with -o (nothing was written)"
        )
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
    cmp.add_argument(
        "old", metavar="A", help="JSON report, baseline file or a directory of them (the reference)"
    )
    cmp.add_argument(
        "new", metavar="B", help="JSON report, baseline file or a directory of them (judged)"
    )
    cmp.add_argument(
        "-v",
        "--all",
        action="store_true",
        help="print every test (new, gone and passing ones too), not only regressions",
    )
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
        "--count-tolerance",
        type=argparse_type(parse_tolerance_or_off),
        default=default.count,
        metavar="X",
        help="judge a test's op count, allowing this relative growth (0.25 or 25%%), or off "
        "(the default: counts are reported, not judged)",
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
    show = commands.add_parser(
        "show", help="print a baseline file, a report or a directory of them as tables"
    )
    show.add_argument("file", metavar="PATH")
    show.add_argument(
        "-k", dest="test", metavar="TEXT", help="only tests whose name contains TEXT (any case)"
    )
    show.add_argument(
        "--op", metavar="TEXT", help="only ops whose key contains TEXT (any case), and their tests"
    )
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
    add_history_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    for stream in (sys.stdout, sys.stderr):
        # A test name from a hand-edited file may hold a lone surrogate: print it escaped.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
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
