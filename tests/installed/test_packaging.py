"""The wheel ships the Alembic revisions and the files the package reads beside its modules,
and a fresh virtual environment migrates a new database with them."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests.installed.conftest import Installed

ROOT = Path(__file__).resolve().parents[2]
REVISIONS = sorted((ROOT / "migrations" / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))

MIGRATE_A_NEW_DATABASE = """
import json, sqlite3, sys
import smithers_tt
from smithers_tt.store.backend._migrate import migrations_dir
path = sys.argv[1]
smithers_tt.connect("sqlite:///" + path).close()
rows = sqlite3.connect(path).execute("SELECT version_num FROM tt_alembic_version").fetchall()
print(json.dumps({
    "package": smithers_tt.__file__,
    "migrations": str(migrations_dir()),
    "rows": rows,
}))
"""


def test_wheel_ships_every_migration_inside_the_package(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())

    assert "smithers_tt/_migrations/env.py" in names  # Alembic's entry point
    assert "smithers_tt/_migrations/versions/0001_initial.py" in names
    assert {f"smithers_tt/_migrations/versions/{p.name}" for p in REVISIONS} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_wheel_ships_the_files_read_beside_the_modules(wheel: Path) -> None:
    """The timeline's figure loader (anywidget reads it as the figures' module) and the Voila
    template of ``serve``."""
    names = set(zipfile.ZipFile(wheel).namelist())
    beside = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "smithers_tt").rglob("*")
        if p.is_file() and p.suffix in {".js", ".j2", ".json"}
    }
    assert "smithers_tt/widgets/_plotly_once.js" in beside
    assert beside <= names, sorted(beside - names)


@pytest.mark.slow  # a fresh virtual environment (once per session), dependencies from the registry
def test_wheel_migrates_a_new_database_when_installed_in_a_fresh_venv(
    core: Installed, tmp_path: Path
) -> None:
    done = core.run("python", "-c", MIGRATE_A_NEW_DATABASE, tmp_path / "new.db", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert Path(found["package"]).is_relative_to(core.root)
    assert Path(found["migrations"]).is_relative_to(core.root)
    assert Path(found["migrations"]).name == "_migrations"
    assert found["rows"] == [[REVISIONS[-1].stem]]  # every revision applied, up to the head
    # Alembic ran quietly: the JSON line is all there is on stdout, and stderr is empty
    assert done.stdout.count("\n") == 1 and done.stderr == ""
