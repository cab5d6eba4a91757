"""Build the demo database: one run of each kind a newcomer should see.

Used by ``smithers-tt demo``, the notebooks and Binder's ``postBuild``. Deterministic and
offline; takes a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.database import Database
from smithers_tt.demo.agents import NOTES
from smithers_tt.demo.workflow import demo_workflow
from smithers_tt.engine import run_sync


@dataclass(frozen=True)
class DemoRun:
    """One run the demo made, and what it shows."""

    label: str
    """What it shows: also its label ``case`` (``smithers-tt runs --label case=retry``)."""
    run_id: str
    story: str


def case(label: str) -> dict[str, str]:
    """The labels of the demo run that shows ``label``."""
    return {"case": label}


Step = Callable[[str], None]


async def _cancelled(db: Database) -> str:
    wf, _ = demo_workflow(step_delay=0.15)
    ids: list[str] = []
    task = asyncio.create_task(
        db.arun(
            wf,
            {"topic": "ant"},
            cancel_grace=1.0,
            on_event=lambda f: ids.append(f.run_id),
            labels=case("cancelled"),
        )
    )
    while not ids or len(ids) < 4:
        await asyncio.sleep(0.02)
    await asyncio.to_thread(db.cancel, ids[0])
    await task
    return ids[0]


async def _interrupted(db: Database) -> str:
    """Start a run and drop it mid-flight, as a crash would, leaving it ``running``."""
    wf, _ = demo_workflow(step_delay=0.1)
    ids: list[str] = []
    task = asyncio.create_task(
        db.arun(
            wf, {"topic": "wasp"}, on_event=lambda f: ids.append(f.run_id), labels=case("resumed")
        )
    )
    while len(ids) < 4:
        await asyncio.sleep(0.02)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return ids[0]


def build_demo(db: Database, *, step: Step | None = None) -> list[DemoRun]:
    """Create the demo runs in ``db``; ``step(label)`` is called before each one."""
    say = step or (lambda _label: None)
    made: list[DemoRun] = []

    say("clean run")
    wf, _ = demo_workflow()
    clean = db.run(wf, {"topic": "bee"}, labels=case("clean"))
    made.append(DemoRun("clean", clean.id, "research -> write -> review, first time right"))

    say("retry that resumes")
    wf, _ = demo_workflow(flaky=True)
    flaky = db.run(wf, {"topic": "bee"}, labels=case("retry"))
    made.append(
        DemoRun(
            "retry", flaky.id, "research fails after 2 notes; attempt 2 resumes from its checkpoint"
        )
    )

    say("schema correction")
    wf, _ = demo_workflow(invalid_first_draft=True)
    fixed = db.run(wf, {"topic": "bee"}, labels=case("schema-correction"))
    made.append(
        DemoRun(
            "schema-correction",
            fixed.id,
            "the first draft lacks a title; a correction turn fixes it",
        )
    )

    say("cancelled run")
    cancelled = run_sync(_cancelled(db))
    made.append(DemoRun("cancelled", cancelled, "cancelled mid-research; its notes are kept"))

    say("interrupted and resumed")
    crashed = run_sync(_interrupted(db))
    wf, _ = demo_workflow()
    db.resume(crashed, wf)
    made.append(
        DemoRun(
            "resumed", crashed, "dropped mid-run, resumed under a new epoch from its checkpoints"
        )
    )

    say("fork with an edited checkpoint")
    snap = db.snapshot(clean.id)
    research_done = max(
        f.frame_no
        for f in clean.frames()
        if f.kind == "node_state" and f.node_id == "research" and f.state == "finished"
    )
    notes = dict(snap.payload("research") or {})
    notes["notes"] = [
        "Edited by a person: bees can recognise human faces.",
        *notes.get("notes", [])[1:],
    ]
    child = db.fork(
        clean.id,
        research_done,
        checkpoints={"research": AgentCheckpoint(NOTES, 1, notes)},
        labels=case("fork"),  # over the case=clean it inherits
    )
    wf, _ = demo_workflow()
    db.resume(child.id, wf)
    made.append(
        DemoRun(
            "fork",
            child.id,
            f"forked from the clean run at frame {research_done} with edited notes",
        )
    )

    say("replay")
    wf, _ = demo_workflow()
    replayed = db.replay(clean.id, research_done, wf, reset=["write"], labels=case("replay"))
    made.append(
        DemoRun(
            "replay",
            replayed.id,
            f"replayed from frame {research_done}: write and review run again",
        )
    )
    return made
