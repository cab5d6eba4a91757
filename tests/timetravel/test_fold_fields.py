"""The fold, field by field, on frames written by hand (no database).

Each test states what a frame kind makes visible in every field of the snapshot, so that a
snapshot that silently loses an error, a resume point or a timestamp fails here; and that a
corrupt frame is refused with a message naming the frame, the run and what is wrong.
"""

from __future__ import annotations

from typing import Any

import pytest

from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.errors import SnapshotInvalid
from smithers_tt.store import CheckpointRef, Frame
from smithers_tt.timetravel import MAX_SNAPSHOT_ROWS, AttemptView, NodeView, Snapshot, apply, fold

HASH = "f" * 64


def frames(*specs: dict[str, Any]) -> list[Frame]:
    """Frames 0, 1, ... of run ``r``, one per spec (``created_at_ms`` defaults to 100 * n)."""
    return [
        Frame(**{"run_id": "r", "frame_no": n, "created_at_ms": 100 * n, **spec})
        for n, spec in enumerate(specs)
    ]


def node(node_id: str, state: str, iteration: int = 0, **more: Any) -> dict[str, Any]:
    return {
        "kind": "node_state",
        "node_id": node_id,
        "iteration": iteration,
        "state": state,
        **more,
    }


def started(node_id: str, attempt: int = 1, iteration: int = 0, **more: Any) -> dict[str, Any]:
    return {
        "kind": "attempt_started",
        "node_id": node_id,
        "iteration": iteration,
        "attempt": attempt,
        **more,
    }


def finished(node_id: str, state: str, attempt: int = 1, **more: Any) -> dict[str, Any]:
    return {
        "kind": "attempt_finished",
        "node_id": node_id,
        "iteration": 0,
        "attempt": attempt,
        "state": state,
        **more,
    }


def checkpoint(node_id: str, attempt: int = 1, sequence: int = 0, **more: Any) -> dict[str, Any]:
    spec = {
        "kind": "checkpoint",
        "node_id": node_id,
        "iteration": 0,
        "attempt": attempt,
        "sequence": sequence,
        "content_hash": HASH,
        "codec": "json",
        "version": 3,
        "purpose": "final",
        "agent_id": "agent-7",
    }
    return {**spec, **more}


def refused(specs: list[dict[str, Any]], why: str) -> SnapshotInvalid:
    """Fold ``specs`` and return the refusal, checking it names the last frame and ``why``."""
    fs = frames(*specs)
    with pytest.raises(SnapshotInvalid) as info:
        fold("r", fs)
    last = fs[-1]
    assert str(info.value) == (
        f"frame {last.frame_no} ({last.kind}) of run r is corrupt: {why}; nothing was changed"
    )
    assert info.value.details == {"run_id": "r", "frame_no": last.frame_no}
    return info.value


# --- the run -----------------------------------------------------------------------------------


def test_a_fold_of_no_frames_is_a_running_run_before_frame_zero():
    s = fold("r", [])
    assert (s.run_id, s.frame_no, s.status, s.input, s.output, s.error) == (
        "r", -1, "running", None, None, None
    )  # fmt: skip
    assert (s.nodes, s.attempts, s.refs, s.size, s.outputs()) == ({}, {}, {}, 0, {})


def test_run_frames_set_status_input_output_and_error():
    fs = frames(
        {"kind": "run_created", "state": "queued", "data": {"input": {"topic": "bee"}}},
        {"kind": "run_claimed"},
        {"kind": "cancel_requested"},
        {"kind": "run_failed", "data": {"error": "boom", "output": None}},
    )
    assert [
        (s.status, s.input, s.output, s.error) for s in (fold("r", fs, n) for n in range(4))
    ] == [
        ("queued", {"topic": "bee"}, None, None),
        ("running", {"topic": "bee"}, None, None),
        ("running", {"topic": "bee"}, None, None),
        ("failed", {"topic": "bee"}, None, "boom"),
    ]


@pytest.mark.parametrize("kind", ["run_finished", "run_failed", "run_cancelled"])
def test_the_end_of_a_run_takes_its_state_from_the_frame_or_else_from_its_kind(kind: str):
    end = fold("r", frames({"kind": kind, "data": {"output": {"x": 1}}}))
    assert (end.status, end.output, end.error) == (kind[4:], {"x": 1}, None)
    assert fold("r", frames({"kind": kind, "state": "odd"})).status == "odd"


def test_a_run_created_without_state_or_input_keeps_what_it_had():
    fs = frames({"kind": "run_finished", "data": {"output": 1}}, {"kind": "run_created"})
    s = fold("r", fs)
    assert (s.status, s.input, s.output) == ("finished", None, 1)


