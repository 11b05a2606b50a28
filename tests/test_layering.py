"""The package's import graph: data flows one way, and only one module talks to C.

Every import counts, wherever it stands (module level, inside a function, under
``TYPE_CHECKING``): a deferred import still ties the two modules' code together,
it only hides the knot from Python.  An import of ``a.b.c`` is an arrow to
``a.b.c`` alone; the packages Python runs on the way are its mechanics, not a
dependency the importing module chose.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest_opprof

PACKAGE = "pytest_opprof"
ROOT = Path(pytest_opprof.__file__).parent
EXTENSION = f"{PACKAGE}._opprof_native"

CAPTURE_MAY_IMPORT = ("capture", "native_layout", "_native", "flops", "errors")
"""Capture records: it stands on the records' layout, the door to C and the FLOP
formulas (the numpy source decides from them which arguments to record), and knows
nothing of what reads the records (model, render, gate, the ``profile`` facade)."""
LAYOUT_MAY_IMPORT = ("native_layout", "_native")
DOOR_MAY_IMPORT = ("_opprof_native", "native_layout", "errors")

KNOWN_CYCLES: list[set[str]] = []
"""Circles being dissolved elsewhere; each must still exist (remove it here once it is gone)."""


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        name, is_package = _module_name(path)
        out[name] = (path, is_package)
    return out


MODULES = _modules()


def _imported(name: str, path: Path, is_package: bool) -> Iterator[str]:
    """Every module ``name`` imports (in the package or not), deepest name only."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                if not is_package:
                    base.pop()
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            submodules = [f"{source}.{a.name}" for a in node.names]
            found = [m for m in submodules if m in MODULES or m == EXTENSION]
            yield from found
            if len(found) < len(submodules):  # names defined in ``source`` itself
                yield source


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, (path, is_package) in MODULES.items():
        targets = set(_imported(name, path, is_package))
        graph[name] = {
            t
            for t in targets
            if (t == PACKAGE or t.startswith(PACKAGE + ".")) and not name.startswith(t + ".")
        }
    return graph


GRAPH = _graph()


def _short(name: str) -> str:
    return name.removeprefix(PACKAGE + ".")


def _part(name: str) -> str:
    """The top-level part of the package a module belongs to (``capture``, ``_native``)."""
    return _short(name).split(".")[0]


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _arrows(part: str, allowed: tuple[str, ...]) -> list[str]:
    """``module -> target`` for each import of ``part``'s modules outside ``allowed``."""
    return sorted(
        f"{_short(src)} -> {_short(dst)}"
        for src, targets in GRAPH.items()
        if _part(src) == part
        for dst in targets
        if dst != PACKAGE and _part(dst) not in allowed
    )


def test_the_graph_sees_the_package() -> None:
    # A walk that found nothing would pass every rule below.
    assert {"_native", "capture.recorder", "model.events", "profiler"} <= {_short(m) for m in GRAPH}
    assert f"{PACKAGE}.native_layout.records" in GRAPH[f"{PACKAGE}.capture.recorder"]


def test_no_import_cycles() -> None:
    known = [{f"{PACKAGE}.{m}" for m in cycle} for cycle in KNOWN_CYCLES]
    found = _cycles(GRAPH)
    new = [sorted(map(_short, c)) for c in found if c not in known]
    assert new == [], f"modules that import each other (directly or around a circle): {new}"
    gone = [sorted(map(_short, c)) for c in known if c not in found]
    assert gone == [], f"no longer a circle: remove {gone} from KNOWN_CYCLES"


def test_capture_stands_below_what_reads_the_records() -> None:
    assert _arrows("capture", CAPTURE_MAY_IMPORT) == []


def test_the_layout_stands_below_capture() -> None:
    assert _arrows("native_layout", LAYOUT_MAY_IMPORT) == []


def test_one_door_to_c() -> None:
    """Only ``_native`` imports the compiled extension, and the door imports nothing
    above it: every other part can rely on it without a circle."""
    openers = sorted(
        _short(name)
        for name, (path, is_package) in MODULES.items()
        if EXTENSION in set(_imported(name, path, is_package))
    )
    assert openers == ["_native"]
    assert _arrows("_native", DOOR_MAY_IMPORT) == []
