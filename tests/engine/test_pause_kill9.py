"""Pause, step, answer and continue a run with ``kill -9`` between every step: each step is
a fresh process, each one is killed (paused, or in the middle of a node), and the next one
goes on from what the database kept: no pause, answer or finished node is lost or repeated.

The child (``_pause_child.py``) writes its result when its run pauses, then sleeps until it
is killed; its agents log every call to an fsynced file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import smithers_tt as st

CHILD = Path(__file__).with_name("_pause_child.py")
TIMEOUT = 60.0


def _spawn(workdir: Path, url: str, step: str, mode: str, **extra: Any) -> subprocess.Popen:
    order = {"url": url, "run_id": "pausekill9", "workdir": str(workdir), "step": step}
    order.update(mode=mode, **extra)
    log = open(workdir / f"{step}.log", "w")  # noqa: SIM115  (the child owns it)
    return subprocess.Popen([sys.executable, str(CHILD), json.dumps(order)], stdout=log, stderr=log)


def _wait(proc: subprocess.Popen, check: Any, workdir: Path, step: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        if proc.poll() is not None:
            output = (workdir / f"{step}.log").read_text()
            raise AssertionError(f"step {step} ended early:\n{output}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"step {step} did not get there in {TIMEOUT} s")
        time.sleep(0.01)


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(TIMEOUT) == -signal.SIGKILL


def _paused_then_killed(workdir: Path, url: str, step: str, mode: str, **extra: Any) -> dict:
    proc = _spawn(workdir, url, step, mode, **extra)
    result = workdir / f"{step}.json"
    _wait(proc, result.exists, workdir, step)
    _kill(proc)
    return json.loads(result.read_text())


def _calls(workdir: Path) -> list[str]:
    return (workdir / "calls").read_text().split("\n")[:-1]


def test_pause_step_answer_and_continue_survive_kill_9(db_url: str, tmp_path: Path) -> None:
    st.connect(db_url).close()  # migrated once, here
    db = st.connect(db_url)

    first = _paused_then_killed(tmp_path, db_url, "run", "run")
    assert (first["status"], first["pause"]["node_id"]) == ("paused", "plan")
    record = db.store.get_run("pausekill9")
    assert (record.status, record.owner_id) == ("paused", None)  # durable, nobody owns it

    stepped = _paused_then_killed(tmp_path, db_url, "step", "resume", resume={"step": True})
    assert (stepped["pause"]["reason"], stepped["pause"]["node_id"]) == ("step", "plan")
    assert _calls(tmp_path) == ["plan 1"]

    asked = _paused_then_killed(tmp_path, db_url, "ask", "resume")
    assert asked["pause"]["question"] == {"question": "which colour?"}
    assert db.get_run("pausekill9").pause.node_id == "ask"

    # Answered, then killed in the middle of the next node: the run is running, ownerless.
    answer = {"answer": "blue"}
    proc = _spawn(tmp_path, db_url, "answer", "resume", resume=answer, hang_in_write=True)
    _wait(proc, lambda: "write-hangs" in _calls(tmp_path), tmp_path, "answer")
    _kill(proc)
    assert db.store.get_run("pausekill9").status == "running"

    proc = _spawn(tmp_path, db_url, "end", "resume")
    _wait(proc, (tmp_path / "end.json").exists, tmp_path, "end")
    assert proc.wait(TIMEOUT) == 0
    end = json.loads((tmp_path / "end.json").read_text())
    assert end["status"] == "finished"
    assert end["output"]["ask"] == {"notes": ["n1"], "colour": "blue"}
    assert end["output"]["write"] == {"text": "blue report"}
    # Nothing finished ran again; the asker resumed from the checkpoint it made before asking.
    assert _calls(tmp_path) == [
        "plan 1", "ask 1 fresh", "ask 2 resumed", "write 1", "write-hangs", "write 2",
    ]  # fmt: skip
    db.close()
