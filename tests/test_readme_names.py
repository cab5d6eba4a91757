"""The README's Python blocks, read in order as a person copies them, use no name that no
block before defines (a snippet once passed ``edited``, defined nowhere)."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _defined(tree: ast.AST) -> set[str]:
    """The names a block binds: assignments, imports, functions, classes, arguments."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def test_every_name_a_readme_snippet_uses_is_defined_by_then() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 5
    known = set(dir(builtins)) | {"display"}  # display: Jupyter's, in every notebook
    undefined = []
    for block in blocks:
        tree = ast.parse(block)
        known |= _defined(tree)
        lines = block.splitlines()
        undefined += [
            f"{node.id}: {lines[node.lineno - 1].strip()}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id not in known
        ]
    assert undefined == [], undefined
