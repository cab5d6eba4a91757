"""Every notebook in notebooks/ runs top to bottom, and its checked outputs match (nbval)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.conftest import PG_URL, require_pg
from tests.notebook_outputs import strip

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SANITIZE = Path(__file__).with_name("nbval_sanitize.cfg")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_with_its_checked_outputs(notebook: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    if "postgres" in notebook.stem:
        require_pg()
        env["SMITHERS_TT_PG_URL"] = PG_URL
    copy = tmp_path / notebook.name  # run in a scratch folder: notebooks write .db files
    shutil.copy(notebook, copy)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval-lax",
            "--nbval-current-env",
            "--nbval-sanitize-with",
            str(SANITIZE),
            "-p",
            "no:cacheprovider",
            "-q",
            copy.name,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_unchecked_outputs(notebook: Path) -> None:
    book = nbformat.read(notebook, as_version=4)
    assert strip(nbformat.from_dict(book)) == book, (
        f"{notebook.name} holds outputs nbval does not check; run "
        f"`.venv/bin/python tests/notebook_outputs.py {notebook.relative_to(ROOT)}`"
    )
