"""Schema correction: an invalid output asks the agent again within the same attempt, resuming
from that attempt's own newest checkpoint, within a budget, and never from anyone else's."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

import smithers_tt as st
from smithers_tt import GenerateRequest, GenerateResult, Workflow

from ._workflows import ScriptedAgent, refs, state


class Answer(BaseModel):
    title: str
    n: int


def test_schema_correction_stays_in_the_attempt_and_resumes_its_newest_checkpoint(
    db: st.Database,
) -> None:
    async def work(request: GenerateRequest) -> GenerateResult:
        if request.correction_turn == 0:
            await request.on_checkpoint(state({"draft": "outline"}))
            return GenerateResult({"n": "not a number"}, checkpoint=state({"draft": "v0"}))
        # The correction turn continues from this attempt's newest state and fixes it.
        draft = request.resume_checkpoint.payload
        draft["draft"] += "+fixed"
        return GenerateResult({"title": draft["draft"], "n": 7}, checkpoint=state(draft))

    agent = ScriptedAgent(work)
    wf = Workflow("correct")
    wf.task("t", agent=agent, output=Answer, schema_retries=2)

    run = db.run(wf)

    assert run.status == "finished", run.error
    assert run.output == {"t": {"title": "v0+fixed", "n": 7}}
    first, correction = agent.seen
    assert (first.schema_error, first.correction_turn) == (None, 0)
    assert correction.correction_turn == 1
    assert "does not match its schema" in (correction.schema_error or "")
    assert "title" in (correction.schema_error or "")
    assert (correction.mode, correction.payload) == ("resume", {"draft": "v0"})
    assert correction.attempt == first.attempt == 1
    assert correction.request is not first.request
    assert correction.checkpoint is not None
    # One attempt, three refs: progress, the invalid turn, the stored correction.
    assert [a.state for a in run.attempts("t")] == ["finished"]
    stored = refs(db, run.id, "t")
    assert [(r.attempt, r.sequence, r.purpose) for r in stored] == [
        (1, 0, "progress"),
        (1, 1, "turn"),
        (1, 2, "schema-correction"),
    ]
    assert db.store.load(stored[2]).payload == {"draft": "v0+fixed"}
    assert db.store.load(stored[1]).payload == {"draft": "v0"}  # the copy was the agent's


def test_schema_correction_gets_a_fresh_copy_on_every_turn(db: st.Database) -> None:
    async def work(request: GenerateRequest) -> GenerateResult:
        if request.correction_turn == 0:
            await request.on_checkpoint(state({"notes": ["a"]}))
            return GenerateResult({"wrong": True})
        request.resume_checkpoint.payload["notes"].append(f"turn {request.correction_turn}")
        if request.correction_turn == 1:
            return GenerateResult({"still": "wrong"})  # publishes nothing new
        return GenerateResult({"title": "ok", "n": 1})

    agent = ScriptedAgent(work)
    wf = Workflow("copies")
    wf.task("t", agent=agent, output=Answer, schema_retries=2)

    run = db.run(wf)

    assert run.status == "finished", run.error
    assert [s.payload for s in agent.seen] == [None, {"notes": ["a"]}, {"notes": ["a"]}]
    assert agent.seen[1].checkpoint is not agent.seen[2].checkpoint
    (only,) = refs(db, run.id)
    assert db.store.load(only).payload == {"notes": ["a"]}


def test_schema_correction_budget_exhausted_fails_the_attempt(db: st.Database) -> None:
    async def never_valid(request: GenerateRequest) -> GenerateResult:
        return GenerateResult(
            {"n": request.correction_turn}, checkpoint=state({"turn": request.correction_turn})
        )

    agent = ScriptedAgent(never_valid)
    wf = Workflow("budget")
    wf.task("t", agent=agent, output=Answer, schema_retries=2)

    run = db.run(wf)

    assert run.status == "failed"
    assert "does not match its schema" in (run.error or "")
    assert [(s.attempt, s.correction_turn) for s in agent.seen] == [(1, 0), (1, 1), (1, 2)]
    (attempt,) = run.attempts("t")
    assert (attempt.state, attempt.error_code) == ("failed", "output_invalid")
    assert [r.purpose for r in refs(db, run.id)] == [
        "turn",
        "schema-correction",
        "schema-correction",
    ]


@pytest.mark.parametrize("budget", [0, 1])
def test_schema_correction_budget_exhausted_retries_when_the_task_allows_it(
    db: st.Database, budget: int
) -> None:
    async def valid_on_attempt_two(request: GenerateRequest) -> GenerateResult:
        await request.on_checkpoint(
            state({"attempt": request.attempt, "turn": request.correction_turn})
        )
        if request.attempt == 1:
            return GenerateResult({"title": None})
        return GenerateResult({"title": "second", "n": 2})

    agent = ScriptedAgent(valid_on_attempt_two)
    wf = Workflow("budget-retry")
    wf.task("t", agent=agent, output=Answer, schema_retries=budget, retries=1)

    run = db.run(wf)

    assert run.status == "finished", run.error
    assert run.output == {"t": {"title": "second", "n": 2}}
    assert [(s.attempt, s.correction_turn) for s in agent.seen] == [
        *[(1, turn) for turn in range(budget + 1)],
        (2, 0),
    ]
    assert [a.state for a in run.attempts("t")] == ["failed", "finished"]
    # The retry resumes the failed attempt's newest state, in mode resume, as any retry does.
    assert agent.seen[-1].payload == {"attempt": 1, "turn": budget}
    assert agent.seen[-1].mode == "resume"


def test_schema_correction_never_sees_another_tasks_or_another_attempts_state(
    db: st.Database,
) -> None:
    # Two tasks of the same agent class and codec run in parallel; each needs a correction
    # in both of its attempts, and the other task publishes in between.
    both_published: dict[tuple[str, int], asyncio.Event] = {}

    def gate(attempt: int) -> asyncio.Event:
        return both_published.setdefault(("gate", attempt), asyncio.Event())

    published: dict[int, set[str]] = {1: set(), 2: set()}

    async def work(request: GenerateRequest) -> GenerateResult:
        me = {"node": request.node_id, "attempt": request.attempt}
        if request.correction_turn == 0:
            await request.on_checkpoint(state({**me, "step": "turn0"}))
            published[request.attempt].add(request.node_id)
            if len(published[request.attempt]) == 2:
                gate(request.attempt).set()
            await asyncio.wait_for(gate(request.attempt).wait(), timeout=10)
            return GenerateResult({"bad": True}, checkpoint=state({**me, "step": "answer"}))
        if request.attempt == 1:
            raise RuntimeError("fail attempt 1 after its correction turn")
        return GenerateResult({"title": request.node_id, "n": request.attempt})

    agents = {name: ScriptedAgent(work) for name in ("a", "b")}
    wf = Workflow("isolation")
    for name, agent in agents.items():
        wf.task(name, agent=agent, output=Answer, retries=1)

    run = db.run(wf)

    assert run.status == "finished", run.error
    assert run.output == {"a": {"title": "a", "n": 2}, "b": {"title": "b", "n": 2}}
    for name, agent in agents.items():
        corrections = [s for s in agent.seen if s.correction_turn > 0]
        assert [(s.attempt, s.mode, s.payload) for s in corrections] == [
            (1, "resume", {"node": name, "attempt": 1, "step": "answer"}),
            (2, "resume", {"node": name, "attempt": 2, "step": "answer"}),
        ]
        assert [a.state for a in run.attempts(name)] == ["failed", "finished"]


def test_schema_correction_without_any_state_gets_no_checkpoint(db: st.Database) -> None:
    # Another task publishes while this one (which never publishes) is being corrected.
    published = asyncio.Event()

    async def noisy(request: GenerateRequest) -> str:
        await request.on_checkpoint(state({"owner": "noisy"}))
        published.set()
        return "noise"

    async def quiet(request: GenerateRequest) -> GenerateResult:
        await asyncio.wait_for(published.wait(), timeout=10)
        if request.correction_turn == 0:
            return GenerateResult({"n": "x"})
        return GenerateResult({"title": "quiet", "n": 0})

    quiet_agent = ScriptedAgent(quiet)
    wf = Workflow("stateless-correction")
    wf.task("noisy", agent=ScriptedAgent(noisy))
    wf.task("quiet", agent=quiet_agent, output=Answer)

    run = db.run(wf)

    assert run.status == "finished", run.error
    assert [(s.correction_turn, s.payload, s.mode) for s in quiet_agent.seen] == [
        (0, None, None),
        (1, None, None),
    ]
    assert refs(db, run.id, "quiet") == []


def test_demo_writer_is_corrected_from_its_own_checkpoint(db: st.Database) -> None:
    from smithers_tt.demo import demo_workflow

    wf, agents = demo_workflow(invalid_first_draft=True)

    run = db.run(wf, {"topic": "ant"})

    assert run.status == "finished", run.error
    assert run.output["write"]["title"] == "What we know about the ant"
    assert [a.state for a in run.attempts("write")] == ["finished"]
    assert agents.writer.calls == 2
    final = [r for r in refs(db, run.id, "write") if r.purpose == "schema-correction"]
    assert len(final) == 1
    revisions = db.store.load(final[0]).payload["revisions"]
    assert revisions[0] == "first draft, no title yet"
    assert revisions[1].startswith("fixed: ")


def test_schema_correction_resumes_exactly_what_was_stored(db: st.Database) -> None:
    # The agent changes its state while its publication is in flight: the correction turn
    # must get the state that was stored, not the agent's later edits.
    async def work(request: GenerateRequest) -> GenerateResult:
        if request.correction_turn == 0:
            live = {"v": "stored"}
            publishing = asyncio.create_task(request.on_checkpoint(state(live)))
            await asyncio.sleep(0)  # the publication has encoded the state and is in flight
            live["v"] = "edited while in flight"
            await publishing
            return GenerateResult({"n": "bad"})
        return GenerateResult({"title": request.resume_checkpoint.payload["v"], "n": 1})

    agent = ScriptedAgent(work)
    wf = Workflow("in-flight")
    wf.task("t", agent=agent, output=Answer)

    run = db.run(wf)

    assert run.status == "finished", run.error
    (stored,) = refs(db, run.id)
    assert db.store.load(stored).payload == {"v": "stored"}
    assert agent.seen[1].payload == {"v": "stored"}
    assert run.output == {"t": {"title": "stored", "n": 1}}
