"""The widgets package stays made of small modules of one role each (issue 33, item 1): none
is over 600 lines, and none imports another that imports it back, however indirectly. Every
import counts: at the top, inside a function, or under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import smithers_tt.widgets

PACKAGE = "smithers_tt.widgets"
WIDGETS = Path(smithers_tt.widgets.__file__).parent
MODULES = sorted(WIDGETS.glob("*.py"))
MOST_LINES = 600


def imports_of(path: Path) -> set[str]:
    """The widgets modules a module imports (by file stem, ``__init__`` for the package
    itself), wherever the import statement stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_stem(alias.name) for alias in node.names if _inside(alias.name))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: the package itself, or one of its modules
                module = f"{PACKAGE}.{module}" if module else PACKAGE
            if module == PACKAGE:  # `from smithers_tt.widgets import _x`: a module (private
                # names are modules; the package exports none), else a name of the package
                for alias in node.names:
                    is_module = (
                        alias.name.startswith("_") or (WIDGETS / f"{alias.name}.py").exists()
                    )
                    found.add(alias.name if is_module else "__init__")
            elif _inside(module):
                found.add(_stem(module))
    found.discard(path.stem)
    return found


def _inside(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def _stem(name: str) -> str:
    return name[len(PACKAGE) + 1 :].split(".")[0] if name != PACKAGE else "__init__"


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (modules to the modules they import) as a path that ends where it
    starts, or None when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_widgets_module_is_at_most_600_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MOST_LINES, (
        f"{path.name} has {lines} lines; split it by role before it passes {MOST_LINES}"
    )


def test_widgets_modules_import_each_other_without_a_cycle() -> None:
    graph = {path.stem: imports_of(path) for path in MODULES}
    cycle = cycle_in(graph)
    assert cycle is None, "widgets modules import each other in a cycle: " + " -> ".join(cycle)


def test_widgets_import_graph_counts_local_and_type_checking_imports(tmp_path: Path) -> None:
    (tmp_path / "_a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from smithers_tt.widgets._b import B\n"
        "def f():\n"
        "    from smithers_tt.widgets import _c\n"
        "    import smithers_tt.widgets._d\n"
        "    from . import _e\n"
        "    from ._f import g\n"
        "    from smithers_tt.widgets import Debugger\n"
        "    import json\n"
    )
    assert imports_of(tmp_path / "_a.py") == {"_b", "_c", "_d", "_e", "_f", "__init__"}


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": {"b"}}, ["b", "b"]),
        ({"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"a"}}, None),
    ],
)
def test_cycle_in_finds_a_cycle_when_there_is_one(
    graph: dict[str, set[str]], cycle: list[str] | None
) -> None:
    assert cycle_in(graph) == cycle
