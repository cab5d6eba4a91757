"""The command line as a newcomer gets it: the wheel in a fresh venv, no extras."""

from __future__ import annotations

import json
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from tests.installed.conftest import Installed


def cli(core: Installed, cwd: Path, *args: str) -> CompletedProcess[str]:
    return core.run("smithers-tt", *args, cwd=cwd, timeout=300)


@pytest.mark.slow  # about a minute: a new virtual environment, dependencies from the registry
def test_cli_wheel_tour_dead_ends_are_gone(core: Installed, tmp_path: Path) -> None:
    assert cli(core, tmp_path, "demo").returncode == 0
    listed = cli(core, tmp_path, "runs", "--json")  # --json after the command
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 7
    run = json.loads(listed.stdout)[0]["run_id"]
    shown = cli(core, tmp_path, "show", run, "--db", "smithers.db")
    assert shown.returncode == 0 and "…" not in shown.stdout  # piped: values whole
    before = sorted(p.name for p in tmp_path.iterdir())
    for typo in ("missing/smithers.db", "sqlite:/smithers.db"):
        done = cli(core, tmp_path, "--db", typo, "runs")
        assert done.returncode == 1 and done.stderr.startswith("error: ")
        assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
