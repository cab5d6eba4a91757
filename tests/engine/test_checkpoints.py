"""Checkpoints across attempts: retries resume, publication is durable before a retry, failed
attempts keep their state, resume copies are private, poisoned state is skipped, incompatible
state never hides compatible state, and bad publications write nothing."""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy.engine import Connection

import smithers_tt as st
from smithers_tt import (
    AgentCheckpoint,
    CheckpointInvalid,
    CheckpointPoisoned,
    GenerateRequest,
    GenerateResult,
    Retry,
    Workflow,
)
from smithers_tt.engine import as_agent, resume_point
from smithers_tt.errors import FormatNotDeclared, HistoryExhausted
from smithers_tt.store import CheckpointRef
from smithers_tt.store._frames import checkpoint_frame, frame_row
from smithers_tt.store.backend import _schema as S
from smithers_tt.store.reads import HISTORY_SCAN_BOUND

from ._workflows import (
    CODEC,
    ScriptedAgent,
    capabilities,
    count,
    formats,
    node_map,
    ref_key,
    refs,
    state,
)


def test_retry_resumes_from_the_newest_progress_checkpoint_of_the_failed_attempt(
    db: st.Database,
) -> None:
    async def work(request: GenerateRequest) -> GenerateResult:
        done = request.resume_checkpoint.payload["done"] if request.resume_checkpoint else []
        for step in range(len(done), 4):
            done = [*done, step]
            await request.on_checkpoint(state({"done": done}))
            if request.attempt == 1 and step == 1:
                raise ConnectionError("provider went away")
        return GenerateResult({"done": done})

    agent = ScriptedAgent(work)
    wf = Workflow("retry")
    wf.task("t", agent=agent, retry=Retry(count=2))

    run = db.run(wf)

    assert run.status == "finished", run.error
    assert run.output == {"t": {"done": [0, 1, 2, 3]}}
    first, second = agent.seen
    assert (first.attempt, first.payload, first.mode) == (1, None, None)
    assert second.attempt == 2
    assert second.mode == "resume"
    assert (second.codec, second.version, second.payload) == (CODEC, 1, {"done": [0, 1]})
    attempts = run.attempts("t")
    assert [a.state for a in attempts] == ["failed", "finished"]
    assert attempts[0].resumed_from is None
    assert attempts[1].resumed_from == (run.id, "t", 0, 1, 1)
    assert "ConnectionError" in (attempts[0].error or "")
    # Attempt 2 continued at step 2: no step was done twice.
    assert [(r.attempt, r.sequence) for r in refs(db, run.id)] == [(1, 0), (1, 1), (2, 0), (2, 1)]


def test_on_checkpoint_is_durable_before_it_returns_and_before_a_thrown_retry(
    db: st.Database, db_url: str
) -> None:
    observer = st.connect(db_url)  # a separate connection pool: sees only committed data
    observed: list[tuple[CheckpointRef, bytes, bool]] = []

    async def work(request: GenerateRequest) -> str:
        if request.attempt == 2:
            return "ok"
        for step in range(3):
            cp = state({"step": step, "attempt": request.attempt})
            ref = await request.on_checkpoint(cp)
            data = observer.store.read_content(ref.content_hash)  # verifies hash and size
            listed = observer.store.list_refs(request.run_id, node_id="t", limit=100).items
            observed.append((ref, data, ref in listed))
        raise TimeoutError("the model timed out after publishing")

    try:
        wf = Workflow("durable-publish")
        wf.task("t", agent=ScriptedAgent(work), retries=1)
        run = db.run(wf)
    finally:
        observer.close()

    assert run.status == "finished", run.error
    assert [ref.sequence for ref, _, _ in observed] == [0, 1, 2]
    for ref, data, listed in observed:
        assert listed
        assert data == state({"step": ref.sequence, "attempt": 1}).encode().data
    # The failed attempt keeps every checkpoint it published, readable and verified.
    assert [a.state for a in run.attempts("t")] == ["failed", "finished"]
    kept = [r for r in refs(db, run.id, "t") if r.attempt == 1]
    assert [db.store.load(r).payload for r in kept] == [
        {"step": 0, "attempt": 1},
        {"step": 1, "attempt": 1},
        {"step": 2, "attempt": 1},
    ]


def test_failed_attempts_keep_their_checkpoints_when_the_task_fails(db: st.Database) -> None:
    async def work(request: GenerateRequest) -> None:
        await request.on_checkpoint(state({"attempt": request.attempt}))
        raise RuntimeError(f"attempt {request.attempt} failed")

    wf = Workflow("all-fail")
    wf.task("t", agent=ScriptedAgent(work), retries=2)

    run = db.run(wf)

    assert run.status == "failed"
    assert "attempt 3 failed" in (run.error or "")
    assert [a.state for a in run.attempts("t")] == ["failed"] * 3
    kept = refs(db, run.id, "t")
    assert [(r.attempt, db.store.load(r).payload) for r in kept] == [
        (1, {"attempt": 1}),
        (2, {"attempt": 2}),
        (3, {"attempt": 3}),
    ]
    node = node_map(db, run.id)[("t", 0)]
    assert (node.state, node.last_attempt) == ("failed", 3)


