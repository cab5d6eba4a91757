"""``smithers-tt lab`` from the checkout (the developers' editable install); the wheel's side
is tested on an installed wheel in tests/installed/test_lab.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from smithers_tt.cli._lab import DEFAULT_DIR, absolute_url, jupyter_arguments, notebook_folder
from smithers_tt.errors import InvalidArgument

ROOT = Path(__file__).resolve().parent.parent


def _tracked_changes() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_lab_from_the_checkout_works_on_a_copy_that_git_ignores(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)  # where ./dev lab runs it
    before = _tracked_changes()
    existed = (ROOT / DEFAULT_DIR).exists()
    try:
        copies = notebook_folder(None)

        assert copies.folder == ROOT / DEFAULT_DIR != ROOT / "notebooks"
        names = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
        assert sorted(p.name for p in copies.folder.glob("*.ipynb")) == names
        (copies.folder / "00_tour.ipynb").write_text("{}")  # what JupyterLab's autosave does
        assert _tracked_changes() == before  # git sees no change: the copies are ignored
    finally:
        if not existed:
            shutil.rmtree(ROOT / DEFAULT_DIR, ignore_errors=True)


def test_lab_refuses_to_open_the_installed_notebooks_themselves() -> None:
    with pytest.raises(InvalidArgument, match="of your own"):
        notebook_folder(ROOT / "notebooks")


def test_lab_dir_copies_the_notebooks_but_never_over_a_persons_edits(tmp_path: Path) -> None:
    copies = notebook_folder(tmp_path / "mine")
    assert copies.copied == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert copies.stale == []
    tour = copies.folder / "00_tour.ipynb"
    tour.write_text("{}")  # a person's edit
    os.utime(tour, (0, 0))  # ... older than the installed notebook

    again = notebook_folder(tmp_path / "mine")

    assert again.folder == copies.folder and again.copied == []
    assert again.stale == ["00_tour.ipynb"]  # named, so the person can delete it
    assert tour.read_text() == "{}"


def test_lab_adds_allow_root_only_as_root_and_keeps_the_callers_arguments() -> None:
    given = ("--no-browser", "--port", "9999")

    assert jupyter_arguments(given, is_root=True) == [*given, "--allow-root"]
    assert jupyter_arguments(given, is_root=False) == list(given)
    assert jupyter_arguments(("--allow-root",), is_root=True) == ["--allow-root"]


def test_lab_hands_the_kernel_an_absolute_sqlite_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)

    assert absolute_url("sqlite:///smithers.db") == f"sqlite:///{tmp_path / 'smithers.db'}"
    assert absolute_url("sqlite:////srv/a.db") == "sqlite:////srv/a.db"
    assert absolute_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
