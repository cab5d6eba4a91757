"""A folder shared by every process of one test run (each xdist worker, or the one process of
``-n 0``), for what is built once per run however many workers need it."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def run_wide(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """The run's folder ``name``, held under a lock that the run's processes share: the first
    to enter builds what it holds (whole or not at all), the others wait and find it built.
    The workers' base folders (``popen-gwN``) share the run's folder as their parent."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield folder