def test_resume_checkpoint_is_a_fresh_deep_copy_for_each_call(db: st.Database) -> None:
    async def work(request: GenerateRequest) -> str:
        if request.attempt == 1:
            await request.on_checkpoint(state({"items": [1], "meta": {"k": "v"}}))
            raise RuntimeError("first attempt fails")
        # Attempts 2 and 3 vandalise their copy (and publish nothing).
        payload = request.resume_checkpoint.payload
        payload["items"].append(99)
        payload["meta"]["k"] = "changed"
        payload["new"] = True
        if request.attempt == 2:
            raise RuntimeError("second attempt fails too")
        return "done"

    agent = ScriptedAgent(work)
    wf = Workflow("copies")
    wf.task("t", agent=agent, retries=2)

    run = db.run(wf)

    assert run.status == "finished", run.error
    original = {"items": [1], "meta": {"k": "v"}}
    second, third = agent.seen[1:]
    assert second.payload == original
    assert third.payload == original  # the mutation of attempt 2's copy did not leak
    assert second.checkpoint is not third.checkpoint
    (ref,) = refs(db, run.id)
    assert db.store.load(ref).payload == original
    assert db.store.read_content(ref.content_hash) == state(original).encode().data
    assert [a.resumed_from for a in run.attempts("t")][1:] == [ref_key(ref), ref_key(ref)]


@pytest.mark.parametrize("poisoned_attempt", [1, 2])
def test_checkpoint_poisoned_makes_the_next_attempt_skip_that_attempts_checkpoints(
    db: st.Database, poisoned_attempt: int
) -> None:
    async def work(request: GenerateRequest) -> str:
        await request.on_checkpoint(state({"by": request.attempt}))
        if request.attempt == poisoned_attempt:
            raise CheckpointPoisoned("my state is corrupt: do not resume it")
        if request.attempt < poisoned_attempt:
            raise RuntimeError("ordinary failure")
        return "done"

    agent = ScriptedAgent(work)
    wf = Workflow("poison")
    wf.task("t", agent=agent, retries=3)

    run = db.run(wf)

    assert run.status == "finished", run.error
    seen = [(s.attempt, s.payload, s.mode) for s in agent.seen]
    if poisoned_attempt == 1:
        # Attempt 1's only state is poisoned: attempt 2 starts fresh.
        assert seen == [(1, None, None), (2, None, None)]
        assert run.attempts("t")[1].resumed_from is None
    else:
        # Attempt 2 resumed attempt 1's state and poisoned its own: attempt 3 skips it.
        assert seen == [(1, None, None), (2, {"by": 1}, "resume"), (3, {"by": 1}, "resume")]
        assert run.attempts("t")[2].resumed_from == (run.id, "t", 0, 1, 0)
    attempts = run.attempts("t")
    assert [a.discard_resume for a in attempts] == [
        a.key.attempt == poisoned_attempt for a in attempts
    ]
    # Poisoned state is still kept (for people and time travel), just never resumed.
    assert {r.attempt for r in refs(db, run.id)} == {a.key.attempt for a in attempts}


def test_incompatible_newer_checkpoint_does_not_hide_an_older_compatible_one(
    db: st.Database,
) -> None:
    async def work(request: GenerateRequest) -> str:
        if request.attempt == 1:
            await request.on_checkpoint(state({"v1": "old but readable"}, version=1))
            await request.on_checkpoint(state({"v2": "new, unreadable"}, version=2))
            raise RuntimeError("fail after publishing v1 then v2")
        return "resumed"

    agent = ScriptedAgent(
        work,
        produces=formats((CODEC, [1, 2])),
        consumes=capabilities((CODEC, [1], ["resume"])),
    )
    wf = Workflow("versions")
    wf.task("t", agent=agent, retries=1)

    run = db.run(wf)

    assert run.status == "finished", run.error
    retry = agent.seen[1]
    assert (retry.codec, retry.version, retry.payload, retry.mode) == (
        CODEC,
        1,
        {"v1": "old but readable"},
        "resume",
    )
    assert run.attempts("t")[1].resumed_from == (run.id, "t", 0, 1, 0)


