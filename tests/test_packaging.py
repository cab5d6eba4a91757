"""The wheel ships the migrations, and a fresh virtual environment migrates a new database."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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


def clean_env() -> dict[str, str]:
    """The environment without anything that would put the source checkout on the path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the project, built with pip from the source checkout."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        check=True,
        env=clean_env(),
        timeout=300,
    )
    (built,) = dist.glob("smithers_tt-*.whl")
    return built


def test_wheel_ships_every_migration_inside_the_package(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())

    assert "smithers_tt/_migrations/0001_initial.py" in names
    assert {f"smithers_tt/_migrations/{p.name}" for p in MIGRATIONS} <= names


@pytest.mark.slow  # about a minute: a new virtual environment, dependencies from the registry
def test_wheel_migrates_a_new_database_when_installed_in_a_fresh_venv(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        check=True,
        env=clean_env(),
        timeout=600,
    )

    done = subprocess.run(
        [str(python), "-c", MIGRATE_A_NEW_DATABASE, str(tmp_path / "new.db")],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the checkout: the installed package must be the one imported
        env=clean_env(),
        timeout=120,
    )

    found = json.loads(done.stdout)
    assert Path(found["package"]).is_relative_to(venv)
    assert Path(found["migrations"]).is_relative_to(venv)
    assert Path(found["migrations"]).name == "_migrations"
    assert found["rows"] == [
        [p.stem, hashlib.sha256(p.read_bytes()).hexdigest()] for p in MIGRATIONS
    ]
