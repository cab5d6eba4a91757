"""Breakpoints and questions to a person: a run pauses durably before or after a node, at a
task's interrupt, or when its agent asks; it goes on with an answer, edited checkpoints,
skipped nodes, one step at a time, or not at all (abort), in this process or another."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint, GenerateRequest
from smithers_tt.checkpoint import MAX_CHECKPOINT_BYTES
from smithers_tt.errors import (
    CheckpointTooLarge,
    ConcurrencyError,
    InvalidArgument,
    OutputInvalid,
)

CODEC = "test.notes"


class Asker:
    """Checkpoints its work, then asks a person; what it returns says what it was told."""

    id = "asker"
    checkpoint_formats = [st.CheckpointFormat(CODEC, versions=[1])]
    checkpoint_capabilities = [st.CheckpointCapability(CODEC, versions=[1], modes=["resume"])]

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def generate(self, request: GenerateRequest) -> Any:
        resumed = request.resume_checkpoint.payload if request.resume_checkpoint else None
        self.calls.append({"attempt": request.attempt, "resumed": resumed})
        state = resumed or {"notes": []}
        if not state["notes"]:
            state["notes"].append("gathered")
            await request.on_checkpoint(AgentCheckpoint(CODEC, 1, state))
        colour = await request.ask({"question": "which colour?", "notes": state["notes"]})
        return {"notes": state["notes"], "colour": colour}


class Counter:
    """A plain agent that counts its calls and returns what it needed."""

    def __init__(self, name: str) -> None:
        self.id = name
        self.calls = 0
        self.answers: list[Any] = []

    async def generate(self, request: GenerateRequest) -> Any:
        self.calls += 1
        self.answers.append(request.answer)
        return {"from": self.id, "needs": sorted(request.needs)}


def _flow(asker: Asker | None = None) -> tuple[st.Workflow, dict[str, Any]]:
    agents = {"plan": Counter("plan"), "ask": asker or Asker(), "write": Counter("write")}
    wf = st.Workflow("pauses")
    wf.task("plan", agent=agents["plan"])
    wf.task("ask", agent=agents["ask"], needs=["plan"])
    wf.task("write", agent=agents["write"], needs=["ask"])
    return wf, agents


def _kinds(run: st.Run) -> list[str]:
    return [f.kind for f in run.frames()]


def test_break_before_pauses_durably_before_the_node_runs(db: st.Database, db_url: str) -> None:
    wf, agents = _flow()
    run = db.run(wf, {"topic": "bees"}, break_before=["write"])
    assert run.status == "paused"  # the asker paused first: before "write" comes later
    assert run.pause is not None and run.pause.reason == "ask"
    run = db.resume(run.id, wf, answer="blue")
    assert run.status == "paused"
    assert (run.pause.reason, run.pause.when, run.pause.node_id) == (
        "breakpoint",
        "before",
        "write",
    )
    assert agents["write"].calls == 0
    with st.connect(db_url) as other:  # another process's view: the pause is in the database
        assert [r.id for r in other.runs(status="paused")] == [run.id]
        assert other.get_run(run.id).pause.node_id == "write"
    run = db.resume(run.id, wf)
    assert run.status == "finished" and agents["write"].calls == 1
    assert run.output["ask"] == {"notes": ["gathered"], "colour": "blue"}


def test_ask_pauses_with_the_question_and_the_answer_reaches_the_agent(db: st.Database) -> None:
    wf, agents = _flow()
    run = db.run(wf, {"topic": "bees"})
    assert run.status == "paused"
    assert run.pause.question == {"question": "which colour?", "notes": ["gathered"]}
    assert run.pause.node_id == "ask" and agents["write"].calls == 0
    assert run.snapshot().status == "paused"
    run = db.resume(run.id, wf, answer={"colour": "blue"})
    assert run.status == "finished"
    assert run.output["ask"]["colour"] == {"colour": "blue"}
    # The second attempt resumed from the checkpoint made before the question.
    assert agents["ask"].calls[1] == {"attempt": 2, "resumed": {"notes": ["gathered"]}}
    assert agents["plan"].calls == 1


def test_break_after_pauses_once_the_node_finished(db: st.Database) -> None:
    wf, agents = _flow()
    run = db.run(wf, None, break_after=["plan"])
    assert (run.status, run.pause.when, run.pause.node_id) == ("paused", "after", "plan")
    assert [n.node_id for n in run.nodes() if n.state == "finished"] == ["plan"]
    run = db.resume(run.id, wf)
    assert run.pause.reason == "ask" and agents["plan"].calls == 1


def test_task_interrupt_asks_before_the_task_and_gives_the_agent_the_answer(
    db: st.Database,
) -> None:
    agent = Counter("review")
    wf = st.Workflow("interrupted")
    wf.task("draft", agent=Counter("draft"))
    wf.task(
        "review",
        agent=agent,
        needs=["draft"],
        interrupt=lambda ctx: {"approve": ctx.outputs["draft"]["from"]},
    )
    run = db.run(wf)
    assert (run.pause.reason, run.pause.node_id) == ("interrupt", "review")
    assert run.pause.question == {"approve": "draft"}
    run = db.resume(run.id, wf, answer="approved")
    assert run.status == "finished" and agent.answers == ["approved"]


def test_interrupt_must_be_before_after_or_a_function() -> None:
    with pytest.raises(InvalidArgument, match="interrupt of task 'x'"):
        st.Workflow("w").task("x", agent=Counter("x"), interrupt="sometimes")


def test_unknown_breakpoint_is_refused_before_the_run_is_created(db: st.Database) -> None:
    wf, _ = _flow()
    with pytest.raises(InvalidArgument, match="'nope', which is not a task"):
        db.run(wf, break_before=["nope"])
    assert db.runs() == []


def test_step_runs_one_node_then_pauses_again(db: st.Database) -> None:
    wf, agents = _flow()
    run = db.run(wf, None, break_before=["plan"])
    assert run.pause.node_id == "plan" and agents["plan"].calls == 0
    run = db.resume(run.id, wf, step=True)
    assert (run.pause.reason, run.pause.node_id) == ("step", "plan")
    assert agents["plan"].calls == 1 and agents["ask"].calls == []
    run = db.resume(run.id, wf)
    assert run.pause.reason == "ask"


def test_skip_marks_a_node_done_with_the_given_output(db: st.Database) -> None:
    wf, agents = _flow()
    run = db.run(wf, None, break_before=["ask"])
    run = db.resume(run.id, wf, skip={"ask": {"colour": "green"}})
    assert run.status == "finished"
    assert agents["ask"].calls == []
    assert run.output["ask"] == {"colour": "green"}


def test_skip_with_an_output_the_schema_refuses_writes_nothing(db: st.Database) -> None:
    from pydantic import BaseModel

    class Colour(BaseModel):
        colour: str

    wf = st.Workflow("typed")
    wf.task("pick", agent=Counter("pick"), output=Colour)
    run = db.run(wf, None, break_before=["pick"])
    frames = run.record.clock
    with pytest.raises(OutputInvalid, match="does not match its schema"):
        db.resume(run.id, wf, skip={"pick": {"hue": 3}})
    assert db.get_run(run.id).status == "paused" and db.get_run(run.id).record.clock == frames


def test_abort_cancels_the_paused_run(db: st.Database) -> None:
    wf, agents = _flow()
    run = db.run(wf)
    run = db.resume(run.id, wf, abort=True)
    assert run.status == "cancelled" and agents["write"].calls == 0
    assert {n.node_id: n.state for n in run.nodes()}["ask"] == "cancelled"


def test_edited_checkpoint_is_what_the_next_attempt_resumes_from(db: st.Database) -> None:
    asker = Asker()
    wf, _ = _flow(asker)
    run = db.run(wf)
    edited = AgentCheckpoint(CODEC, 1, {"notes": ["edited by a person"]})
    run = db.resume(run.id, wf, answer="red", checkpoints={"ask": edited})
    assert run.status == "finished"
    assert asker.calls[-1]["resumed"] == {"notes": ["edited by a person"]}
    assert run.output["ask"] == {"notes": ["edited by a person"], "colour": "red"}


@pytest.mark.parametrize(
    "edit",
    [
        AgentCheckpoint("other.codec", 1, {"notes": []}),
        AgentCheckpoint(CODEC, 2, {"notes": []}),
    ],
    ids=["codec", "version"],
)
def test_edit_the_agent_does_not_accept_is_refused_and_nothing_is_written(
    db: st.Database, edit: AgentCheckpoint
) -> None:
    wf, _ = _flow()
    run = db.run(wf)
    before = run.frames()
    with pytest.raises(InvalidArgument, match="does not accept in mode 'resume'"):
        db.resume(run.id, wf, answer="red", checkpoints={"ask": edit})
    again = db.get_run(run.id)
    assert again.status == "paused" and again.frames() == before


def test_an_answer_above_16_mib_is_refused_and_nothing_is_written(db: st.Database) -> None:
    wf, _ = _flow()
    run = db.run(wf)
    before = run.frames()
    with pytest.raises(CheckpointTooLarge, match="the answer is 16777218 bytes") as caught:
        db.resume(run.id, wf, answer="x" * MAX_CHECKPOINT_BYTES)  # +2 quotes in JSON
    assert "nothing was written" in caught.value.message
    again = db.get_run(run.id)
    assert again.status == "paused" and again.frames() == before
    assert db.resume(run.id, wf, answer="blue").status == "finished"


def test_an_answer_above_the_runs_lowered_limit_is_refused(db: st.Database) -> None:
    wf, _ = _flow()
    run = db.run(wf, max_checkpoint_bytes=4096)
    before = run.frames()
    with pytest.raises(CheckpointTooLarge, match="above the limit of 4096 bytes"):
        db.continue_run(run.id, wf, answer={"colour": "x" * 5000})
    assert db.get_run(run.id).frames() == before


def test_step_and_abort_together_are_refused_and_the_run_stays_paused(db: st.Database) -> None:
    wf, _ = _flow()
    run = db.run(wf)
    before = run.frames()
    with pytest.raises(InvalidArgument, match="abort cancels the run"):
        db.resume(run.id, wf, step=True, abort=True)
    with pytest.raises(InvalidArgument, match="ask for one of them"):
        db.continue_run(run.id, wf, step=True, abort=True)
    again = db.get_run(run.id)
    assert again.status == "paused" and again.frames() == before


def test_a_question_above_the_runs_limit_fails_the_task_instead_of_pausing(
    db: st.Database,
) -> None:
    class Verbose(Asker):
        async def generate(self, request: GenerateRequest) -> Any:
            return await request.ask({"question": "which?", "context": "x" * 5000})

    wf, _ = _flow(Verbose())
    run = db.run(wf, max_checkpoint_bytes=4096)
    assert run.status == "failed" and "run_paused" not in _kinds(run)
    assert "question of task 'ask' is" in run.error
    assert "above the limit of 4096 bytes" in run.error


def test_continue_options_on_a_run_that_is_not_paused_are_refused(db: st.Database) -> None:
    wf, _ = _flow()
    run = db.run(wf)
    run = db.resume(run.id, wf, answer="blue")
    assert run.status == "finished"
    with pytest.raises(InvalidArgument, match="not paused"):
        db.resume(run.id, wf, answer="again")


def test_a_paused_run_cannot_be_claimed_only_continued(db: st.Database) -> None:
    wf, _ = _flow()
    run = db.run(wf)
    with pytest.raises(InvalidArgument, match="is paused; continue it"):
        db.store.claim_run(run.id, "someone")


def test_the_pausing_process_is_fenced_out(db: st.Database) -> None:
    wf, _ = _flow()
    run = db.run(wf)
    first_owner = st.store.Fence(run.id, 1)
    assert not db.store.heartbeat(first_owner)
    with pytest.raises(st.FenceLost):
        db.store.set_node(first_owner, "write", 0, "running")


def test_second_continuer_under_the_same_pause_gets_a_clear_error(db: st.Database) -> None:
    wf, _ = _flow()
    run = db.run(wf)
    epoch = run.record.owner_epoch
    data = {"action": "continue", "answer": "blue"}
    db.store.continue_run(run.id, epoch, data)
    clock = db.get_run(run.id).record.clock
    with pytest.raises(ConcurrencyError, match=r"no longer paused.*nothing was written"):
        db.store.continue_run(run.id, epoch, data)
    assert db.get_run(run.id).record.clock == clock


def test_two_continuers_at_once_one_wins(db: st.Database, db_url: str) -> None:
    wf, _ = _flow()
    run = db.run(wf)
    gate = threading.Barrier(2)
    outcomes: list[Any] = []

    def go(answer: str) -> None:
        with st.connect(db_url) as mine:
            gate.wait()
            try:
                outcomes.append(mine.continue_run(run.id, answer=answer).status)
            except (ConcurrencyError, InvalidArgument) as error:
                outcomes.append(error)

    threads = [threading.Thread(target=go, args=(a,)) for a in ("blue", "red")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(map(str, outcomes)).count("queued") == 1
    (error,) = [o for o in outcomes if isinstance(o, Exception)]
    assert "paused" in str(error) and "nothing was written" in str(error)
    continued = [f for f in db.get_run(run.id).frames() if f.kind == "run_continued"]
    assert len(continued) == 1
