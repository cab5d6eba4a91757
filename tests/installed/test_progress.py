"""Long work shows a progress bar on a terminal (rich, installed with the core), and nothing
when standard error is a pipe; run on a wheel installed without any extra."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from tests.installed.conftest import Installed

pytestmark = pytest.mark.slow  # a fresh venv, once per session

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def in_terminal(venv: Installed, *args: str, cwd: Path, timeout: float = 120) -> tuple[int, str]:
    """Run a command of ``venv`` on a pseudo-terminal 120 columns wide; its screen output."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(
        [str(venv.bin / args[0]), *args[1:]],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=venv.env(TERM="xterm-256color", COLUMNS="120", LINES="40"),
        close_fds=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    screen = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))
    return code, screen.replace("\r", "\n")


@pytest.fixture(scope="module")
def demo(core: Installed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the demo database ``smithers.db``, built by the installed CLI."""
    folder = tmp_path_factory.mktemp("progress")
    built = core.run("smithers-tt", "--json", "demo", cwd=folder)
    assert built.returncode == 0, built.stderr
    return folder


def test_verify_draws_a_bar_with_the_count_and_total_on_a_terminal(
    core: Installed, demo: Path
) -> None:
    checked = json.loads(core.run("smithers-tt", "--json", "verify", cwd=demo).stdout)["checked"]

    code, screen = in_terminal(core, "smithers-tt", "verify", cwd=demo)

    assert code == 0, screen
    assert re.search(rf"verifying ━+ {checked}/{checked} \d+:\d\d:\d\d", screen), screen


def test_progress_is_not_drawn_when_standard_error_is_a_pipe(core: Installed, demo: Path) -> None:
    for command in (("verify",), ("gc",)):
        # FORCE_COLOR (set by many CI services) asks for colours, not for a live bar
        result = core.run("smithers-tt", "--json", *command, cwd=demo, FORCE_COLOR="1")

        assert result.returncode == 0
        assert result.stderr == ""  # nothing but the JSON, on stdout
        json.loads(result.stdout)


def test_gc_draws_a_bar_on_a_terminal(core: Installed, demo: Path) -> None:
    code, screen = in_terminal(core, "smithers-tt", "gc", cwd=demo)

    assert code == 0, screen
    assert re.search(r"collecting ━+ \d+ rows deleted", screen), screen


def test_rewind_and_fork_show_that_they_are_working_on_a_terminal(
    core: Installed, demo: Path
) -> None:
    runs = json.loads(core.run("smithers-tt", "--json", "runs", cwd=demo).stdout)
    run_id = next(r["run_id"] for r in runs if r["status"] == "finished")

    forked, fork_screen = in_terminal(core, "smithers-tt", "fork", run_id, "3", cwd=demo)
    rewound, rewind_screen = in_terminal(
        core, "smithers-tt", "rewind", run_id, "5", "--yes", "--force", cwd=demo
    )

    assert forked == 0 and re.search(r"forking at frame 3 ━+", fork_screen), fork_screen
    assert rewound == 0 and re.search(r"rewinding to frame 5 ━+", rewind_screen), rewind_screen


SUBMIT = """
import smithers_tt as st
from smithers_tt.demo import demo_workflow
db = st.connect("sqlite:///queue.db")
for topic in ("bee", "ant", "wasp"):
    db.submit(demo_workflow()[0], input={"topic": topic})
"""


@pytest.mark.parametrize(
    ("until", "bar", "ended"),
    [
        (["--idle-exit", "0.5"], r"runs ended ━+ 3 runs", 3),  # no total: it counts
        (["--max-runs", "2"], r"runs ended ━+ 2/2 ", 2),  # a total: how many of it ended
    ],
    ids=["draining", "max-runs"],
)
def test_worker_bar_counts_the_runs_it_ended(
    core: Installed, tmp_path: Path, until: list[str], bar: str, ended: int
) -> None:
    assert core.run("python", "-c", SUBMIT, cwd=tmp_path).returncode == 0

    code, screen = in_terminal(
        core,
        "smithers-tt",
        "--db",
        "queue.db",
        "worker",
        "--workflows",
        "smithers_tt.demo:demo_workflow",
        *until,
        "--quiet",
        cwd=tmp_path,
    )

    assert code == 0, screen
    assert re.search(bar, screen), screen
    assert f"stopped after {ended} run(s)" in screen
