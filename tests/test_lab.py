"""``smithers-tt lab`` from the checkout (the developers' editable install); the wheel's side
is tested on an installed wheel in tests/installed/test_lab.py."""

from __future__ import annotations

from pathlib import Path

from smithers_tt.cli._lab import absolute_url, jupyter_arguments, notebook_folder

ROOT = Path(__file__).resolve().parent.parent


def test_lab_from_the_checkout_opens_its_notebooks_in_place() -> None:
    folder, copied = notebook_folder(None)

    assert folder == ROOT / "notebooks" and copied == []


def test_lab_dir_copies_the_notebooks_but_never_over_a_persons_edits(tmp_path: Path) -> None:
    folder, copied = notebook_folder(tmp_path / "mine")
    assert copied == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    (folder / "00_tour.ipynb").write_text("{}")  # a person's edit

    again, copied_again = notebook_folder(tmp_path / "mine")

    assert again == folder and copied_again == []
    assert (folder / "00_tour.ipynb").read_text() == "{}"


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
