"""Task forks: a task seeded from another task's newest finished checkpoint in mode fork."""

from __future__ import annotations

import pytest

import smithers_tt as st
from smithers_tt import ForkIncompatible, GenerateRequest, GenerateResult, Workflow
from smithers_tt.engine import as_agent, fork_point

from ._workflows import CODEC, ScriptedAgent, capabilities, formats, node_map, ref_key, refs, state


async def _source(request: GenerateRequest) -> GenerateResult:
    await request.on_checkpoint(state({"from": "source", "step": 0}))
    return GenerateResult("drafted", checkpoint=state({"from": "source", "step": "final"}))


def _source_agent() -> ScriptedAgent:
    return ScriptedAgent(_source, id="writer")


def test_fork_task_gets_the_sources_newest_finished_checkpoint_in_mode_fork(
    db: st.Database,
) -> None:
    async def review(request: GenerateRequest) -> GenerateResult:
        seed = request.resume_checkpoint.payload
        seed["reviewed"] = True
        return GenerateResult(f"reviewed {seed['step']}", checkpoint=state(seed))

    reviewer = ScriptedAgent(review, id="reviewer", consumes=capabilities((CODEC, [1], ["fork"])))
    wf = Workflow("fork")
    wf.task("write", agent=_source_agent())
    wf.task("review", agent=reviewer, fork="write")

    run = db.run(wf)

    assert run.status == "finished", run.error
    assert run.output == {"write": "drafted", "review": "reviewed final"}
    (seen,) = reviewer.seen
    assert (seen.mode, seen.payload) == ("fork", {"from": "source", "step": "final"})
    source_final = refs(db, run.id, "write")[-1]
    assert run.attempts("review")[0].resumed_from == ref_key(source_final)
    # The fork's own state is its own; the source's stays as it was.
    (own,) = refs(db, run.id, "review")
    assert db.store.load(own).payload == {"from": "source", "step": "final", "reviewed": True}
    assert db.store.load(source_final).payload == {"from": "source", "step": "final"}


@pytest.mark.parametrize(
    "consumes",
    [
        pytest.param(capabilities((CODEC, [1], ["resume"])), id="resume-only"),
        pytest.param(capabilities((CODEC, [2], ["fork"])), id="other-version"),
        pytest.param(capabilities(("other.codec", [1], ["fork"])), id="other-codec"),
        pytest.param([], id="declares-nothing"),
    ],
)
def test_fork_incompatible_is_raised_before_the_agent_is_called(
    db: st.Database, consumes: list
) -> None:
    reviewer = ScriptedAgent(
        lambda r: _source(r), id="reviewer", produces=formats((CODEC, [1])), consumes=consumes
    )
    wf = Workflow("fork-incompatible")
    wf.task("write", agent=_source_agent())
    wf.task("review", agent=reviewer, fork="write")

    run = db.run(wf)

    assert reviewer.calls == 0
    assert run.status == "failed"
    assert "mode 'fork'" in (run.error or "")
    assert run.attempts("review") == []
    assert node_map(db, run.id)[("review", 0)].state == "failed"
    assert node_map(db, run.id)[("write", 0)].state == "finished"


def test_fork_is_incompatible_when_the_source_published_nothing(db: st.Database) -> None:
    async def silent(request: GenerateRequest) -> str:
        return "no state"

    reviewer = ScriptedAgent(_source, consumes=capabilities((CODEC, [1], ["fork"])))
    wf = Workflow("fork-nothing")
    wf.task("write", agent=silent)
    wf.task("review", agent=reviewer, fork="write")

    run = db.run(wf)

    assert reviewer.calls == 0
    assert run.status == "failed"
    assert "no finished checkpoint" in (run.error or "")
    with pytest.raises(ForkIncompatible):
        fork_point(db.store, as_agent(reviewer), run.id, "write", 0, "review")


def test_retry_of_a_forked_task_reseeds_from_the_source_not_its_own_failed_attempt(
    db: st.Database,
) -> None:
    async def review(request: GenerateRequest) -> str:
        seed = request.resume_checkpoint.payload
        seed["reviewer_attempt"] = request.attempt
        await request.on_checkpoint(state(seed))  # its own progress, under node "review"
        if request.attempt < 3:
            raise RuntimeError(f"review attempt {request.attempt} failed")
        return "reviewed"

    reviewer = ScriptedAgent(
        review, id="reviewer", consumes=capabilities((CODEC, [1], ["resume", "fork"]))
    )
    wf = Workflow("fork-retry")
    wf.task("write", agent=_source_agent())
    wf.task("review", agent=reviewer, fork="write", retries=2)

    run = db.run(wf)

    assert run.status == "finished", run.error
    seed = {"from": "source", "step": "final"}
    assert [(s.attempt, s.mode, s.payload) for s in reviewer.seen] == [
        (1, "fork", seed),
        (2, "fork", seed),
        (3, "fork", seed),
    ]
    source_final = ref_key(refs(db, run.id, "write")[-1])
    assert [a.resumed_from for a in run.attempts("review")] == [source_final] * 3
    assert [db.store.load(r).payload["reviewer_attempt"] for r in refs(db, run.id, "review")] == [
        1,
        2,
        3,
    ]


def test_fork_source_newer_incompatible_state_does_not_hide_older_forkable_state(
    db: st.Database,
) -> None:
    async def source(request: GenerateRequest) -> GenerateResult:
        await request.on_checkpoint(state({"forkable": True}))
        return GenerateResult("done", checkpoint=state({"v2": True}, version=2))

    async def review(request: GenerateRequest) -> str:
        return f"{request.checkpoint_mode}:{request.resume_checkpoint.payload}"

    wf = Workflow("fork-versions")
    wf.task("write", agent=ScriptedAgent(source, produces=formats((CODEC, [1, 2]))))
    wf.task(
        "review",
        agent=ScriptedAgent(review, consumes=capabilities((CODEC, [1], ["fork"]))),
        fork="write",
    )

    run = db.run(wf)

    assert run.status == "finished", run.error
    assert run.output["review"] == "fork:{'forkable': True}"