def test_a_fork_frame_restates_the_parents_input_output_and_error():
    fs = frames(
        {
            "kind": "forked",
            "state": "failed",
            "data": {"input": [1], "output": {"o": 2}, "error": "e"},
        },
    )
    s = fold("r", fs)
    assert (s.status, s.input, s.output, s.error) == ("failed", [1], {"o": 2}, "e")
    # a run_created frame never touches output and error
    created = fold(
        "r",
        frames(
            {"kind": "run_finished", "data": {"output": 5, "error": "x"}},
            {"kind": "run_created", "data": {"input": 0}},
        ),
    )
    assert (created.input, created.output, created.error) == (0, 5, "x")


# --- nodes -------------------------------------------------------------------------------------


def test_node_frames_set_state_last_attempt_and_output():
    fs = frames(
        node("n", "running", attempt=1),
        node("n", "running"),  # no attempt: the last one stays
        node("n", "finished", attempt=2, data={"output": {"v": 1}}),
        node("n", "finished"),  # the same state without output keeps the output
        node("n", "failed"),  # another state without output has none
        {
            "kind": "cache_hit",
            "node_id": "c",
            "iteration": 3,
            "state": "cached",
            "data": {"output": [7]},
        },
    )
    views = [fold("r", fs, n).nodes[("n", 0)] for n in range(5)]
    assert views == [
        NodeView("n", 0, "running", 1, None),
        NodeView("n", 0, "running", 1, None),
        NodeView("n", 0, "finished", 2, {"v": 1}),
        NodeView("n", 0, "finished", 2, {"v": 1}),
        NodeView("n", 0, "failed", 2, None),
    ]
    assert fold("r", fs).nodes[("c", 3)] == NodeView("c", 3, "cached", None, [7])
    assert fold("r", frames(node("n", ""))).nodes[("n", 0)].state == "pending"


def test_outputs_are_those_of_finished_and_cached_nodes_at_their_highest_iteration():
    fs = frames(
        node("loop", "finished", 0, data={"output": "first"}),
        node("loop", "finished", 2, data={"output": "third"}),
        node("loop", "finished", 1, data={"output": "second"}),
        node("loop", "running", 3),  # a running iteration has no output yet
        node("cached", "cached", data={"output": {"c": 1}}),
        node("failed", "failed", data={"output": "partial"}),
        node("a", "finished"),  # finished without output: None, still listed
    )
    outputs = fold("r", fs).outputs()
    assert outputs == {"a": None, "cached": {"c": 1}, "loop": "third"}
    assert list(outputs) == ["a", "cached", "loop"]


# --- attempts ----------------------------------------------------------------------------------


def test_an_attempt_started_records_every_field_from_its_frame():
    fs = frames(
        started("n"),
        started(
            "m",
            2,
            1,
            state="waiting",
            data={
                "resumed_from": ["r0", "n", 1, 1, 4],
                "error": "e",
                "error_code": "c",
                "discard_resume": 1,
                "started_at_ms": 42,
                "finished_at_ms": 43,
            },
        ),
    )
    s = fold("r", fs)
    assert s.attempts[("n", 0, 1)] == AttemptView("n", 0, 1, "in_progress", started_at_ms=0)
    assert s.attempts[("m", 1, 2)] == AttemptView(
        "m", 1, 2, "waiting", ("r0", "n", 1, 1, 4), "e", "c", True, 42, 43
    )
    assert (
        fold("r", frames(node("x", "running"), started("n"))).attempts[("n", 0, 1)].started_at_ms
        == 100
    )  # no started_at_ms in the data: the frame's time


def test_a_resume_point_is_normalised_to_strings_and_ints():
    s = fold("r", frames(started("n", data={"resumed_from": [7, "n", "1", 2.0, 3]})))
    resumed = s.attempts[("n", 0, 1)].resumed_from
    assert resumed == ("7", "n", 1, 2, 3)
    assert [type(v) for v in resumed] == [str, str, int, int, int]


def test_an_attempt_finished_keeps_its_start_and_takes_its_end_from_the_frame():
    fs = frames(
        started(
            "n",
            data={
                "resumed_from": ["p", "n", 0, 1, 0],
                "started_at_ms": 5,
                "error": "old",
                "discard_resume": True,
            },
        ),
        finished("n", "failed", data={"error": "boom", "error_code": "E1"}),
    )
    assert fold("r", fs).attempts[("n", 0, 1)] == AttemptView(
        "n", 0, 1, "failed", ("p", "n", 0, 1, 0), "boom", "E1", False, 5, 100
    )
    fs = frames(started("n"), finished("n", "finished", data={"discard_resume": True}))
    view = fold("r", fs).attempts[("n", 0, 1)]
    assert (view.error, view.error_code, view.discard_resume) == (None, None, True)


