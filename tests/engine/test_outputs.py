"""Task outputs and run input must be strict JSON: an output that is not fails its attempt
like any agent error (retries apply, the attempt and node end ``failed``, the message names
the output and the JSON path); outputs and input may nest to the documented bound (256),
with no hidden level taken by the structures that store them."""

from __future__ import annotations

from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import CheckpointInvalid, GenerateRequest, Workflow
from smithers_tt.checkpoint import MAX_DEPTH

from ._workflows import ScriptedAgent, attempt_states, node_map


def nested(depth: int) -> Any:
    """Lists nested ``depth`` deep (the outermost list is depth 1)."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


DEEPEST = nested(MAX_DEPTH)

BAD_OUTPUTS = [
    pytest.param({"score": float("nan")}, "non-finite number nan at $.score", id="nan"),
    pytest.param({"score": {1, 2}}, "a value of type set at $.score", id="set"),
    pytest.param(
        {"score": {(1, 2): "pair"}},
        "non-string object key (1, 2) (tuple) at $.score",
        id="tuple-key",
    ),
    pytest.param(
        {"score": 10**5000},
        "integer of about 5001 digits beyond +-(2**53-1) at $.score",
        id="int-over-4300-digits",
    ),
    pytest.param(
        {"score": nested(MAX_DEPTH)},  # 257 deep with the object around it
        "nesting deeper than 256 at $.score" + "[0]" * (MAX_DEPTH - 1),
        id="one-past-the-bound",
    ),
]


def _message(what: str) -> str:
    return (
        f"output of task 'grade' is not strict JSON: {what}; "
        "convert it to dict/list/str/int/float/bool/None first"
    )


@pytest.mark.parametrize(("bad", "what"), BAD_OUTPUTS)
def test_an_output_that_is_not_strict_json_fails_its_attempt_and_the_retry_runs(
    db: st.Database, bad: Any, what: str
) -> None:
    async def work(request: GenerateRequest) -> Any:
        return bad if request.attempt == 1 else {"score": 7}

    wf = Workflow("grading")
    wf.task("grade", agent=ScriptedAgent(work), retries=1, schema_retries=0)
    run = db.run(wf)

    assert (run.status, run.output) == ("finished", {"grade": {"score": 7}})
    first, second = db.store.list_attempts(run.id)
    assert (first.state, first.error_code, first.error) == (
        "failed",
        "output_invalid",
        f"OutputInvalid: {_message(what)}",
    )
    assert second.state == "finished"
    assert node_map(db, run.id)["grade", 0].state == "finished"


def test_an_output_that_is_never_strict_json_fails_the_task_and_the_run(
    db: st.Database,
) -> None:
    agent = ScriptedAgent(lambda request: _async({"score": float("nan")}))
    wf = Workflow("grading")
    wf.task("grade", agent=agent, retries=2, schema_retries=0)
    run = db.run(wf)  # a failed run, not an exception

    assert run.status == "failed"
    assert run.error == "task 'grade' failed after 3 attempt(s): " + _message(
        "non-finite number nan at $.score"
    )
    assert "checkpoint payload" not in run.error
    assert agent.calls == 3
    assert attempt_states(db, run.id) == ["failed", "failed", "failed"]
    node = node_map(db, run.id)["grade", 0]
    assert (node.state, node.last_attempt, node.output) == ("failed", 3, None)


def test_the_agent_is_told_what_is_not_strict_json_in_a_correction_turn(
    db: st.Database,
) -> None:
    async def work(request: GenerateRequest) -> Any:
        if request.schema_error is None:
            return {"score": float("inf")}
        return {"score": 7}

    agent = ScriptedAgent(work)
    wf = Workflow("grading")
    wf.task("grade", agent=agent, schema_retries=1)
    run = db.run(wf)

    assert (run.status, run.output) == ("finished", {"grade": {"score": 7}})
    assert [s.schema_error for s in agent.seen] == [
        None,
        _message("non-finite number inf at $.score"),
    ]
    assert attempt_states(db, run.id) == ["finished"]


def test_outputs_and_input_nest_to_the_documented_bound(db: st.Database) -> None:
    async def deepest(request: GenerateRequest) -> Any:
        return DEEPEST

    async def reads(request: GenerateRequest) -> Any:
        assert request.needs == {"deep": DEEPEST} and request.input == DEEPEST
        return request.needs["deep"]

    wf = Workflow("deep")
    wf.task("deep", agent=ScriptedAgent(deepest), cache=True)  # the cache key holds both
    wf.task("reads", agent=ScriptedAgent(reads), needs=["deep"], cache=True)
    run = db.run(wf, input=DEEPEST)

    assert run.status == "finished", run.error
    assert run.input == DEEPEST
    assert run.output == {"deep": DEEPEST, "reads": DEEPEST}
    assert {k: n.output for k, n in node_map(db, run.id).items()} == {
        ("deep", 0): DEEPEST,
        ("reads", 0): DEEPEST,
    }
    again = db.run(wf, input=DEEPEST)  # from the cache
    assert (again.status, again.output) == ("finished", run.output)


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        pytest.param(nested(MAX_DEPTH + 1), "nesting deeper than 256 at $" + "[0]" * 256),
        pytest.param({"x": float("nan")}, "non-finite number nan at $.x"),
    ],
    ids=["one-past-the-bound", "nan"],
)
def test_a_run_input_that_is_not_strict_json_is_refused_naming_it(
    db: st.Database, bad: Any, what: str
) -> None:
    wf = Workflow("refused")
    agent = ScriptedAgent(lambda request: _async("never"))
    wf.task("t", agent=agent)
    with pytest.raises(CheckpointInvalid) as caught:
        db.run(wf, input=bad)

    assert str(caught.value) == (
        f"run input is not strict JSON: {what}; "
        "convert it to dict/list/str/int/float/bool/None first"
    )
    assert agent.calls == 0 and db.runs() == []


async def _async(value: Any) -> Any:
    return value


def test_a_run_whose_outputs_nest_to_the_bound_forks_and_rewinds(db: st.Database) -> None:
    async def deepest(request: GenerateRequest) -> Any:
        return DEEPEST

    wf = Workflow("deep")
    wf.task("first", agent=ScriptedAgent(deepest))
    wf.task("second", agent=ScriptedAgent(deepest), needs=["first"])
    run = db.run(wf)
    last = run.frames()[-1].frame_no

    child = db.fork(run.id, last - 1, reset=["second"])  # the frame before the run's end
    replayed = db.resume(child.id, wf)
    assert (replayed.status, replayed.output) == ("finished", run.output)
    ended = db.fork(run.id, last)  # a fork of the finished run carries its output
    assert (ended.status, ended.output) == ("finished", {"first": DEEPEST, "second": DEEPEST})
    db.rewind(run.id, last, confirm=True)
    assert db.get_run(run.id).output == {"first": DEEPEST, "second": DEEPEST}
