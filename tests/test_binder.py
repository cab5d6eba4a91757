"""Binder's files agree with pyproject.toml, and postBuild works in a fresh environment."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"


def _pins() -> dict[str, str]:
    pins = {}
    for line in (BINDER / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower()] = version
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [
        Requirement(d) for d in project["dependencies"] + extras["notebook"] + extras["lineage"]
    ]


def test_binder_pins_exactly_the_runtime_and_notebook_dependencies() -> None:
    assert set(_pins()) == {r.name.lower() for r in _declared()}


@pytest.mark.parametrize("requirement", _declared(), ids=lambda r: r.name)
def test_binder_pin_satisfies_pyproject(requirement: Requirement) -> None:
    pinned = _pins()[requirement.name.lower()]
    assert requirement.specifier.contains(pinned, prereleases=True), (requirement, pinned)


def test_binder_runtime_is_python_311() -> None:
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"


@pytest.mark.slow
def test_binder_postbuild_builds_the_demo_database_in_a_fresh_venv(tmp_path: Path) -> None:
    checkout = tmp_path / "repo"
    shutil.copytree(
        ROOT,
        checkout,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "*.db*", "__pycache__", "artifacts", ".ruff_cache"
        ),
    )
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    core = [
        f"{name}=={_pins()[name]}" for name in ("sqlalchemy", "orjson", "click", "pydantic", "rich")
    ]
    subprocess.run([python, "-m", "pip", "install", "-q", *core], check=True, timeout=600)
    env = {"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(
        ["bash", "binder/postBuild"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    check = subprocess.run(
        [
            python,
            "-c",
            "import smithers_tt as st; db = st.connect('notebooks/smithers.db');"
            " print(len(db.runs()), db.verify().ok)",
        ],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.stdout.split() == ["7", "True"], check.stderr
    assert sys.version_info >= (3, 11)
