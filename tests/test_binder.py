"""Binder's files agree with pyproject.toml, and a simulated repo2docker build works.

repo2docker (see /work/shared/NOTES-jupyter.md) starts from its conda-forge Python 3.11 lock,
installs ``binder/requirements.txt`` over it with pip, copies the repository to ``$HOME`` and
runs ``binder/postBuild`` there as a user who is not root. The simulation installs the base
lock's versions of the packages that matter into a fresh Python 3.11 venv, then the
requirements, then runs postBuild and the tour notebook, all in one session-scoped environment
(a copy of one cached between runs by a hash of the lock, the requirements and the Python).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.installed._venvs import venv_copy

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
README = ROOT / "README.md"

# repo2docker's Python 3.11 conda-forge lock (frozen 2025-10): the versions it ships of the
# packages our requirements interact with.
BASE_LOCK = [
    "jupyterlab==4.4.9",
    "notebook==7.4.7",
    "ipywidgets==8.1.7",
    "ipykernel==7.0.1",
    "sqlalchemy==2.0.44",
]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (BINDER / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version.strip(), f"not pinned exactly: {line!r}"
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [
        Requirement(d)
        for d in project["dependencies"]
        + extras["notebook"]
        + extras["lineage"]
        + extras["postgres"]
        + extras["langgraph"]  # notebooks/06_langgraph.ipynb
    ]


def test_binder_pins_every_runtime_notebook_lineage_and_postgres_dependency() -> None:
    assert {canonicalize_name(r.name) for r in _declared()} <= set(_pins())


@pytest.mark.parametrize("requirement", _declared(), ids=lambda r: r.name)
def test_binder_pin_satisfies_pyproject(requirement: Requirement) -> None:
    pins = _pins()
    pinned = pins[canonicalize_name(requirement.name)]
    assert requirement.specifier.contains(pinned, prereleases=True), (requirement, pinned)
    for extra in requirement.extras:  # psycopg[binary] needs psycopg-binary at the same version
        assert pins[canonicalize_name(f"{requirement.name}-{extra}")] == pinned


def test_binder_pins_a_notebook_that_accepts_the_pinned_jupyterlab() -> None:
    # notebook 7.4.x (the base lock's) requires jupyterlab<4.5: it must be pinned alongside.
    pins = _pins()
    lab = tuple(int(p) for p in pins["jupyterlab"].split(".")[:2])
    assert "notebook" in pins
    assert lab < (4, 5) or tuple(int(p) for p in pins["notebook"].split(".")[:2]) >= (7, 5)


def test_binder_builds_the_package_with_the_pinned_build_backend() -> None:
    # postBuild must not fetch whatever hatchling is newest for an isolated build
    system = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]
    backend = [Requirement(r) for r in system["requires"]]
    pins = _pins()
    for requirement in backend:
        assert requirement.specifier.contains(pins[canonicalize_name(requirement.name)])
    installs = [
        line
        for line in (BINDER / "postBuild").read_text().splitlines()
        if "pip install" in line and not line.lstrip().startswith("#")
    ]
    assert installs and all("--no-build-isolation" in line for line in installs)


def test_binder_runtime_is_python_311() -> None:
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"


def test_readme_has_a_binder_badge_that_opens_a_notebook_of_the_repository() -> None:
    found = re.search(
        r"\[!\[[^\]]*\]\(https://mybinder\.org/badge_logo\.svg\)\]"
        r"\((https://mybinder\.org/v2/gh/[^)\s]+\?labpath=([^)\s]+))\)",
        README.read_text(),
    )
    assert found, "no Binder badge in the README"
    assert (ROOT / found.group(2).replace("%2F", "/")).is_file(), found.group(1)


def _python311() -> str:
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    found = shutil.which("python3.11")
    if not found:
        pytest.skip("no Python 3.11 on this machine: Binder's runtime cannot be simulated")
    return found


@pytest.fixture(scope="session")
def binder_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python 3.11 venv with the base lock's versions, then binder/requirements.txt.

    Built with pip from the registries on a machine's first run and cached by a hash of those
    inputs (:mod:`tests.installed._venvs`); each run works in a copy of its own."""
    python = _python311()

    def build(env_dir: Path) -> None:
        subprocess.run([python, "-m", "venv", str(env_dir)], check=True, timeout=120)
        pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, *BASE_LOCK], check=True, timeout=600)
        subprocess.run([*pip, "-r", str(BINDER / "requirements.txt")], check=True, timeout=600)

    base = sys.base_prefix if python == sys.executable else str(Path(python).resolve())
    inputs = [f"python: {base}", *BASE_LOCK, (BINDER / "requirements.txt").read_text()]
    return venv_copy("binder", inputs, build, tmp_path_factory.mktemp("binder") / "venv")


def _in(env_dir: Path, *args: str | Path, **kw) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", **kw.pop("env", {})}
    return subprocess.run(
        [str(a) for a in args], env=env, capture_output=True, text=True, timeout=600, **kw
    )


@pytest.mark.slow  # about a minute, once per session: Binder's packages from the registry
def test_binder_requirements_pass_pip_check_over_the_base_lock(binder_env: Path) -> None:
    checked = _in(binder_env, binder_env / "bin" / "python", "-m", "pip", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow
def test_binder_requirements_pin_every_package_installed(binder_env: Path) -> None:
    frozen = _in(binder_env, binder_env / "bin" / "python", "-m", "pip", "freeze", "--all")
    installed = {}
    for line in frozen.stdout.splitlines():
        name, _, version = line.partition("==")
        installed[canonicalize_name(name)] = version
    for tool in ("pip", "setuptools", "wheel"):
        installed.pop(canonicalize_name(tool), None)
    assert installed == _pins()


@pytest.mark.slow
def test_binder_postbuild_builds_the_database_the_tour_notebook_opens(
    binder_env: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home = tmp_path / "home"  # repo2docker copies the repository to $HOME
    shutil.copytree(
        ROOT,
        home,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "*.db*", "__pycache__", "artifacts", ".ruff_cache"
        ),
    )
    env = {"HOME": str(home), "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter")}
    # postBuild installs smithers-tt into the shared venv: take it out again afterwards, so the
    # other tests of binder_env see the environment as built, whichever order they run in.
    request.addfinalizer(
        lambda: _in(
            binder_env,
            binder_env / "bin" / "python",
            "-m",
            "pip",
            "uninstall",
            "-y",
            "-q",
            "smithers-tt",
        )
    )
    built = _in(binder_env, "bash", "binder/postBuild", cwd=home, env=env)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    assert (home / "notebooks" / "smithers.db").is_file()

    # ?labpath=notebooks/00_tour.ipynb: the kernel runs in notebooks/, no $SMITHERS_TT_DB set
    executed = _in(
        binder_env,
        "jupyter",
        "nbconvert",
        "--to",
        "notebook",
        "--execute",
        "--output",
        str(tmp_path / "tour.ipynb"),
        "notebooks/00_tour.ipynb",
        cwd=home,
        env=env,
    )
    assert executed.returncode == 0, executed.stderr[-3000:]
    outputs = "".join(
        "".join(out.get("text", ""))
        for cell in json.loads((tmp_path / "tour.ipynb").read_text())["cells"]
        for out in cell.get("outputs", [])
    )
    assert "7 runs: {'cancelled': 1, 'finished': 6}" in outputs
    assert "building the demo runs" not in outputs  # it opened the prebuilt database
