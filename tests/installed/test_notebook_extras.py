"""Every tutorial notebook, run from a wheel with only the ``notebook`` extra (what
``smithers-tt lab`` needs): it runs to the end, or its first code cell stops with one line
that names the extra it needs, never a traceback from deep inside an import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.installed.conftest import Installed

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NEEDS = {
    "03_lineage.ipynb": "lineage",
    "06_langgraph.ipynb": "langgraph",
    "07_sweeps.ipynb": "lineage",
}
"""The notebooks that need more than the ``notebook`` extra, and the extra each names."""

RUNNER = """
import json, sys
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

nb = nbformat.read(sys.argv[1], as_version=4)
try:
    NotebookClient(nb, timeout=240, resources={"metadata": {"path": sys.argv[2]}}).execute()
except CellExecutionError:
    pass
code = [c for c in nb.cells if c.cell_type == "code"]
errors = [
    (i, o) for i, c in enumerate(code) for o in c.get("outputs", []) if o.output_type == "error"
]
print(json.dumps(
    {"cells": len(code), "ran": sum(1 for c in code if c.get("execution_count")),
     "errors": [{"cell": i, "ename": o.ename, "evalue": o.evalue, "traceback": o.traceback}
                for i, o in errors]}
))
"""


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_from_the_notebook_extra_or_names_the_extra_it_needs(
    notebook: Installed, path: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    copy = work / path.name
    copy.write_bytes(path.read_bytes())
    runner = tmp_path / "run_notebook.py"
    runner.write_text(RUNNER)

    done = notebook.run(
        "python",
        runner,
        copy,
        work,
        cwd=work,
        timeout=600,
        SMITHERS_TT_DB=f"sqlite:///{work / 'smithers.db'}",
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])

    extra = NEEDS.get(path.name)
    if extra is None:
        assert outcome["errors"] == [], outcome["errors"]
        assert outcome["ran"] == outcome["cells"]
        return
    (error,) = outcome["errors"]
    assert error["cell"] == 0  # the first code cell says it, before anything else runs
    assert error["ename"] == "ExtraMissing"
    assert f"pip install 'smithers-tt[{extra}" in error["evalue"]
    assert error["traceback"] == [f"ExtraMissing: {error['evalue']}"]  # one line, no traceback
