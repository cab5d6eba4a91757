"""``smithers-tt runs --status paused`` and ``smithers-tt continue RUN --answer JSON``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import smithers_tt as st
from smithers_tt.cli import cli
from smithers_tt.demo import demo_workflow

from ._pause_flows import asking

FLOW = "tests.cli._pause_flows:asking"


def _cli(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", url, *args])
    return result.exit_code, result.output


def _json(url: str, *args: str) -> dict:
    code, out = _cli(url, "--json", *args)
    assert code == 0, out
    return json.loads(out)


def test_runs_lists_paused_runs_and_continue_answers_the_question(
    db: st.Database, db_url: str
) -> None:
    run = db.run(asking())
    assert [r["run_id"] for r in _json(db_url, "runs", "--status", "paused")] == [run.id]
    code, out = _cli(db_url, "continue", run.id, "--answer", '"blue"', "--workflow", FLOW)
    assert code == 0, out
    assert "finished" in out
    assert db.get_run(run.id).output["report"] == {"report": "blue"}
    assert _json(db_url, "runs", "--status", "paused") == []


def test_continue_shows_the_question_escaped(db: st.Database, db_url: str) -> None:
    run = db.run(asking(), break_before=["pick"])
    code, out = _cli(db_url, "continue", run.id, "--workflow", FLOW)
    assert code == 0, out
    assert "paused" in out and "while running pick" in out
    assert "[31m red or blue" in out and "\x1b" not in out  # shown escaped
    shown = _json(db_url, "continue", run.id, "--answer", '"red"', "--workflow", FLOW)
    assert shown["status"] == "finished" and shown["pause"] is None


def test_continue_steps_the_demo_one_node_at_a_time(db: st.Database, db_url: str) -> None:
    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "bees"}, break_before=["write"])
    stepped = _json(db_url, "continue", run.id, "--step")
    assert stepped["status"] == "paused"
    assert (stepped["pause"]["reason"], stepped["pause"]["node_id"]) == ("step", "write")
    assert _json(db_url, "continue", run.id)["status"] == "finished"


def test_continue_queue_leaves_the_run_to_a_worker(db: st.Database, db_url: str) -> None:
    run = db.run(asking())
    assert _json(db_url, "continue", run.id, "--answer", '"blue"', "--queue")["status"] == "queued"
    assert db.get_run(run.id).status == "queued"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--answer", "{not json"), "--answer is not valid JSON"),
        (("--skip", "pick"), "--skip takes NODE=JSON"),
        (("--skip", "=1"), "--skip takes NODE=JSON"),
        (("--skip", "pick=1", "--skip", "pick=2"), "--skip 'pick' is given twice"),
        (("--checkpoint", "pick=a.json", "--checkpoint", "pick=b.json"), "given twice"),
        (("--skip", "nope={}", "--workflow", FLOW), "'nope', which is not a task"),
        (("--answer", "7" * 5000), "--answer holds a number of more than 4300 digits"),
        (
            ("--answer", "9007199254740992", "--workflow", FLOW),
            "9007199254740992 beyond +-(2**53-1)",
        ),
        (("--step", "--abort", "--workflow", FLOW), "--abort cancels the run; it takes no --step"),
        (("--abort", "--answer", '"blue"', "--workflow", FLOW), "it takes no --answer"),
    ],
    ids=[
        "answer",
        "skip-form",
        "skip-no-node",
        "skip-twice",
        "checkpoint-twice",
        "skip-node",
        "answer-5000-digits",
        "answer-2**53",
        "step-abort",
        "abort-answer",
    ],
)
def test_continue_refuses_bad_options_in_one_line(
    db: st.Database, db_url: str, args: tuple[str, ...], message: str
) -> None:
    run = db.run(asking())
    code, out = _cli(db_url, "continue", run.id, *args)
    assert code in (1, 2) and message in out and "Traceback" not in out
    assert "unexpected" not in out
    assert db.get_run(run.id).status == "paused"


def test_continue_a_run_that_is_not_paused_says_so(db: st.Database, db_url: str) -> None:
    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "ants"})
    code, out = _cli(db_url, "continue", run.id, "--answer", "1")
    assert code == 1 and "not paused" in out


def test_continue_of_an_interrupted_run_names_the_resume_that_runs_it_on(
    db: st.Database, db_url: str
) -> None:
    wf, _ = demo_workflow()
    fork = db.fork(db.run(wf, {"topic": "ants"}).id, 3)  # interrupted: never paused
    code, out = _cli(db_url, "continue", fork.id)
    assert code == 1 and "is interrupted, not paused" in out
    assert out.strip().endswith(f" resume {fork.id}")  # whole: a command to paste
    assert db.get_run(fork.id).record.clock == fork.record.clock  # nothing was written


def test_continue_of_an_answer_that_is_not_json_is_a_usage_error(
    db: st.Database, db_url: str
) -> None:
    run = db.run(asking())
    code, out = _cli(db_url, "continue", run.id, "--answer", "NaN", "--workflow", FLOW)
    assert code == 2 and "--answer is not strict JSON" in out and len(out.splitlines()) == 1
    assert db.get_run(run.id).record.clock == run.record.clock  # still paused, as it was


@pytest.mark.parametrize("queue", [[], ["--queue"]], ids=["here", "queued"])
def test_a_bare_continue_of_a_run_that_is_not_paused_says_so(
    db: st.Database, db_url: str, queue: list[str]
) -> None:
    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "ants"})
    clock = run.record.clock
    code, out = _cli(db_url, "continue", run.id, *queue)  # it said "run ... finished", code 0
    assert code == 1 and "is finished, not paused: there is nothing to continue" in out
    assert db.get_run(run.id).record.clock == clock  # nothing was written
