"""kill -9 trials: a run killed at a random moment loses no acknowledged checkpoint, and a
fresh process resumes it without calling any completed node again, to the same outputs.

Each trial (one per seed, on each backend) starts the demo workflow (flaky researcher, invalid
first draft: retries and schema correction happen; several checkpointing steps with a small
``step_delay``) in a child process (``_kill9_child.py``) whose agents log every call and every
acknowledged checkpoint to fsynced files. After a random delay (seeded, spread over the run's
duration) the parent sends SIGKILL, reads the database, then lets another fresh process resume
the run, and checks:

* every checkpoint acknowledged before the kill is in the database and verifies;
* no node finished before the kill is called again by the resume;
* each interrupted node resumes from its newest checkpoint (forks from their source's);
* the final outputs equal those of an uninterrupted run of the same workflow and input.

There are 50 trials per backend by default. Run more with the environment variable
``SMITHERS_TT_KILL9_TRIALS``, e.g.::

    SMITHERS_TT_KILL9_TRIALS=500 python -m pytest tests/engine/test_kill9.py

The child processes are forked by a *zygote* (``_kill9_child.py``, started with
``subprocess.Popen``) that only imported the modules: each role (the victim run, then the
resume) is a new process with no connection, no event loop and no state of any run, and a
trial does not pay about a second of CPU for imports twice. The zygote keeps its children
unreaped until the parent is done with them, so no pid is ever reused under a kill.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.checkpoint import content_hash
from smithers_tt.store import AttemptRecord

from ._workflows import ref_key, refs

TRIALS = int(os.environ.get("SMITHERS_TT_KILL9_TRIALS", "50"))
STEP_DELAY = 0.03
CHILD = Path(__file__).with_name("_kill9_child.py")
TIMEOUT = 60.0

pytestmark = pytest.mark.slow


class Zygote:
    """The process that forks a fresh child per role (see ``_kill9_child.py``)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        assert line == "ready\n", f"the kill -9 zygote did not start: {line!r}"

    def _ask(self, **order: Any) -> int:
        self.proc.stdin.write(json.dumps(order) + "\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def spawn(self, **order: Any) -> int:
        """Fork a child for one role; returns its pid (ours until :meth:`reap`)."""
        return self._ask(op="spawn", **order)

    def reap(self, pid: int) -> int:
        """Wait for a child to end; returns its exit code (negative: killed by that signal)."""
        return self._ask(op="reap", pid=pid)

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    try:
        yield z
    finally:
        z.close()


def _wait_for(path: Path, workdir: Path, mode: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    error = workdir / f"error-{mode}.txt"
    while not path.exists():
        if error.exists():
            raise AssertionError(f"the {mode} child failed:\n{error.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the {mode} child did not write {path.name} in {timeout} s")
        time.sleep(0.002)


def _finish(zygote: Zygote, pid: int, workdir: Path, mode: str) -> dict[str, Any]:
    path = workdir / f"result-{mode}.json"
    try:
        _wait_for(path, workdir, mode)
    except AssertionError:
        os.kill(pid, signal.SIGKILL)  # our child, not reaped yet: the pid is still its own
        zygote.reap(pid)
        raise
    assert zygote.reap(pid) == 0
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def references() -> dict[str, tuple[Any, float]]:
    """Per backend: the outputs of an uninterrupted run and how long it took (see below)."""
    return {}


def _reference(
    zygote: Zygote, references: dict[str, tuple[Any, float]], db_url: str, workdir: Path
) -> tuple[Any, float]:
    """The outputs of an uninterrupted run of the same workflow and input on this backend,
    and its duration (the kills are spread over it); measured once per backend."""
    backend = db_url.split(":", 1)[0]
    if backend not in references:
        workdir.mkdir()
        pid = zygote.spawn(
            mode="run",
            url=db_url,
            run_id="reference",
            workdir=str(workdir),
            step_delay=STEP_DELAY,
        )
        _wait_for(workdir / "started-run", workdir, "run")
        began = time.monotonic()
        result = _finish(zygote, pid, workdir, "run")
        duration = time.monotonic() - began
        assert result["status"] == "finished", result
        references[backend] = (result["output"], duration)
    return references[backend]


def _lines(path: Path) -> list[list[str]]:
    """Complete lines of a log (a line cut by the kill is not an acknowledgement yet)."""
    if not path.exists():
        return []
    text = path.read_text()
    complete = text[: text.rfind("\n") + 1]
    return [line.split() for line in complete.splitlines()]


def _named(db_url: str, name: str) -> str:
    """The URL with a PostgreSQL application name, to find the victim's server sessions."""
    if not db_url.startswith("postgresql"):
        return db_url
    return f"{db_url}{'&' if '?' in db_url else '?'}application_name={name}"


def _wait_for_server_sessions_to_end(db: st.Database, name: str) -> None:
    """Wait until PostgreSQL has ended the killed process's sessions.

    A COMMIT the victim sent just before SIGKILL can still complete on the server after the
    process is gone; once its sessions have ended, what the database holds is final.
    """
    if db.engine.is_sqlite:
        return
    deadline = time.monotonic() + TIMEOUT
    query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
    while True:
        with db.engine.sa.connect() as conn:
            (left,) = conn.exec_driver_sql(query, (name,)).one()
        if not left:
            return
        assert time.monotonic() < deadline, f"{left} session(s) of {name} outlived it"
        time.sleep(0.01)


@pytest.mark.parametrize("seed", range(TRIALS))
def test_kill9_loses_no_acknowledged_checkpoint_and_repeats_no_completed_node(
    db: st.Database,
    db_url: str,
    tmp_path: Path,
    zygote: Zygote,
    references: dict[str, tuple[Any, float]],
    seed: int,
) -> None:
    expected, duration = _reference(zygote, references, db_url, tmp_path / "reference")
    delay = random.Random(seed).uniform(0.0, duration)
    run_id = f"kill9-{seed}"
    victim = f"kill9-{os.getpid()}-{seed}"
    url = _named(db_url, victim)
    orders = {"url": url, "run_id": run_id, "workdir": str(tmp_path), "step_delay": STEP_DELAY}

    runner = zygote.spawn(mode="run", **orders)
    try:
        _wait_for(tmp_path / "started-run", tmp_path, "run")
        time.sleep(delay)
    finally:
        os.kill(runner, signal.SIGKILL)  # not reaped yet: the pid is still our child's
        code = zygote.reap(runner)
    assert code in (-signal.SIGKILL, 0)  # 0: the run had already finished
    _wait_for_server_sessions_to_end(db, victim)
    assert not (tmp_path / "error-run.txt").exists(), (tmp_path / "error-run.txt").read_text()

    # --- what the database holds right after the kill ---------------------------------
    acks = _lines(tmp_path / "acks-run")
    try:
        db.store.get_run(run_id)
        existed = True
    except st.RunNotFound:
        existed = False
    if existed:
        stored = {ref_key(r): r for r in refs(db, run_id)}
        completed = {
            n.node_id for n in db.store.list_nodes(run_id) if n.state in ("finished", "cached")
        }
        attempts_before = {a.key for a in db.store.list_attempts(run_id)}
    else:
        stored, completed, attempts_before = {}, set(), set()
    for node, iteration, attempt, sequence, digest in acks:
        key = (run_id, node, int(iteration), int(attempt), int(sequence))
        assert key in stored, f"acknowledged checkpoint {key} is not in the database"
        assert stored[key].content_hash == digest
        assert content_hash(db.store.read_content(digest)) == digest
    newest: dict[str, tuple[str, str, int, int, int]] = {}
    for key in sorted(stored, key=lambda k: (k[3], k[4])):
        newest[key[1]] = key

    # --- a fresh process resumes ---------------------------------------------------------
    resumer = zygote.spawn(mode="resume", **orders)
    result = _finish(zygote, resumer, tmp_path, "resume")

    assert result["status"] == "finished", result
    assert result["output"] == expected
    assert result["fresh"] is not existed
    called = {line[0] for line in _lines(tmp_path / "calls-resume")}
    assert not called & completed, f"completed nodes {called & completed} were called again"
    after = db.store.list_attempts(run_id)
    by_node: dict[str, list[AttemptRecord]] = {}
    for a in after:
        if a.key not in attempts_before:
            by_node.setdefault(a.key.node_id, []).append(a)
    for node in ("research", "write"):
        if node in newest and node not in completed:
            first = by_node[node][0]
            assert first.resumed_from == newest[node], f"{node} did not resume its newest state"
    write_finished = {
        a.key.attempt for a in after if a.key.node_id == "write" and a.state == "finished"
    }
    source = [r for r in refs(db, run_id, "write") if r.attempt in write_finished][-1]
    for a in by_node.get("review", []):
        assert a.resumed_from == ref_key(source)
    assert {n.state for n in db.store.list_nodes(run_id)} == {"finished"}
    for *_, digest in _lines(tmp_path / "acks-resume"):
        assert db.store.read_content(digest)
    report = db.verify()
    assert report.ok, report
