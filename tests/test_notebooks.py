"""Every notebook in notebooks/ runs top to bottom, and its checked outputs match (nbval)."""

from __future__ import annotations

import os
import shutil
import socket
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
            "-p",
            "no:randomly",  # the cells are the items: their order is the notebook's
            "-p",
            "no:langsmith_plugin",  # 0.8-1 s of CPU at start, unused (as in pyproject.toml)
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


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_small_and_carries_no_saved_widget_state(notebook: Path) -> None:
    # Saved widget state (a 5 MB plotly bundle was once found) is stale: no stored output
    # shows a widget, and Binder would download it with every launch.
    assert "widgets" not in nbformat.read(notebook, as_version=4).metadata
    assert notebook.stat().st_size < 64 * 1024


def _postgres_probe() -> str:
    book = nbformat.read(ROOT / "notebooks" / "05_postgres.ipynb", as_version=4)
    return next(c.source for c in book.cells if c.cell_type == "code")


def test_postgres_notebook_tells_an_unreachable_server_from_a_missing_driver(
    tmp_path: Path,
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    port = closed.getsockname()[1]
    env = dict(os.environ, SMITHERS_TT_PG_URL=f"postgresql+psycopg://postgres@127.0.0.1:{port}/x")
    try:
        result = subprocess.run(
            [sys.executable, "-c", _postgres_probe()],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        closed.close()

    assert result.stdout.startswith("skipping: PostgreSQL is not reachable: "), result.stderr
    assert "No module named" not in result.stdout
    assert "connection" in result.stdout.lower()
