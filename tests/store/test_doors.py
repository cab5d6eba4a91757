"""The store's doors (docs/store.md, "The doors"): the front door holds what users and the
engine need; each consumer's door holds what that consumer imports and nothing else.

import-linter holds who may import which door (``pyproject.toml``); these tests hold what is in
them, read from the source with :mod:`ast`: a name nobody imports any more leaves its door in
the same commit, and a name in the front door is there for users, the engine or more than one
package above the store.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import smithers_tt
import smithers_tt.store

PACKAGE = Path(smithers_tt.__file__).parent

DOORS = {
    "smithers_tt.store.for_widgets": "widgets",
    "smithers_tt.store.for_langgraph": "integrations",
    "smithers_tt.store.for_lineage": "lineage",
    "smithers_tt.store.for_timetravel": "timetravel",
    "smithers_tt.store.for_cli": "cli",
}
"""Each door, and the package above the store it is for."""

USERS = {"_open", "_opened", "_upkeep", "database", "runs", "testing", "triage", "engine"}
"""The front door's own consumers: the modules users call and the engine."""


def _imports_from(module: str) -> dict[str, set[str]]:
    """Name -> the packages (first part below ``smithers_tt``) importing it from ``module``."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        package = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if package == "store":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == module:
                for alias in node.names:
                    found.setdefault(alias.name, set()).add(package)
    return found


def test_front_door_holds_about_thirty_names():
    assert len(smithers_tt.store.__all__) <= 35


def test_front_door_names_serve_users_or_several_packages():
    used = _imports_from("smithers_tt.store")
    for name in smithers_tt.store.__all__:
        packages = used.get(name, set())
        assert packages & USERS or len(packages) > 1, (name, sorted(packages))


@pytest.mark.parametrize("door", sorted(DOORS))
def test_door_holds_what_its_consumer_imports(door):
    module = importlib.import_module(door)
    names = set(module.__all__)
    used = _imports_from(door)
    # Nothing left over but the types the door's reads hand out (``FrameBin``, ``ColumnInfo``).
    assert set(used) <= names
    assert all(isinstance(getattr(module, name), type) for name in names - set(used))
    assert {p for packages in used.values() for p in packages} == {DOORS[door]}


@pytest.mark.parametrize("door", sorted(DOORS))
def test_door_names_are_not_in_the_front_door(door):
    shared = set(importlib.import_module(door).__all__) & set(smithers_tt.store.__all__)
    assert not shared