def _prepare_history(db: st.Database, wf: Workflow, incompatible: int) -> tuple[str, CheckpointRef]:
    """A run left behind by a dead process: attempt 1 of ``t`` published one compatible v1
    checkpoint and then ``incompatible`` v2 ones (written in bulk with the store's own tables
    and row shapes, to be quick)."""
    store = db.store
    record, fence = store.create_run(wf.name, None, workflow_hash=wf.signature(), owner_id="dead")
    key = store.start_attempt(fence, "t").key
    first = store.publish(fence, key, state({"v": 1}, version=1), agent_id="scripted")
    encoded = [state({"v2": i}, version=2).encode() for i in range(incompatible)]
    contents = [
        {
            "content_hash": e.content_hash,
            "data": e.data,
            "size_bytes": e.size,
            "created_at_ms": first.created_at_ms,
        }
        for e in encoded
    ]
    clock = store.get_run(key.run_id).clock
    frames = [
        frame_row(
            checkpoint_frame(
                replace(first, sequence=i + 1, content_hash=e.content_hash, version=2),
                key.run_id,
                clock + 1 + i,
                {"size": e.size},
            )
        )
        for i, e in enumerate(encoded)
    ]
    rows = [
        {"run_id": key.run_id, "node_id": "t", "iteration": 0, "attempt": 1}
        | {"sequence": f["sequence"], "frame_no": f["frame_no"]}
        for f in frames
    ]
    a = S.attempts

    def bulk(conn: Connection) -> None:
        conn.execute(S.contents.insert(), contents)
        conn.execute(S.frame_rows.insert(), frames)
        conn.execute(S.refs.insert(), rows)
        conn.execute(
            a.update()
            .where(a.c.run_id == key.run_id, a.c.node_id == "t", a.c.attempt == 1)
            .values(next_sequence=incompatible + 1)
        )
        conn.execute(
            S.runs.update().where(S.runs.c.run_id == key.run_id).values(clock=clock + len(frames))
        )

    db.engine.transaction(bulk)
    return record.run_id, first


def _history_agent() -> tuple[ScriptedAgent, Workflow]:
    async def work(request: GenerateRequest) -> Any:
        return request.resume_checkpoint.payload if request.resume_checkpoint else "fresh"

    agent = ScriptedAgent(
        work,
        produces=formats((CODEC, [1, 2])),
        consumes=capabilities((CODEC, [1], ["resume"])),
    )
    wf = Workflow("history")
    wf.task("t", agent=agent)
    return agent, wf


def test_resume_finds_compatible_state_when_it_is_within_the_scan_bound(
    db: st.Database,
) -> None:
    agent, wf = _history_agent()
    # The compatible ref is the last one a bounded scan looks at.
    run_id, compatible = _prepare_history(db, wf, HISTORY_SCAN_BOUND - 1)
    assert resume_point(db.store, as_agent(agent), run_id, "t", 0).ref == compatible

    run = db.resume(run_id, wf)

    assert run.status == "finished", run.error
    assert run.output == {"t": {"v": 1}}
    assert [(s.attempt, s.payload, s.mode) for s in agent.seen] == [(2, {"v": 1}, "resume")]
    assert run.attempts("t")[1].resumed_from == ref_key(compatible)


def test_resume_fails_with_history_exhausted_when_state_is_past_the_scan_bound(
    db: st.Database,
) -> None:
    agent, wf = _history_agent()
    run_id, _ = _prepare_history(db, wf, HISTORY_SCAN_BOUND)
    with pytest.raises(HistoryExhausted):
        resume_point(db.store, as_agent(agent), run_id, "t", 0)

    run = db.resume(run_id, wf)

    # Never silently fresh: the run fails with an explicit error, the agent is not called.
    assert agent.calls == 0
    assert run.status == "failed"
    assert "refusing to start fresh" in (run.error or "")
    node = node_map(db, run_id)[("t", 0)]
    assert (node.state, node.last_attempt) == ("failed", 1)
    assert count(db, "tt_checkpoint_refs", run_id=run_id) == HISTORY_SCAN_BOUND + 1


@pytest.mark.parametrize(
    "publish",
    [
        pytest.param(lambda r: r.on_checkpoint(state({"x": 1}, version=2)), id="other-version"),
        pytest.param(lambda r: r.on_checkpoint(state({"x": 1}, codec="other")), id="other-codec"),
    ],
)
def test_on_checkpoint_rejects_undeclared_formats_and_writes_nothing(
    db: st.Database, publish: Any
) -> None:
    errors: list[BaseException] = []

    async def work(request: GenerateRequest) -> str:
        try:
            await publish(request)
        except FormatNotDeclared as error:
            errors.append(error)
        return "went on without it"

    wf = Workflow("undeclared")
    wf.task("t", agent=ScriptedAgent(work))

    run = db.run(wf)

    assert run.status == "finished", run.error
    assert len(errors) == 1
    assert "does not declare" in str(errors[0])
    assert count(db, "tt_checkpoint_refs") == 0
    assert count(db, "tt_checkpoint_contents") == 0
    assert not [f for f in run.frames() if f.kind == "checkpoint"]


