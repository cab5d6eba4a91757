"""The debugger's action forms as a person fills them in: what a pending Fork or Replay says it
will do, why a form is refused (in words naming where), what an edited checkpoint would
change and whether its agent could resume from it, and what a confirmed Fork or Replay (or
one that fails) reports, shows and audits."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint, CheckpointCapability, CheckpointFormat
from smithers_tt.demo import demo_workflow
from smithers_tt.demo.agents import DRAFT, NOTES
from smithers_tt.engine import pause_history
from smithers_tt.errors import TransientStoreError
from smithers_tt.timetravel import Change
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets._control import REPLAY_NEEDS_WORKFLOW
from smithers_tt.widgets._records import ActionResult, EditPreview, Message
from smithers_tt.widgets._refresh import changed_elsewhere

from ._support import Heard, audit


def _run(db: st.Database, **demo: Any) -> tuple[str, st.Workflow, Any]:
    wf, agents = demo_workflow(**demo)
    return db.run(wf, {"topic": "bee"}).id, wf, agents


def _frame_of(db: st.Database, run_id: str, node_id: str, state: str) -> int:
    return max(
        f.frame_no
        for f in db.store.frames(run_id)
        if f.kind == "node_state" and f.node_id == node_id and f.state == state
    )


def _run_ids(db: st.Database) -> set[str]:
    return {r.id for r in db.runs(limit=1000)}


def _json_error(text: str) -> str:
    """How json itself words what is wrong with ``text``, and where."""
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return f"{error.msg} at line {error.lineno} column {error.colno}"
    raise AssertionError(f"{text!r} is valid JSON")


def _error_of(call: Any) -> str:
    """The message of the SmithersError ``call()`` raises (the library's own words)."""
    with pytest.raises(st.SmithersError) as caught:
        call()
    return caught.value.message


# --- agents whose declarations the debugger checks an edit against -----------------------


class Declares:
    """An agent that only declares formats and capabilities (the debugger never calls it)."""

    def __init__(self, formats: list[Any], capabilities: list[Any]) -> None:
        self.id = "declares"
        self.checkpoint_formats = formats
        self.checkpoint_capabilities = capabilities

    async def generate(self, request: st.GenerateRequest) -> Any:
        raise AssertionError("not called")


def _workflow_with_research(agent: Any) -> st.Workflow:
    """The demo workflow's name with another research agent (as if its code changed)."""
    wf = st.Workflow("demo-report")
    wf.task("research", agent=agent)
    return wf


def test_declared_formats_say_which_published_formats_a_fork_could_resume_from(
    db: st.Database,
) -> None:
    run_id, wf, _ = _run(db)
    model = DebuggerModel(db, run_id, workflow=wf)
    assert model.declared_formats("research") == [(NOTES, (1,), True)]
    assert model.declared_formats("write") == [(DRAFT, (1,), True)]  # resume and fork
    assert model.declared_formats("review") == [(DRAFT, (1,), False)]  # consumes it in fork mode
    assert model.declared_formats("no-such-node") is None
    assert DebuggerModel(db, run_id).declared_formats("research") is None  # no workflow

    # resumable only where one capability has the same codec, "resume" and a shared version
    agent = Declares(
        [
            CheckpointFormat("a.state", [1, 2]),
            CheckpointFormat("b.state", [2]),
            CheckpointFormat("c.state", [3]),
        ],
        [
            CheckpointCapability("a.state", [2, 7], ["resume"]),  # shares version 2
            CheckpointCapability("b.state", [9], ["resume"]),  # same codec, other version
            CheckpointCapability("c.state", [3], ["fork"]),  # same codec, fork only
            CheckpointCapability("z.state", [2, 3], ["resume"]),  # another codec
        ],
    )
    model = DebuggerModel(db, run_id, workflow=_workflow_with_research(agent))
    assert model.declared_formats("research") == [
        ("a.state", (1, 2), True),
        ("b.state", (2,), False),
        ("c.state", (3,), False),
    ]
    plain = DebuggerModel(db, run_id, workflow=_workflow_with_research(lambda request: {}))
    assert plain.declared_formats("research") == []  # a function declares nothing


# --- the summary of a pending fork -------------------------------------------------------


def test_a_pending_fork_says_exactly_what_the_fork_will_change(db: st.Database) -> None:
    run_id, _, _ = _run(db)
    model = DebuggerModel(db, run_id)
    frame = _frame_of(db, run_id, "research", "finished")
    model.select_frame(frame)
    head = f"Fork run {run_id} at frame {frame} into a new run: "

    plain = model.request_fork()
    assert plain is model.pending and plain is not None
    assert (plain.action, plain.run_id, plain.frame_no) == ("fork", run_id, frame)
    assert plain.summary == head + "no changes, an exact copy of the state."
    assert plain.options == {"reset": []}

    notes = model.load(model.newest_ref("research")).payload
    edited = {**notes, "notes": ["Bees dance to say where the flowers are.", *notes["notes"][1:]]}
    pending = model.request_fork(
        reset=("review", "write"),
        input_text=' {"topic": "wasp", "lang": "fr"} ',
        edit_node="research",
        edit_text=json.dumps(edited),
        reason="  the first note was wrong  ",
    )
    assert pending is not None and pending.summary == head + (
        "reset review, write; edited checkpoint of research; "
        'input {"topic": "wasp", "lang": "fr"}; reason: the first note was wrong.'
    )
    assert pending.options == {
        "reset": ["review", "write"],
        "input": {"topic": "wasp", "lang": "fr"},
        "checkpoints": {"research": AgentCheckpoint(NOTES, 1, edited)},
        "reason": "the first note was wrong",
    }

    blank = model.request_fork(reason="   ")  # a blank reason is no reason
    assert blank is not None and "reason" not in blank.options
    assert blank.summary == head + "no changes, an exact copy of the state."


def test_a_long_input_override_is_cut_in_the_summary_but_forked_whole(db: st.Database) -> None:
    run_id, _, _ = _run(db)
    model = DebuggerModel(db, run_id)
    head = f"Fork run {run_id} at frame {model.frame_no} into a new run: input "

    fits = {"topic": "é" * (120 - len('{"topic": ""}'))}  # 120 characters, as written
    text = json.dumps(fits, ensure_ascii=False)
    assert len(text) == 120
    pending = model.request_fork(input_text=json.dumps(fits))
    assert pending is not None and pending.summary == f"{head}{text}."  # not escaped, not cut

    longer = {"topic": "é" * (121 - len('{"topic": ""}'))}
    text = json.dumps(longer, ensure_ascii=False)
    pending = model.request_fork(input_text=text)
    assert pending is not None and pending.summary == f"{head}{text[:120]}…."
    assert pending.options["input"] == longer  # the fork gets all of it
    result = model.confirm()
    assert result is not None and result.ok, result
    assert db.get_run(result.run_id).input == longer


def test_an_edit_that_leaves_the_checkpoint_as_it_was_is_no_edit(db: st.Database) -> None:
    run_id, _, _ = _run(db)
    model = DebuggerModel(db, run_id)
    model.select_frame(_frame_of(db, run_id, "research", "finished"))
    text = model.checkpoint_text("research")
    compact = json.dumps(json.loads(text), separators=(",", ":"))  # same value, other spacing
    for same in (text, compact):
        pending = model.request_fork(edit_node="research", edit_text=same)
        assert pending is not None and "checkpoints" not in pending.options
        assert pending.summary.endswith(": no changes, an exact copy of the state.")


# --- forms that are refused ----------------------------------------------------------------


def test_a_fork_form_that_is_not_valid_is_refused_in_words_naming_where(
    db: st.Database,
) -> None:
    run_id, _, _ = _run(db)
    model = DebuggerModel(db, run_id)
    model.select_frame(_frame_of(db, run_id, "research", "finished"))
    frame = model.frame_no
    runs = _run_ids(db)
    heard = Heard(model)

    def refused(expected: str, **form: Any) -> None:
        assert model.request_fork() is not None  # a fork was pending: the refusal drops it
        heard.take()
        assert model.request_fork(**form) is None
        assert model.pending is None
        assert model.message == Message("error", f"Cannot fork: {expected}")
        assert heard.take() == ["pending", "message"]  # the confirm box closes

    refused(f"run {run_id} has no node(s) ['nope', 'zzz'] to reset", reset=["zzz", "write", "nope"])
    bad = '{"topic": '
    refused(f"the input override is not valid JSON: {_json_error(bad)}", input_text=bad)
    refused(
        "the input override holds a number of more than 4300 digits; strict JSON allows "
        "integers within +-(2**53-1) (9007199254740991) and finite floats",
        input_text='{"topic": ' + "7" * 5000 + "}",
    )
    refused(
        "the value is not strict JSON: non-finite number nan at $.topic[0]; convert it to "
        "dict/list/str/int/float/bool/None first",
        input_text='{"topic": [NaN]}',
    )
    bad = '{"notes": ["a",]}'
    refused(
        f"the edited checkpoint of 'research' is not valid JSON: {_json_error(bad)}",
        edit_node="research",
        edit_text=bad,
    )
    refused(
        f"the edited checkpoint of 'research' is not valid JSON: {_json_error('')}",
        edit_node="research",  # an empty editor is not an empty payload
    )
    refused(
        f"'write' has no checkpoint at frame {frame}; nothing to edit",  # write has not run
        edit_node="write",
        edit_text="{}",
    )
    assert _run_ids(db) == runs  # nothing was written


def test_replay_is_refused_without_the_workflow_or_with_an_invalid_form(db: st.Database) -> None:
    run_id, wf, agents = _run(db)
    runs = _run_ids(db)
    model = DebuggerModel(db, run_id)
    model.request_fork(reset=["write"])
    assert model.request_replay(reset=["write"]) is None
    assert model.pending is None
    assert model.message == Message("error", REPLAY_NEEDS_WORKFLOW)

    model = DebuggerModel(db, run_id, workflow=wf)
    model.request_fork(reset=["write"])  # asked first, then a replay is asked and refused
    heard = Heard(model)
    assert model.request_replay(reset=["nope"]) is None
    assert model.pending is None  # Confirm must not carry out the earlier fork now
    assert model.message == Message(
        "error", f"Cannot replay: run {run_id} has no node(s) ['nope'] to reset"
    )
    assert heard.take() == ["pending", "message"]
    assert model.confirm() is None
    assert _run_ids(db) == runs  # nothing was forked
    assert agents.writer.calls == 1  # no agent was called again


def test_a_pending_replay_says_it_forks_and_calls_the_agents_again(db: st.Database) -> None:
    run_id, wf, _ = _run(db)
    model = DebuggerModel(db, run_id, workflow=wf)
    assert model.request_replay(reset=["nope"]) is None  # refused first
    assert model.message is not None and model.message.kind == "error"
    heard = Heard(model)
    last = model.last_frame
    pending = model.request_replay(reset=["write"], input_text='{"topic": "ant"}', reason="why")
    assert pending is model.pending and pending is not None
    assert (pending.action, pending.run_id, pending.frame_no) == ("replay", run_id, last)
    assert pending.summary == (
        f"Replay run {run_id} from frame {last}: fork it with reset write; input "
        '{"topic": "ant"}; reason: why, then execute the new run with workflow '
        "'demo-report' (agents are called again)."
    )
    assert pending.options == {"reset": ["write"], "input": {"topic": "ant"}, "reason": "why"}
    assert model.message is None  # the refusal no longer stands
    assert heard.take() == ["pending", "message"]
    plain = model.request_replay()
    assert plain is not None and plain.summary == (
        f"Replay run {run_id} from frame {last}: fork it with no changes, then execute the new "
        "run with workflow 'demo-report' (agents are called again)."
    )


# --- previewing an edit ----------------------------------------------------------------------


def test_an_edit_preview_shows_the_changes_it_would_make(db: st.Database) -> None:
    run_id, wf, _ = _run(db)
    model = DebuggerModel(db, run_id, workflow=wf)
    model.select_frame(_frame_of(db, run_id, "research", "finished"))
    before = db.snapshot(run_id, model.frame_no).payload("research")
    after = {**before, "notes": ["Bees dance.", *before["notes"][1:]], "tokens": 0}
    preview = model.preview_edit("research", json.dumps(after))
    assert preview == EditPreview(
        "research",
        before,
        after,
        None,
        [
            Change("change", "$.payload.notes[0]", before["notes"][0], "Bees dance."),
            Change("change", "$.payload.tokens", before["tokens"], 0),
        ],
        f"{NOTES} v1, checked against the agent's declared formats",
        AgentCheckpoint(NOTES, 1, after),
    )
    assert preview.ok

    without = DebuggerModel(db, run_id)  # no workflow: nothing to check the format against
    without.select_frame(model.frame_no)
    preview = without.preview_edit("research", json.dumps(after))
    assert preview.ok and preview.after == after
    assert preview.format_note == (
        f"{NOTES} v1, as stored (open the debugger with workflow= to check it against the "
        "agent's declared formats)"
    )


def test_an_edit_preview_says_why_an_edit_would_be_refused(db: st.Database) -> None:
    run_id, wf, _ = _run(db)
    model = DebuggerModel(db, run_id, workflow=wf)
    draft = db.snapshot(run_id).payload("review")
    checked = f"{DRAFT} v1, checked against the agent's declared formats"

    bad = '{"body": }'
    assert model.preview_edit("review", bad) == EditPreview(
        "review",
        draft,
        error=f"the edited checkpoint of 'review' is not valid JSON: {_json_error(bad)}",
        format_note=checked,
    )
    # the reviewer consumes the writer's draft as a task fork, never resumes from one
    refused = model.preview_edit("review", json.dumps({**draft, "body": "shorter"}))
    assert refused == EditPreview(
        "review",
        draft,
        error=(
            f"agent of 'review' declares no resume capability for {DRAFT} v1; a fork could "
            "not hand it this checkpoint"
        ),
        format_note=checked,
    )
    assert not refused.ok
    assert model.request_fork(edit_node="review", edit_text="{}") is None
    assert model.message == Message("error", f"Cannot fork: {refused.error}")

    model.select_frame(0)
    assert model.preview_edit("research", "{}") == EditPreview(
        "research", None, error="'research' has no checkpoint here"
    )


def test_an_edit_is_refused_when_the_agent_no_longer_declares_the_stored_format(
    db: st.Database,
) -> None:
    run_id, _, _ = _run(db)  # the research checkpoints are demo.notes v1
    notes = json.dumps(db.snapshot(run_id).payload("research"))
    moved_on = Declares(
        [CheckpointFormat(NOTES, [2]), CheckpointFormat("demo.summary", [1, 3])],
        [
            CheckpointCapability(NOTES, [2], ["resume"]),
            CheckpointCapability("demo.summary", [1, 3], ["resume"]),
        ],
    )
    model = DebuggerModel(db, run_id, workflow=_workflow_with_research(moved_on))
    preview = model.preview_edit("research", notes)
    assert preview.error == (
        f"agent of 'research' does not declare {NOTES} v1 (it declares: {NOTES} v[2], "
        "demo.summary v[1, 3]); it could not resume from this checkpoint"
    )
    assert preview.after is None and preview.checkpoint is None and preview.changes == []

    silent = DebuggerModel(db, run_id, workflow=_workflow_with_research(lambda request: {}))
    assert silent.preview_edit("research", notes).error == (
        f"agent of 'research' does not declare {NOTES} v1 (it declares: none); it could not "
        "resume from this checkpoint"
    )


# --- the editor's text --------------------------------------------------------------------


def test_the_editor_holds_the_newest_iterations_checkpoint_as_indented_unescaped_json(
    db: st.Database,
) -> None:
    record, fence = db.store.create_run("loop", None)
    published = {}
    for iteration in (0, 1):
        key = db.store.start_attempt(fence, "loop", iteration).key
        payload = {"round": iteration, "note": f"café № {iteration}", "items": [iteration]}
        db.store.publish(fence, key, AgentCheckpoint("loop.state", 1, payload))
        published[iteration] = payload
    db.store.start_attempt(fence, "other", 0)  # started, nothing published yet
    model = DebuggerModel(db, record.run_id)

    ref = model.newest_ref("loop")
    assert ref is not None and ref.iteration == 1
    text = model.checkpoint_text("loop")
    assert json.loads(text) == published[1]
    assert "café № 1" in text  # as a person wrote it, not \u escapes
    lines = text.splitlines()
    assert lines[0] == "{" and '  "round": 1' in lines  # indented by two
    assert "    1" in lines  # the list's item, two levels deep
    assert model.newest_ref("other") is None
    assert model.checkpoint_text("other") == ""


# --- confirming ------------------------------------------------------------------------------


def test_a_confirmed_fork_reports_the_new_run_shows_it_in_the_tree_and_audits_why(
    db: st.Database,
) -> None:
    run_id, _, _ = _run(db)
    model = DebuggerModel(db, run_id)
    model.breakpoints.toggle("review", "before")  # held for the fork: the run has ended
    frame = _frame_of(db, run_id, "write", "finished")
    model.select_frame(frame)
    model.request_fork(reset=["review"], reason="review again")
    heard = Heard(model)
    runs = _run_ids(db)

    result = model.confirm()

    (child,) = _run_ids(db) - runs
    record = db.store.get_run(child)
    assert result == ActionResult(
        "fork",
        True,
        f"Forked run {run_id} at frame {frame}: new run {child} (not started, frame 0). "
        f"Open it in the fork tree; run it with Replay or db.resume({child!r}, workflow).",
        child,
        0,
    )
    assert model.last_result == result and model.message == Message("success", result.text)
    assert model.pending is None
    assert heard.take() == ["pending", "tree", "message"]
    edge = model.edge(child)
    assert edge is not None and (edge.parent_run_id, edge.parent_frame_no) == (run_id, frame)
    assert (record.parent_run_id, record.parent_frame_no) == (run_id, frame)
    assert "review" not in {k[0] for k in db.snapshot(child).nodes}  # reset
    assert set(pause_history(db.store.pause_frames(child)).before) == {"review"}
    assert ("fork", frame, {"child": child, "reason": "review again", "reset": ["review"]}) in (
        audit(db, run_id)
    )
    assert model.run_id == run_id and model.frame_no == frame  # the person stays put


def test_confirming_with_nothing_pending_does_nothing(db: st.Database) -> None:
    run_id, _, _ = _run(db)
    model = DebuggerModel(db, run_id)
    heard = Heard(model)
    assert model.confirm() is None
    assert heard.take() == [] and model.last_result is None and model.message is None


def test_a_fork_asked_for_on_another_run_is_dropped_when_the_run_changes(
    db: st.Database,
) -> None:
    run_id, _, _ = _run(db)
    other, _, _ = _run(db)
    model = DebuggerModel(db, run_id)
    model.request_fork()
    heard = Heard(model)
    model.switch_run(other)  # the pending fork was for the first run: its box closes
    assert model.pending is None and "pending" in heard.take()
    runs = _run_ids(db)
    assert model.confirm() is None
    assert model.last_result is None and model.message is None
    assert _run_ids(db) == runs


def test_an_action_the_library_refuses_reports_its_reason(db: st.Database) -> None:
    run_id, _, _ = _run(db)
    model = DebuggerModel(db, run_id)
    frame = model.last_frame
    model.request_fork()
    db.rewind(run_id, 5, confirm=True)  # someone else rewinds it meanwhile
    assert _error_of(lambda: db.fork(run_id, frame))  # the library would refuse it too
    runs = _run_ids(db)
    result = model.confirm()  # the debugger sees the rewind first, and says so
    reason = f"{changed_elsewhere(run_id, 5)} Nothing was done: look at it and ask again"
    assert result == ActionResult("fork", False, f"Fork failed: {reason}")
    assert model.message == Message("error", result.text)
    assert _run_ids(db) == runs

    model.request_undo_rewind()
    db.undo_rewind(run_id)  # someone else undoes it first: nothing is left to undo
    reason = _error_of(lambda: db.undo_rewind(run_id))
    result = model.confirm()
    assert result == ActionResult("undo_rewind", False, f"Undo rewind failed: {reason}")


def test_an_unexpected_failure_is_reported_not_raised_and_its_traceback_logged(
    db: st.Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    run_id, _, _ = _run(db)
    model = DebuggerModel(db, run_id)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the disk is full")

    monkeypatch.setattr(db, "fork", broken)
    monkeypatch.setattr(db, "undo_rewind", broken)
    model.request_fork()
    result = model.confirm()
    assert result == ActionResult(
        "fork", False, "Fork failed unexpectedly: OSError: the disk is full"
    )
    assert model.message == Message("error", result.text)
    (logged,) = [r for r in caplog.records if r.name == "smithers_tt.widgets._control"]
    assert logged.levelname == "ERROR" and logged.getMessage() == "fork failed"
    assert logged.exc_info is not None and logged.exc_info[0] is OSError  # the traceback
    model.request_undo_rewind()
    result = model.confirm()
    assert result is not None
    assert result.text == "Undo rewind failed unexpectedly: OSError: the disk is full"


def test_a_rewind_past_a_fork_asks_again_in_the_librarys_words(db: st.Database) -> None:
    run_id, _, _ = _run(db)
    child = db.fork(run_id, 9).id
    reason = _error_of(lambda: db.rewind(run_id, 5, confirm=True))  # changes nothing
    assert child in reason
    model = DebuggerModel(db, run_id)
    model.select_frame(5)
    first = model.request_rewind(reason="too far")
    assert first is not None
    heard = Heard(model)
    result = model.confirm()
    assert result == ActionResult("rewind", False, f"Rewind not done yet: {reason}")
    assert model.message == Message("error", result.text)
    again = model.pending
    assert again is not None
    assert (again.action, again.run_id, again.frame_no) == ("rewind", run_id, 5)
    assert again.summary == (
        f"{reason}. Confirm to rewind anyway: the forked runs stay as they are, and the fork "
        "tree marks their fork point as rewound away."
    )
    assert again.options == {"reason": "too far", "force": True}
    assert heard.take() == ["pending", "pending", "message", "message"]


# --- replay -----------------------------------------------------------------------------------


def test_a_replay_forks_with_the_form_and_runs_the_new_run_to_its_end(db: st.Database) -> None:
    run_id, wf, agents = _run(db)
    model = DebuggerModel(db, run_id, workflow=wf)
    last = model.last_frame  # the run finished: only what the form resets runs again
    model.request_replay(reset=["write"], input_text='{"topic": "ant"}')
    runs = _run_ids(db)
    result = model.confirm()
    (child,) = _run_ids(db) - runs
    record = db.store.get_run(child)
    assert record.status == "finished" and record.input == {"topic": "ant"}
    assert result == ActionResult(
        "replay",
        True,
        f"Replayed run {run_id} from frame {last} as run {child}: finished at frame "
        f"{record.clock}.",
        child,
        record.clock,
    )
    assert model.message == Message("success", result.text)
    assert (agents.researcher.calls, agents.writer.calls, agents.reviewer.calls) == (1, 2, 2)
    assert model.run_id == child and model.frame_no == record.clock  # it shows the replay


def test_a_replay_whose_execution_fails_still_shows_the_fork(db: st.Database) -> None:
    run_id, _, _ = _run(db)
    other = st.Workflow("demo-report")  # same name, another definition: resume refuses it
    other.task("research", agent=lambda request: {"topic": "x", "notes": []})
    model = DebuggerModel(db, run_id, workflow=other)
    frame = _frame_of(db, run_id, "research", "finished")
    model.select_frame(frame)
    model.request_replay(reset=["write"])
    heard = Heard(model)
    runs = _run_ids(db)
    result = model.confirm()
    (child,) = _run_ids(db) - runs
    reason = _error_of(lambda: db.resume(child, other))
    assert result == ActionResult(
        "replay",
        False,
        f"Replay failed: run {run_id} was forked at frame {frame} into run {child}, but "
        f"executing it failed: {reason}",
        child,
        0,
    )
    assert model.message == Message("error", result.text)
    assert heard.take() == ["pending", "tree", "message"]
    assert model.edge(child) is not None and model.run_id == run_id
    assert "write" not in {k[0] for k in db.snapshot(child).nodes}  # forked with the form


def test_a_replay_in_a_running_loop_starts_and_returns_at_once(db: st.Database) -> None:
    run_id, wf, agents = _run(db)
    model = DebuggerModel(db, run_id, workflow=wf)
    last = model.last_frame

    async def main() -> tuple[ActionResult | None, str, str]:
        model.request_replay(reset=["review"])
        result = model.confirm()
        status = db.store.get_run(model.run_id).status  # before the replay got a turn
        assert model.background is not None
        await model.background
        await asyncio.sleep(0)
        return result, model.run_id, status

    result, child, started = asyncio.run(main())
    assert result == ActionResult(
        "replay",
        True,
        f"Replaying run {run_id} from frame {last} as run {child}; the timeline follows it live.",
        child,
        0,
    )
    assert started != "finished"
    assert db.store.get_run(child).status == "finished"
    assert (agents.writer.calls, agents.reviewer.calls) == (1, 2)  # only review ran again


def test_a_background_replay_that_crashes_names_the_exception(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id, wf, _ = _run(db)

    async def crashing(child_id: str, workflow: Any, **options: Any) -> Any:
        await asyncio.sleep(0)
        raise KeyError("the lost key")

    monkeypatch.setattr(db, "aresume", crashing)
    model = DebuggerModel(db, run_id, workflow=wf)

    async def main() -> str:
        model.request_replay(reset=["review"])
        result = model.confirm()
        assert result is not None and result.ok
        with pytest.raises(KeyError):
            await model.background
        await asyncio.sleep(0)
        return result.run_id

    child = asyncio.run(main())
    assert model.message == Message(
        "error", f"Replay of run {child} failed: KeyError: 'the lost key'"
    )


def test_a_background_replay_cut_off_from_the_database_still_says_why(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id, wf, _ = _run(db)
    gone = TransientStoreError("the database stayed unreachable through every retry")
    model = DebuggerModel(db, run_id, workflow=wf)

    async def cut_off(child_id: str, workflow: Any, **options: Any) -> Any:
        await asyncio.sleep(0)

        def unreachable(*args: Any, **kwargs: Any) -> Any:
            raise gone

        monkeypatch.setattr(db.store, "get_run", unreachable)  # the refresh fails as well
        raise gone

    monkeypatch.setattr(db, "aresume", cut_off)

    async def main() -> str:
        model.request_replay(reset=["review"])
        result = model.confirm()
        assert result is not None and result.ok and model.run_id == result.run_id
        with pytest.raises(TransientStoreError):
            await model.background
        await asyncio.sleep(0)
        return result.run_id

    child = asyncio.run(main())
    assert model.message == Message("error", f"Replay of run {child} failed: {gone.message}")
