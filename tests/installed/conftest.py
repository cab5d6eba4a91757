"""A wheel of the project, installed in fresh virtual environments with only named extras.

These tests follow a newcomer who ran ``pip install smithers-tt`` (or one extra of it), not the
developers' ``.venv``: the wheel is built once per session, and each set of extras gets one
virtual environment per session (dependencies from the registry; pip's cache makes it quick).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that would put the checkout or the dev venv first."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("SMITHERS_TT_")
    }
    env.update(extra)
    return env


class Installed:
    """A virtual environment holding the wheel (and some extras): run its commands."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.python = self.bin / "python"

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment whose PATH starts with this venv's ``bin``."""
        return clean_env(PATH=f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}", **extra)

    def run(
        self, *args: str | Path, cwd: Path, timeout: float = 120, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run ``args`` (a command of this venv, e.g. ``smithers-tt``) in ``cwd``."""
        command = [str(self.bin / str(args[0])), *map(str, args[1:])]
        return subprocess.run(
            command,
            cwd=cwd,  # never the checkout: the installed package must be the one imported
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


@pytest.fixture(scope="session")
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


@pytest.fixture(scope="session")
def install(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Installed]:
    """``install("notebook")``: a fresh venv with the wheel and those extras ("" for none),
    made once per session for each set of extras."""
    made: dict[str, Installed] = {}

    def installed(extras: str) -> Installed:
        if extras not in made:
            root = tmp_path_factory.mktemp(f"venv-{extras or 'core'}")
            subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=120)
            target = f"{wheel}[{extras}]" if extras else str(wheel)
            subprocess.run(
                [str(root / "bin" / "python"), "-m", "pip", "install", "-q", target],
                check=True,
                env=clean_env(),
                timeout=600,
            )
            made[extras] = Installed(root)
        return made[extras]

    return installed


@pytest.fixture(scope="session")
def core(install: Callable[[str], Installed]) -> Installed:
    """The wheel without any extra: what ``pip install smithers-tt`` gives."""
    return install("")


@pytest.fixture(scope="session")
def notebook(install: Callable[[str], Installed]) -> Installed:
    """The wheel with the ``notebook`` extra."""
    return install("notebook")