# --- checkpoint refs ---------------------------------------------------------------------------


def test_a_checkpoint_frame_makes_a_ref_with_every_field():
    fs = frames(
        node("x", "running"),
        checkpoint("n", 2, 5),
        checkpoint("n", 2, 6, data={"created_at_ms": 9}),
    )
    refs = fold("r", fs).refs
    assert refs == {
        ("n", 0, 2, 5): CheckpointRef("r", "n", 0, 2, 5, HASH, "json", 3, "final", "agent-7", 100),
        ("n", 0, 2, 6): CheckpointRef("r", "n", 0, 2, 6, HASH, "json", 3, "final", "agent-7", 9),
    }


def test_a_checkpoint_frame_without_version_or_purpose_values_gets_the_defaults():
    (ref,) = fold("r", frames(checkpoint("n", version=0, purpose="", codec=""))).refs.values()
    assert (ref.version, ref.purpose, ref.codec) == (1, "progress", "")


def test_the_newest_ref_and_payload_of_a_node_are_its_highest_attempt_and_sequence():
    fs = frames(
        checkpoint("n", 1, 9, content_hash="1" * 64),
        checkpoint("n", 2, 0, content_hash="2" * 64),
        checkpoint("n", 2, 1, content_hash="3" * 64),
        checkpoint("m", 3, 0, content_hash="4" * 64),
    )
    s = fold("r", fs)
    assert s.newest_ref("n").content_hash == "3" * 64
    assert s.newest_ref("n", 1) is None and s.newest_ref("zz") is None
    assert s.payload("n") is None  # no loader: no content
    s.loader = lambda ref: AgentCheckpoint(ref.node_id, 1, {"hash": ref.content_hash[:1]})
    assert (s.payload("n"), s.payload("m"), s.payload("n", 1)) == (
        {"hash": "3"},
        {"hash": "4"},
        None,
    )
    assert s.size == 4


def test_deferred_refs_are_built_once_on_first_access():
    calls: list[int] = []
    built = {("n", 0, 1, 0): fold("r", frames(checkpoint("n"))).refs[("n", 0, 1, 0)]}

    def build():
        calls.append(1)
        return built

    s = Snapshot("r", 0)
    s.defer_refs(build)
    assert calls == []
    assert s.refs == built and s.refs == built
    assert calls == [1]
    s.refs = {}
    assert s.refs == {} and calls == [1]


# --- reset -------------------------------------------------------------------------------------


def test_a_reset_drops_the_named_nodes_with_their_attempts_and_refs():
    fs = frames(
        node("a", "finished"),
        started("a"),
        checkpoint("a"),
        node("b", "finished"),
        started("b"),
        checkpoint("b"),
        {"kind": "reset", "data": {"nodes": ["a"]}},
    )
    s = fold("r", fs)
    assert (list(s.nodes), list(s.attempts), list(s.refs)) == (
        [("b", 0)],
        [("b", 0, 1)],
        [("b", 0, 1, 0)],
    )
    assert s.status == "interrupted"
    assert fold("r", frames({"kind": "reset", "state": "queued"})).status == "queued"


def test_a_reset_clears_the_runs_output_and_error_as_the_live_run_row_does():
    ended = {"kind": "run_finished", "state": "finished", "data": {"output": {"a": 1}}}
    before = fold("r", frames(ended))
    assert (before.status, before.output) == ("finished", {"a": 1})
    s = fold("r", frames(ended, {"kind": "reset", "data": {"nodes": ["a"]}}))
    assert (s.status, s.output, s.error) == ("interrupted", None, None)


# --- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"kind": "node_state", "iteration": 0, "state": "running"}, "node_id is missing"),
        ({"kind": "node_state", "node_id": "n", "state": "running"}, "iteration is missing"),
        ({"kind": "cache_hit", "node_id": "n", "iteration": 0}, "state is missing"),
        ({"kind": "attempt_started", "iteration": 0, "attempt": 1}, "node_id is missing"),
        ({"kind": "attempt_started", "node_id": "n", "attempt": 1}, "iteration is missing"),
        ({"kind": "attempt_started", "node_id": "n", "iteration": 0}, "attempt is missing"),
        (
            {"kind": "attempt_finished", "node_id": "n", "iteration": 0, "attempt": 1},
            "state is missing",
        ),
        (
            {"kind": "attempt_finished", "node_id": "n", "iteration": 0, "state": "failed"},
            "attempt is missing",
        ),
        ({**checkpoint("n"), "sequence": None}, "sequence is missing"),
        ({**checkpoint("n"), "purpose": None}, "purpose is missing"),
        ({**checkpoint("n"), "content_hash": "f" * 63}, "its content hash is not a SHA-256"),
        ({**checkpoint("n"), "content_hash": "f" * 65}, "its content hash is not a SHA-256"),
        ({"kind": "node_started"}, "unknown frame kind 'node_started'"),
        ({"kind": "run_created", "data": [1]}, "its data is not an object"),
        (started("n", data={"resumed_from": ["a", "b", 1, 2]}), "resumed_from is not a ref key"),
        (started("n", data={"resumed_from": "a/b/1/2/3"}), "resumed_from is not a ref key"),
    ],
)
def test_a_corrupt_frame_is_refused_with_what_is_wrong(spec: dict[str, Any], why: str):
    refused([spec], why)


