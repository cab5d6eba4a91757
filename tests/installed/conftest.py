"""A wheel of the project, installed in fresh virtual environments with only named extras.

These tests follow a newcomer who ran ``pip install smithers-tt`` (or one extra of it), not the
developers' ``.venv``: the wheel is built from the checkout once per session, and each set of
extras gets one virtual environment per session (its third-party dependencies copied from a venv
cached by a hash of the wheel's requirements, see :mod:`tests.installed._venvs`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._run_wide import run_wide
from tests.installed._venvs import venv_copy

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
    """The wheel of the project, built with pip from the source checkout once per test run
    (the ``venv-core`` and ``venv-notebook`` groups' workers both install it)."""
    with run_wide(tmp_path_factory, "dist") as dist:
        built = list(dist.glob("smithers_tt-*.whl"))
        if not built:
            building = dist / "building"
            shutil.rmtree(building, ignore_errors=True)
            pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q"]
            subprocess.run(
                [*pip, "-w", str(building), str(ROOT)],
                check=True,
                env=clean_env(),
                timeout=300,
            )
            (made,) = building.glob("smithers_tt-*.whl")
            built = [made.rename(dist / made.name)]  # whole or not at all
    (wheel,) = built
    return wheel


def requirements_of(wheel: Path) -> list[str]:
    """What a wheel's metadata asks of an environment: Requires-Python and Requires-Dist."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode()
    return [
        line
        for line in metadata.splitlines()
        if line.startswith(("Requires-Python:", "Requires-Dist:"))
    ]


@pytest.fixture(scope="session")
def install(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Installed]:
    """``install("notebook")``: a fresh venv with the wheel and those extras ("" for none),
    made once per session for each set of extras.

    The third-party packages come from a venv cached by a hash of the wheel's requirements and
    the extras (:mod:`tests.installed._venvs`: built with pip from the registries on the first
    run, copied on the next); the wheel, built from this checkout by :func:`wheel`, is then
    installed into the copy with ``--no-index``, so pip checks that the copy already holds
    every dependency the wheel asks for, and fetches nothing."""
    made: dict[str, Installed] = {}

    def installed(extras: str) -> Installed:
        if extras not in made:
            target = f"{wheel}[{extras}]" if extras else str(wheel)

            def build(root: Path) -> None:  # the wheel's dependencies from the registries
                subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=120)
                pip = [str(root / "bin" / "python"), "-m", "pip"]
                for step in (["install", "-q", target], ["uninstall", "-y", "-q", "smithers-tt"]):
                    subprocess.run([*pip, *step], check=True, env=clean_env(), timeout=600)

            root = venv_copy(
                f"wheel-{extras or 'core'}",
                [f"extras: {extras}", *requirements_of(wheel)],
                build,
                tmp_path_factory.mktemp(f"venv-{extras or 'core'}") / "venv",
            )
            subprocess.run(
                [str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", target],
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
