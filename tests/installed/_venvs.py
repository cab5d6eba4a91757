"""Virtual environments that tests build, cached between runs by a hash of their inputs.

A test that needs a venv of third-party packages (Binder's pinned environment, the wheel's
dependencies with some extras) asks :func:`venv_copy` for a fresh copy of it. The first run on a
machine builds the venv with pip from the registries, as before, into a folder of the cache
(``$SMITHERS_TT_TEST_CACHE``, default ``~/.cache/smithers_tt-tests``; ``off`` builds every time,
in the test's own folder); every later run whose inputs hash the same copies that folder
(``cp -a``, about 3 s against 50-250 s of pip) and rewrites the copy's absolute paths. The
copy is the test's own: what a test installs or removes never reaches the cache or another run.

Only third-party packages are ever cached: the project's wheel is built from the checkout and
installed into each copy by the test, every run. The inputs of a key are everything the build
reads (the packages asked for, the Python version, this module's ``FORMAT``), and an entry
older than ``MAX_AGE_DAYS`` is built anew, so that a new release within a range of
pyproject.toml is met within a week. Several runs at once (xdist workers, other checkouts on
the machine) share one build: each key has a lock file, held while it is built or copied.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

FORMAT = 1  # bump to throw away every cached venv (a change of how they are built)
MAX_AGE_DAYS = 7
UNUSED_DAYS = 3  # another key of the same name unused this long is deleted


def cache_root() -> Path | None:
    """The cache folder, or None when caching is off (``SMITHERS_TT_TEST_CACHE=off``)."""
    configured = os.environ.get("SMITHERS_TT_TEST_CACHE")
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "smithers_tt-tests"


def key_of(name: str, inputs: list[str]) -> str:
    """The hash of everything a venv's build reads."""
    described = json.dumps(
        {
            "format": FORMAT,
            "name": name,
            "python": [sys.version, sys.base_prefix],
            "inputs": inputs,
        },
        sort_keys=True,
    )
    return hashlib.sha256(described.encode()).hexdigest()[:20]


@contextlib.contextmanager
def _locked(path: Path, *, wait: bool = True) -> Iterator[bool]:
    with open(path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True  # released when the file closes


def _relocate(venv: Path, old: Path) -> None:
    """Point a copied venv at its new folder: the scripts' ``#!`` lines and pyvenv.cfg name
    the folder it was built in (nothing else does: compiled files only name their source)."""
    old_b, new_b = str(old).encode(), str(venv).encode()
    for path in [venv / "pyvenv.cfg", *(venv / "bin").iterdir()]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old_b in data and b"\0" not in data[:1024]:
            path.write_bytes(data.replace(old_b, new_b))


def _prune(folder: Path, name: str, keep: Path) -> None:
    """Delete the other keys of ``name`` that no run used for ``UNUSED_DAYS``."""
    for other in folder.glob(f"{name}-*.lock"):
        template = other.with_suffix("")
        if template == keep or not template.exists():
            continue
        with _locked(other, wait=False) as mine:
            used = (template / ".used").stat().st_mtime if (template / ".used").exists() else 0
            if mine and time.time() - used > UNUSED_DAYS * 86400:
                shutil.rmtree(template, ignore_errors=True)


def venv_copy(name: str, inputs: list[str], build: Callable[[Path], None], dest: Path) -> Path:
    """A venv at ``dest`` as ``build(folder)`` makes it; built once per distinct ``inputs``
    (and week) on this machine and copied, or built at ``dest`` when the cache is off.

    ``build`` must create the venv at the folder it is given (``python -m venv``) and install
    into it only what ``inputs`` name, from the registries."""
    root = cache_root()
    if root is None:
        build(dest)
        return dest
    folder = root / "venvs"
    folder.mkdir(parents=True, exist_ok=True)
    template = folder / f"{name}-{key_of(name, inputs)}"
    with _locked(template.with_suffix(".lock")):
        done = template / ".complete"
        if done.exists() and time.time() - done.stat().st_mtime > MAX_AGE_DAYS * 86400:
            shutil.rmtree(template)  # a week old: resolve the ranges again
        if not done.exists():
            shutil.rmtree(template, ignore_errors=True)  # a build that was killed half-way
            building = template.with_name(f"{template.name}.building")
            shutil.rmtree(building, ignore_errors=True)
            build(building)
            (building / ".inputs.json").write_text(json.dumps(inputs, indent=1))
            building.rename(template)
            _relocate(template, building)
            done.touch()  # whole or not at all: only a finished build is ever copied
        (template / ".used").touch()
        subprocess.run(["cp", "-a", str(template), str(dest)], check=True, timeout=600)
    _relocate(dest, template)
    for marker in (".complete", ".used", ".inputs.json"):
        (dest / marker).unlink(missing_ok=True)
    _prune(folder, name, template)
    return dest
