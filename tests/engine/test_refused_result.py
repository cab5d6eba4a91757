"""The store refuses a result checkpoint kept for the attempt's end: the attempt fails (as a
refused publish does) and nothing of that end is written; a retry can still succeed."""

from __future__ import annotations

import smithers_tt as st
from smithers_tt import GenerateRequest, GenerateResult, Retry, Workflow
from smithers_tt.errors import CheckpointTooLarge
from smithers_tt.store.backend import _schema as S

from ._workflows import ScriptedAgent, count, state

LIMIT = 200
"""The run's checkpoint limit once the agent has lowered it: below the big result's size."""


def _lower_limit(db: st.Database, run_id: str) -> None:
    """What an operator lowering a run's limit mid-run does: the executor, which read the
    run's limit when it started, keeps the result; only the store can refuse it."""
    stmt = S.runs.update().where(S.runs.c.run_id == run_id).values(max_checkpoint_bytes=LIMIT)
    db.engine.transaction(lambda conn: conn.execute(stmt))


def _workflow(db: st.Database, retries: int) -> Workflow:
    async def work(request: GenerateRequest) -> GenerateResult:
        if request.attempt == 1:
            _lower_limit(db, request.run_id)
            return GenerateResult("big", checkpoint=state({"blob": "x" * (4 * LIMIT)}))
        return GenerateResult("small", checkpoint=state({"ok": 1}))

    wf = Workflow("refused-result")
    wf.task("t", agent=ScriptedAgent(work), retry=Retry(count=retries))
    return wf


def test_a_result_checkpoint_the_store_refuses_fails_the_attempt_and_writes_nothing(
    db: st.Database,
) -> None:
    run = db.run(_workflow(db, retries=0))

    assert run.status == "failed"
    (attempt,) = run.attempts("t")
    assert attempt.state == "failed"
    assert attempt.error_code == CheckpointTooLarge.code
    assert f"limit of {LIMIT} bytes" in (attempt.error or "")
    assert run.nodes()[0].state == "failed"
    assert run.checkpoints() == []
    assert count(db, "tt_checkpoint_contents") == 0
    ends = [f for f in run.frames() if f.kind == "attempt_finished"]
    assert [f.state for f in ends] == ["failed"]  # the refused end left no frame of its own


def test_the_attempt_after_a_refused_result_checkpoint_can_finish_the_node(
    db: st.Database,
) -> None:
    run = db.run(_workflow(db, retries=1))

    assert run.status == "finished"
    first, second = run.attempts("t")
    assert (first.state, first.error_code) == ("failed", CheckpointTooLarge.code)
    assert second.state == "finished"
    (ref,) = run.checkpoints()
    assert ref.attempt == 2
    assert db.store.load(ref).payload == {"ok": 1}
    assert run.nodes()[0].output == "small"


def test_lowering_the_limit_is_what_refuses_it(db: st.Database) -> None:
    """The same workflow without the lowered limit stores the big result (the refusal above is
    the store's limit, not the checkpoint)."""

    async def work(request: GenerateRequest) -> GenerateResult:
        return GenerateResult("big", checkpoint=state({"blob": "x" * (4 * LIMIT)}))

    wf = Workflow("accepted-result")
    wf.task("t", agent=ScriptedAgent(work))
    run = db.run(wf)

    assert run.status == "finished"
    assert len(run.checkpoints()) == 1
