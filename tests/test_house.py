"""The house rules of ``smithers_tt/``: no module import cycles, no module over 600 lines.

The import graph is built from the source with :mod:`ast`, not by importing: every ``import``
statement counts, wherever it stands (in a function, under ``if TYPE_CHECKING:``), because a
cycle that only closes at run time is still two modules that cannot be read one without the
other. Relative imports are resolved, and ``from pkg import name`` is an edge to ``pkg.name``
when that is a module, else to ``pkg`` (its ``__init__``). Importing ``pkg.sub`` also runs
``pkg/__init__``, but that implicit edge is not counted: it would make every package a cycle.

Both rules have an allow-list, empty since issue 34: a test fails when an entry is no longer
needed, so an exception made for a while is removed in the commit that ends it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import smithers_tt

PACKAGE = Path(smithers_tt.__file__).parent
MAX_LINES = 600

# Modules allowed in an import cycle, and over MAX_LINES: none. An entry may be added only with
# a reason beside it, and the tests below fail once it is no longer needed.
ALLOWED_IN_CYCLES: frozenset[str] = frozenset()

ALLOWED_LONG: frozenset[str] = frozenset()


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(package: Path) -> dict[str, Path]:
    return {_module_name(path, package): path for path in sorted(package.rglob("*.py"))}


def _imported(name: str, path: Path, node: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The package's modules that one import statement reaches."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in modules:
                found.add(alias.name)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            package = name.split(".")
            if path.name != "__init__.py":
                package.pop()
            base = package[: len(package) - (node.level - 1)]
            if node.module:
                base += node.module.split(".")
            target = ".".join(base)
        else:
            target = node.module or ""
        for alias in node.names:
            if f"{target}.{alias.name}" in modules:
                found.add(f"{target}.{alias.name}")
            elif target in modules:
                found.add(target)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, counting every import statement."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            edges |= _imported(name, path, node, modules)
        edges.discard(name)
        graph[name] = edges
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other (Tarjan), each of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a deep chain of imports cannot hit the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return groups


def a_cycle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """One cycle through the group's first module, as a path that returns to it."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & members):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover


def _describe(graph: dict[str, set[str]], groups: list[list[str]]) -> str:
    return "\n".join(" -> ".join(a_cycle(graph, group)) for group in groups)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def _long_modules() -> dict[str, int]:
    return {
        path.relative_to(PACKAGE.parent).as_posix(): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := _lines(path)) > MAX_LINES
    }


def test_import_graph_has_no_cycles_beyond_the_allow_list():
    graph = import_graph()
    new = [group for group in strongly_connected(graph) if set(group) - ALLOWED_IN_CYCLES]
    assert not new, f"import cycles:\n{_describe(graph, new)}"


def test_cycle_allow_list_only_names_modules_still_in_a_cycle():
    in_cycles = {name for group in strongly_connected(import_graph()) for name in group}
    fixed = sorted(ALLOWED_IN_CYCLES - in_cycles)
    assert not fixed, f"no longer in a cycle; remove from ALLOWED_IN_CYCLES: {fixed}"


def test_no_module_over_600_lines_beyond_the_allow_list():
    long = {path: lines for path, lines in _long_modules().items() if path not in ALLOWED_LONG}
    assert not long, f"modules over {MAX_LINES} lines (split them by role): {long}"


def test_long_allow_list_only_names_modules_still_over_600_lines():
    fixed = sorted(ALLOWED_LONG - set(_long_modules()))
    assert not fixed, f"no longer over {MAX_LINES} lines; remove from ALLOWED_LONG: {fixed}"


def test_import_graph_counts_local_type_checking_relative_and_submodule_imports(tmp_path):
    package = tmp_path / "pkg"
    sources = {
        "__init__.py": "from pkg.a import A\n",
        "a.py": "def f():\n    from . import b\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.c import C\n",
        "sub/__init__.py": "from ..a import A\n",
        "sub/c.py": "import pkg.sub\nfrom pkg import a, b as bee, missing\n",
    }
    for name, source in sources.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(source)
    assert import_graph(package) == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.sub.c"},
        "pkg.sub": {"pkg.a"},
        "pkg.sub.c": {"pkg", "pkg.a", "pkg.b", "pkg.sub"},
    }


def test_cycles_are_found_and_printed_as_paths():
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"c"}, "e": {"a"}}
    assert strongly_connected(graph) == [["c", "d"], ["a", "b"]]
    assert _describe(graph, [["a", "b"]]) == "a -> b -> a"
