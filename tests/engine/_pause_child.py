"""The child process of the pause kill -9 test (``test_pause_kill9.py``); not a test module.

``python _pause_child.py ORDER_JSON`` opens the database, then runs, or resumes, the run as
the order says (``{"url", "run_id", "workdir", "step", "mode", "resume": {...}}``). When the
run pauses it writes ``WORKDIR/<step>.json`` (status and pause) and sleeps until it is
killed: nothing is cleaned up, so whatever survives is what the database made durable.
Agents append one fsynced line per call to ``WORKDIR/calls``; the ``write`` agent, told to
(``"hang_in_write": true``), logs ``write-hangs`` and sleeps there, to be killed mid-node.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import time
from typing import Any

import smithers_tt as st

CODEC = "kill9.notes"


class Calls:
    def __init__(self, workdir: str) -> None:
        self.fd = os.open(os.path.join(workdir, "calls"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def write(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())
        os.fsync(self.fd)


def workflow(calls: Calls, hang_in_write: bool = False) -> st.Workflow:
    """plan -> ask (checkpoints, then asks a person) -> write."""

    async def plan(request: st.GenerateRequest) -> Any:
        calls.write(f"plan {request.attempt}")
        return {"plan": "three notes"}

    class Asker:
        id = "asker"
        checkpoint_formats = [st.CheckpointFormat(CODEC, versions=[1])]
        checkpoint_capabilities = [st.CheckpointCapability(CODEC, versions=[1], modes=["resume"])]

        async def generate(self, request: st.GenerateRequest) -> Any:
            resumed = request.resume_checkpoint is not None
            calls.write(f"ask {request.attempt} {'resumed' if resumed else 'fresh'}")
            state = request.resume_checkpoint.payload if resumed else {"notes": ["n1"]}
            if not resumed:
                await request.on_checkpoint(st.AgentCheckpoint(CODEC, 1, state))
            colour = await request.ask({"question": "which colour?"})
            return {"notes": state["notes"], "colour": colour}

    async def write(request: st.GenerateRequest) -> Any:
        calls.write(f"write {request.attempt}")
        if hang_in_write:
            calls.write("write-hangs")
            await asyncio.sleep(3600)
        return {"text": f"{request.needs['ask']['colour']} report"}

    wf = st.Workflow("pause-kill9")
    wf.task("plan", agent=plan)
    wf.task("ask", agent=Asker(), needs=["plan"])
    wf.task("write", agent=write, needs=["ask"])
    return wf


def main(order: dict[str, Any]) -> None:
    calls = Calls(order["workdir"])
    wf = workflow(calls, bool(order.get("hang_in_write")))
    db = st.connect(order["url"], migrate_schema=False)
    if order["mode"] == "run":
        run = db.run(wf, {"topic": "bees"}, run_id=order["run_id"], break_before=["plan"])
    else:
        run = db.resume(order["run_id"], wf, **order.get("resume", {}))
    pause = run.pause
    result = {
        "status": run.status,
        "output": run.output,
        "pause": None if pause is None else dataclasses.asdict(pause),
    }
    path = os.path.join(order["workdir"], f"{order['step']}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)
    if run.status == "paused":
        time.sleep(3600)  # killed here: nothing below a pause is left to clean up


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
