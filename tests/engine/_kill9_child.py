"""Child processes of the kill -9 trials (see ``test_kill9.py``); not a test module.

``python _kill9_child.py`` starts a *zygote*: it imports smithers_tt, the demo and the
database drivers, prints ``ready`` and then obeys one JSON order per line on stdin:

* ``{"op": "spawn", "mode": ..., "url": ..., "run_id": ..., "workdir": ..., "step_delay": ...}``
  forks a new process for one role and prints its pid. The zygote never opens a database, so
  every forked process starts with no connection, no event loop and no state of any run: a
  fresh process that skipped only the imports.
* ``{"op": "reap", "pid": ...}`` waits for that process and prints its exit code (children
  stay zombies until reaped, so a pid is never reused while the parent may still kill it).

Roles (``mode``):

* ``run``: creates ``WORKDIR/started-run`` and runs the workflow as run ``run_id`` (the parent
  kills it at a random moment);
* ``resume``: resumes run ``run_id`` (or, when the kill came before the run was even created,
  runs it anew under that id).

Both build the same workflow (the demo with a flaky researcher and an invalid first draft, so
retries and schema correction happen), with every agent wrapped to log:

* ``WORKDIR/calls-<mode>``: one line per agent call, ``node attempt correction_turn``;
* ``WORKDIR/acks-<mode>``: one line per acknowledged checkpoint, written right after
  ``await on_checkpoint(...)`` returned to an agent, or after the engine reported a checkpoint
  frame (the final checkpoint an agent returns is published by the engine):
  ``node iteration attempt sequence content_hash``.

Each line is fsynced before the agent continues. At the end a role writes its run's status and
output to ``WORKDIR/result-<mode>.json`` (its traceback to ``error-<mode>.txt`` if it fails).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from dataclasses import replace
from typing import Any

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.engine import GenerateRequest, as_agent

try:  # what opening a PostgreSQL URL imports, so that a forked role does not pay for it
    import psycopg  # noqa: F401
    import sqlalchemy.dialects.postgresql.psycopg  # noqa: F401
except ImportError:  # pragma: no cover - SQLite-only environments
    pass

STEPS = 4
INPUT = {"topic": "termite"}


class Log:
    """An append-only log file whose every line is on disk before ``write`` returns."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, *fields: Any) -> None:
        os.write(self.fd, (" ".join(map(str, fields)) + "\n").encode())
        os.fsync(self.fd)


class Logged:
    """Wraps a demo agent: same id and declarations, logs calls and acknowledgements."""

    def __init__(self, inner: Any, calls: Log, acks: Log) -> None:
        self.inner = inner
        self.id = inner.id
        self.checkpoint_formats = inner.checkpoint_formats
        self.checkpoint_capabilities = inner.checkpoint_capabilities
        self.calls, self.acks = calls, acks

    async def generate(self, request: GenerateRequest) -> Any:
        self.calls.write(request.node_id, request.attempt, request.correction_turn)
        publish = request.on_checkpoint

        async def on_checkpoint(checkpoint: st.AgentCheckpoint, *args: Any) -> Any:
            ref = await publish(checkpoint, *args)
            self.acks.write(ref.node_id, ref.iteration, ref.attempt, ref.sequence, ref.content_hash)
            return ref

        return await self.inner.generate(replace(request, on_checkpoint=on_checkpoint))


def build(workdir: str, mode: str, step_delay: float) -> tuple[st.Workflow, Log]:
    """The demo workflow with logged agents (same definition, so the same signature)."""
    calls = Log(os.path.join(workdir, f"calls-{mode}"))
    acks = Log(os.path.join(workdir, f"acks-{mode}"))
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True, steps=STEPS, step_delay=step_delay)
    for task in wf.tasks.values():
        task.agent = as_agent(Logged(task.agent.target, calls, acks))
    return wf, acks


def role(order: dict[str, Any]) -> None:
    """Run or resume the run, as ordered, and write the result file."""
    mode, url, run_id, workdir = order["mode"], order["url"], order["run_id"], order["workdir"]
    wf, acks = build(workdir, mode, float(order["step_delay"]))

    def on_event(frame: Any) -> None:
        if frame.kind == "checkpoint":
            acks.write(
                frame.node_id, frame.iteration, frame.attempt, frame.sequence, frame.content_hash
            )

    # The trials' parent migrated the database already; the reference run migrates its own.
    db = st.connect(url, migrate_schema=bool(order.get("migrate")))
    fresh = False
    if mode == "run":
        with open(os.path.join(workdir, "started-run"), "w"):
            pass
        run = db.run(wf, INPUT, run_id=run_id, on_event=on_event)
    else:
        try:
            db.store.get_run(run_id)
        except st.RunNotFound:  # killed before the run was created: start it again
            fresh = True
            run = db.run(wf, INPUT, run_id=run_id, on_event=on_event)
        else:
            run = db.resume(run_id, wf, on_event=on_event)
    result = {"status": run.status, "output": run.output, "error": run.error, "fresh": fresh}
    db.close()
    path = os.path.join(workdir, f"result-{mode}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)


def spawn(order: dict[str, Any]) -> int:
    """Fork a process for one role; in the child, never return."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        log = os.open(
            os.path.join(order["workdir"], f"output-{order['mode']}"),
            os.O_WRONLY | os.O_CREAT | os.O_APPEND,
            0o644,
        )
        os.dup2(devnull, 0)  # the zygote's orders are not for this process
        os.dup2(log, 1)
        os.dup2(log, 2)
        role(order)
        code = 0
    except BaseException:
        with open(os.path.join(order["workdir"], f"error-{order['mode']}.txt"), "w") as f:
            f.write(traceback.format_exc())
    finally:
        os._exit(code)


def main() -> None:
    print("ready", flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        if order["op"] == "spawn":
            print(spawn(order), flush=True)
        elif order["op"] == "reap":
            _, status = os.waitpid(order["pid"], 0)
            print(os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    main()