@pytest.mark.parametrize(
    "field",
    ["node_id", "iteration", "attempt", "sequence", "content_hash", "codec", "version", "purpose"],
)
def test_a_checkpoint_frame_missing_any_field_is_refused(field: str):
    refused([{**checkpoint("n"), field: None}], f"{field} is missing")


def test_an_attempt_that_ends_without_starting_is_refused():
    refused(
        [started("n", 1), finished("n", "failed", 2)],
        "it ends attempt ('n', 0, 2), which never started",
    )


def test_a_gap_in_the_frame_numbers_is_refused():
    fs = frames(node("a", "running"), node("a", "finished"))
    fs[1] = Frame("r", 2, "node_state", "a", 0, state="finished")
    with pytest.raises(
        SnapshotInvalid,
        match=r"^frame 2 \(node_state\) of run r is corrupt: "
        r"frames jump from 0 to 2; nothing was changed$",
    ):
        fold("r", fs)
    assert fold("r", fs, upto=1).frame_no == 0  # the fold stops before the gap


def test_a_fold_stops_at_the_frame_asked_for():
    fs = frames(node("a", "running"), node("a", "finished"), node("b", "running"))
    s = fold("r", fs, upto=1)
    assert (s.frame_no, s.nodes[("a", 0)].state, ("b", 0) in s.nodes) == (1, "finished", False)
    assert fold("r", fs, upto=0).nodes[("a", 0)].state == "running"
    assert fold("r", fs).frame_no == 2


def test_a_snapshot_may_hold_the_row_bound_but_not_one_more():
    s = Snapshot("r", 0)
    s.nodes = dict.fromkeys(range(MAX_SNAPSHOT_ROWS - 1), NodeView("x", 0, "pending", None, None))
    apply(s, Frame("r", 7, "node_state", "n", 0, state="running"))
    assert s.size == MAX_SNAPSHOT_ROWS
    with pytest.raises(SnapshotInvalid) as info:
        apply(s, Frame("r", 8, "node_state", "m", 0, state="running"))
    assert str(info.value) == (
        f"run r holds more than {MAX_SNAPSHOT_ROWS} nodes, attempts and refs at frame 8; time "
        "travel refuses snapshots this large"
    )
    assert MAX_SNAPSHOT_ROWS == 1_000_000


def test_the_row_bound_counts_nodes_attempts_and_refs_together():
    s = Snapshot("r", 0)
    half = MAX_SNAPSHOT_ROWS // 2
    s.attempts = dict.fromkeys(range(half), AttemptView("x", 0, 1, "in_progress"))
    s.refs = dict.fromkeys(range(MAX_SNAPSHOT_ROWS - half - 1), None)
    apply(s, Frame("r", 1, "node_state", "n", 0, state="running"))
    assert s.size == MAX_SNAPSHOT_ROWS
    with pytest.raises(SnapshotInvalid, match="holds more than 1000000 nodes, attempts and refs"):
        apply(s, Frame("r", 2, "node_state", "m", 0, state="running"))


def test_the_html_of_a_snapshot_shows_its_nodes_and_refs_escaped():
    fs = frames(node("<i>", "finished", data={"output": "done"}), checkpoint("n", 2, 5))
    html = fold("r", fs)._repr_html_()
    assert "&lt;i&gt;" in html and "<i>" not in html
    assert "done" in html and "json v3" in html and HASH[:12] in html


def test_a_released_run_is_queued_again_until_the_next_claim():
    fs = frames(
        {"kind": "run_created", "state": "queued"},
        {"kind": "run_claimed"},
        {"kind": "run_released", "state": "queued"},
        {"kind": "run_claimed"},
        {"kind": "run_released"},
    )
    assert [fold("r", fs, n).status for n in range(5)] == [
        "queued", "running", "queued", "running", "queued"
    ]  # fmt: skip
