"""The command line as a newcomer gets it: the wheel in a fresh venv, no extras."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_packaging import clean_env, wheel  # noqa: F401  (the wheel fixture)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """The ``smithers-tt`` script of the wheel installed without extras in a new venv."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run(
        [*pip, "--disable-pip-version-check", str(wheel)],
        check=True,
        env=clean_env(),
        timeout=600,
    )
    return venv / "bin" / "smithers-tt"


def cli(script: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(script), *args], cwd=cwd, capture_output=True, text=True, env=clean_env(), timeout=300
    )


@pytest.mark.slow  # about a minute: a new virtual environment, dependencies from the registry
def test_cli_wheel_tour_dead_ends_are_gone(installed: Path, tmp_path: Path) -> None:
    assert cli(installed, tmp_path, "demo").returncode == 0
    listed = cli(installed, tmp_path, "runs", "--json")  # --json after the command
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 7
    run = json.loads(listed.stdout)[0]["run_id"]
    shown = cli(installed, tmp_path, "show", run, "--db", "smithers.db")
    assert shown.returncode == 0 and "…" not in shown.stdout  # piped: values whole
    before = sorted(p.name for p in tmp_path.iterdir())
    for typo in ("missing/smithers.db", "sqlite:/smithers.db"):
        done = cli(installed, tmp_path, "--db", typo, "runs")
        assert done.returncode == 1 and done.stderr.startswith("error: ")
        assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