def test_final_checkpoint_fails_the_attempt_and_writes_nothing_when_undeclared(
    db: st.Database,
) -> None:
    async def work(request: GenerateRequest) -> GenerateResult:
        return GenerateResult("output", checkpoint=state({"x": 1}, version=3))

    wf = Workflow("undeclared-final")
    wf.task("t", agent=ScriptedAgent(work))

    run = db.run(wf)

    assert run.status == "failed"
    assert "does not declare" in (run.error or "")
    assert run.attempts("t")[0].error_code == "format_not_declared"
    assert count(db, "tt_checkpoint_refs") == 0
    assert count(db, "tt_checkpoint_contents") == 0


def _mutate_to_set(cp: AgentCheckpoint) -> None:
    cp.payload["tags"] = {"a", "b"}


def _mutate_to_nan(cp: AgentCheckpoint) -> None:
    cp.payload["score"] = math.nan


def _mutate_to_infinity(cp: AgentCheckpoint) -> None:
    cp.payload["nested"]["deep"] = [1, -math.inf]


def _mutate_to_tuple(cp: AgentCheckpoint) -> None:
    cp.payload["pair"] = (1, 2)


@pytest.mark.parametrize(
    "mutate", [_mutate_to_set, _mutate_to_nan, _mutate_to_infinity, _mutate_to_tuple]
)
def test_on_checkpoint_rejects_a_payload_mutated_after_construction_and_writes_nothing(
    db: st.Database, mutate: Any
) -> None:
    errors: list[CheckpointInvalid] = []

    async def work(request: GenerateRequest) -> str:
        cp = state({"ok": True, "nested": {"deep": [1]}})
        mutate(cp)
        try:
            await request.on_checkpoint(cp)
        except CheckpointInvalid as error:
            errors.append(error)
        return "done"

    wf = Workflow("malformed")
    wf.task("t", agent=ScriptedAgent(work))

    run = db.run(wf)

    assert run.status == "finished", run.error
    assert len(errors) == 1
    assert errors[0].path and errors[0].path.startswith("$.payload")
    assert count(db, "tt_checkpoint_refs") == 0
    assert count(db, "tt_checkpoint_contents") == 0


def test_checkpoint_with_nan_fails_only_its_attempt_when_constructed(
    db: st.Database,
) -> None:
    async def work(request: GenerateRequest) -> str:
        if request.attempt == 1:
            await request.on_checkpoint(state({"score": float("nan")}))
        return "second attempt"

    agent = ScriptedAgent(work)
    wf = Workflow("nan")
    wf.task("t", agent=agent, retries=1)

    run = db.run(wf)

    assert run.status == "finished", run.error
    first = run.attempts("t")[0]
    assert (first.state, first.error_code) == ("failed", "checkpoint_invalid")
    assert agent.seen[1].payload is None  # nothing to resume: nothing was written
    assert count(db, "tt_checkpoint_refs") == 0
    assert count(db, "tt_checkpoint_contents") == 0


def test_agent_runs_unchanged_when_it_declares_nothing(db: st.Database) -> None:
    class Plain:
        id = "plain"

        def __init__(self) -> None:
            self.requests: list[GenerateRequest] = []

        async def generate(self, request: GenerateRequest) -> str:
            self.requests.append(request)
            if request.attempt == 1:
                with pytest.raises(FormatNotDeclared):
                    await request.on_checkpoint(state({"x": 1}))
                raise RuntimeError("retry me")
            return f"hello {request.input['name']}"

    agent = Plain()
    wf = Workflow("plain")
    wf.task("t", agent=agent, retries=1)

    run = db.run(wf, {"name": "world"})

    assert run.status == "finished", run.error
    assert run.output == {"t": "hello world"}
    assert [(r.resume_checkpoint, r.checkpoint_mode) for r in agent.requests] == [(None, None)] * 2
    assert count(db, "tt_checkpoint_refs") == 0


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_plain_function_works_as_an_agent(db: st.Database, kind: str) -> None:
    if kind == "async":

        async def shout(request: GenerateRequest) -> str:
            await asyncio.sleep(0)
            return f"{request.prompt}: {request.input}!"

        agent: Any = shout
    else:

        def whisper(request: GenerateRequest) -> str:
            return f"{request.prompt}: {request.input}..."

        agent = whisper

    wf = Workflow("functions")
    wf.task("t", agent=agent, prompt="say")
    wf.task("u", agent=agent, prompt="again", needs=["t"])

    run = db.run(wf, "hi")

    end = "!" if kind == "async" else "..."
    assert run.status == "finished", run.error
    assert run.output == {"t": f"say: hi{end}", "u": f"again: hi{end}"}
    assert [a.state for a in run.attempts()] == ["finished", "finished"]
