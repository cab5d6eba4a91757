"""A live checkpoint ref is checked against its frame on every read that follows it: resume,
a run's checkpoints, the debugger (its ref pages and the checkpoint a fork would edit) and a
task fork refuse with ``StoreCorrupt`` naming the run, the ref and ``smithers-tt verify``,
instead of handing out an older or another node's checkpoint, skipping the ref or starting
fresh (``verify()`` lists such refs: tests/store/test_damaged_rows.py). ``verify()`` also
lists checkpoint frames that contradict their content. Each test breaks real rows of a real
database with raw SQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import GenerateRequest, Workflow
from smithers_tt.engine import as_agent, fork_point
from smithers_tt.errors import StoreCorrupt
from smithers_tt.widgets import DebuggerModel
from tests.engine._workflows import CODEC, ScriptedAgent, capabilities, state

from ._support import execute

HINT = "smithers-tt verify"


def _frame_of(db: st.Database, run_id: str, node_id: str, sequence: int) -> int:
    """The frame number of a node's checkpoint ``sequence`` (attempt 1)."""
    (frame,) = [
        f.frame_no
        for f in db.store.frames(run_id, after=-1)
        if (f.kind, f.node_id, f.sequence) == ("checkpoint", node_id, sequence)
    ]
    return frame


def _agent() -> ScriptedAgent:
    async def work(request: GenerateRequest) -> Any:
        cp = request.resume_checkpoint
        return cp.payload if cp is not None else "fresh"

    return ScriptedAgent(work, consumes=capabilities((CODEC, [1], ["resume", "fork"])))


@pytest.fixture
def left(db: st.Database) -> tuple[str, Workflow, ScriptedAgent]:
    """A run left behind by a dead process: ``t`` (attempt 1, in progress) published
    checkpoints 0 and 1, then ``u`` (finished) published its checkpoint 0."""
    agent = _agent()
    wf = Workflow("refs")
    wf.task("t", agent=agent)
    wf.task("u", agent=agent)
    store = db.store
    record, fence = store.create_run(wf.name, None, workflow_hash=wf.signature(), owner_id="dead")
    t = store.start_attempt(fence, "t").key
    store.publish(fence, t, state({"t": 0}))
    store.publish(fence, t, state({"t": 1}))
    u = store.start_attempt(fence, "u").key
    store.publish(fence, u, state({"u": 0}))
    store.finish_attempt(fence, u, "finished", node_state="finished", output={"u": 0})
    return record.run_id, wf, agent


CORRUPTIONS: dict[str, Callable[[st.Database, str], int | None]] = {
    # what the newest ref of ``t`` (sequence 1) is made to name
    "frame_missing": lambda db, run_id: None,
    "not_a_checkpoint": lambda db, run_id: 0,  # the run_created frame
    "older_checkpoint": lambda db, run_id: _frame_of(db, run_id, "t", 0),
    "other_node": lambda db, run_id: _frame_of(db, run_id, "u", 0),
}


def _break(db: st.Database, run_id: str, corruption: str) -> int:
    """Break the newest ref of ``t`` as ``corruption`` says; return the frame it names."""
    own = _frame_of(db, run_id, "t", 1)
    target = CORRUPTIONS[corruption](db, run_id)
    if target is None:
        execute(
            db, "DELETE FROM tt_frame_rows WHERE run_id = :r AND frame_no = :f", r=run_id, f=own
        )
        return own
    execute(
        db,
        "UPDATE tt_checkpoint_refs SET frame_no = :f WHERE run_id = :r AND node_id = 't' "
        "AND sequence = 1",
        r=run_id,
        f=target,
    )
    return target


def _assert_refused(error: BaseException | str, run_id: str, frame_no: int) -> None:
    text = str(error)
    assert f"checkpoint ref t[0] attempt 1 sequence 1 of run {run_id!r}" in text
    assert f"names frame {frame_no}" in text
    assert HINT in text


def _debugger(db: st.Database, run_id: str) -> DebuggerModel:
    """The debugger on the run once it ended (it then opens on the newest frame's live rows)."""
    db.store.cancel_run(run_id)
    return DebuggerModel(db, run_id)


READS: dict[str, Callable[[st.Database, str, Workflow, ScriptedAgent], Any]] = {
    "run_checkpoint": lambda db, run_id, wf, agent: db.get_run(run_id).checkpoint("t"),
    "run_checkpoints": lambda db, run_id, wf, agent: db.get_run(run_id).checkpoints(),
    "task_fork": lambda db, run_id, wf, agent: fork_point(
        db.store, as_agent(agent), run_id, "t", 0, "v"
    ),
    "debugger_ref_page": lambda db, run_id, wf, agent: _debugger(db, run_id).ref_page(),
    "debugger_fork_editor": lambda db, run_id, wf, agent: _debugger(db, run_id).checkpoint_text(
        "t"
    ),
}
CASES = [
    (read, corruption)
    for read in READS
    for corruption in CORRUPTIONS
    # a frame gone leaves a gap in the history, which the debugger refuses before any ref
    if not (read.startswith("debugger") and corruption == "frame_missing")
]


@pytest.mark.parametrize(("read", "corruption"), CASES)
def test_reads_of_a_ref_that_disagrees_with_its_frame_refuse_with_store_corrupt(
    db: st.Database, left: tuple[str, Workflow, ScriptedAgent], read: str, corruption: str
) -> None:
    run_id, wf, agent = left
    if read == "task_fork":  # a task fork reads only finished attempts' refs
        execute(db, "UPDATE tt_attempts SET state = 'finished' WHERE run_id = :r", r=run_id)
    frame_no = _break(db, run_id, corruption)

    with pytest.raises(StoreCorrupt) as caught:
        READS[read](db, run_id, wf, agent)

    _assert_refused(caught.value, run_id, frame_no)


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_resume_of_a_ref_that_disagrees_with_its_frame_fails_without_calling_the_agent(
    db: st.Database, left: tuple[str, Workflow, ScriptedAgent], corruption: str
) -> None:
    run_id, wf, agent = left
    frame_no = _break(db, run_id, corruption)

    run = db.resume(run_id, wf)

    assert agent.calls == 0  # never an older checkpoint, another node's, or a fresh start
    assert run.status == "failed"
    _assert_refused(run.error or "", run_id, frame_no)


def test_a_healthy_run_reads_every_ref_and_verifies(
    db: st.Database, left: tuple[str, Workflow, ScriptedAgent]
) -> None:
    run_id, wf, agent = left
    assert db.get_run(run_id).checkpoint("t") == state({"t": 1})
    assert len(DebuggerModel(db, run_id).ref_page().refs) == 3
    assert db.verify().ok

    run = db.resume(run_id, wf)

    assert run.status == "finished", run.error
    assert [s.payload for s in agent.seen] == [{"t": 1}]


@pytest.mark.parametrize(
    ("change", "listed"),
    [
        ("codec = 'other'", "miscoded"),
        ("version = 2", "miscoded"),
        ("size_bytes = size_bytes + 1", "missized"),
    ],
)
def test_verify_reports_a_checkpoint_frame_that_contradicts_its_content(
    db: st.Database, left: tuple[str, Workflow, ScriptedAgent], change: str, listed: str
) -> None:
    run_id, _, _ = left
    frame_no = _frame_of(db, run_id, "t", 0)
    execute(
        db,
        f"UPDATE tt_frame_rows SET {change} WHERE run_id = :r AND frame_no = :f",  # noqa: S608
        r=run_id,
        f=frame_no,
    )

    report = db.verify()

    assert not report.ok
    assert getattr(report, listed) == [(run_id, frame_no)]
