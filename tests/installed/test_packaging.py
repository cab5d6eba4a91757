"""The wheel ships the migrations, and a fresh virtual environment migrates a new database."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from tests.installed.conftest import Installed

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = sorted(p for p in (ROOT / "migrations").glob("[0-9][0-9][0-9][0-9]_*.py"))

MIGRATE_A_NEW_DATABASE = """
import json, sqlite3, sys
import smithers_tt
from smithers_tt.store._migrate import migrations_dir
path = sys.argv[1]
smithers_tt.connect("sqlite:///" + path).close()
rows = sqlite3.connect(path).execute(
    "SELECT name, checksum FROM tt_migrations ORDER BY name"
).fetchall()
print(json.dumps({
    "package": smithers_tt.__file__,
    "migrations": str(migrations_dir()),
    "rows": rows,
}))
"""


def test_wheel_ships_every_migration_inside_the_package(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())

    assert "smithers_tt/_migrations/0001_initial.py" in names
    assert {f"smithers_tt/_migrations/{p.name}" for p in MIGRATIONS} <= names


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
    assert found["rows"] == [
        [p.stem, hashlib.sha256(p.read_bytes()).hexdigest()] for p in MIGRATIONS
    ]
