"""Keep notebooks stripped except for the outputs nbval compares.

Cells marked ``# NBVAL_CHECK_OUTPUT`` keep their outputs (the expected values nbval checks);
every other cell is stored without outputs. Refresh the expected outputs after changing a
notebook with::

    .venv/bin/python tests/notebook_outputs.py notebooks/*.ipynb
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

CHECK = "# NBVAL_CHECK_OUTPUT"


def strip(book: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop outputs of unchecked cells and metadata noise (saved widget state included: no
    stored output shows a widget); number the checked cells (nbval treats a cell without an
    execution count as never run)."""
    book.metadata.pop("widgets", None)
    count = 0
    for cell in book.cells:
        cell.metadata = {}
        if cell.cell_type != "code":
            continue
        count += 1
        checked = cell.source.startswith(CHECK)
        cell.execution_count = count if checked else None
        if not checked:
            cell.outputs = []
        for output in cell.outputs:
            output.pop("execution_count", None)
            if output.get("output_type") == "stream":
                output.pop("metadata", None)  # stream outputs may not carry metadata
            elif "metadata" in output:
                output.metadata = {}
    return book


def refresh(path: Path) -> None:
    """Execute a notebook in its folder and store it stripped."""
    from nbclient import NotebookClient

    book = nbformat.read(path, as_version=4)
    NotebookClient(book, timeout=300, resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(strip(book), path)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        refresh(Path(name))
        print("refreshed", name)
