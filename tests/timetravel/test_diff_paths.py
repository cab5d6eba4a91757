"""The diff, case by case, on snapshots built by hand (no database).

``tests/timetravel/test_diff.py`` checks the diff on real runs; these tests pin each rule of
``diff`` and ``json_diff`` that a user reads in the debugger, the CLI and the HTML view: which
node, attempt and checkpoint changed, under which label, with which old and new value.
"""

from __future__ import annotations

from typing import Any

import pytest

from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.store import CheckpointRef
from smithers_tt.timetravel import (
    AttemptView,
    Change,
    NodeView,
    Snapshot,
    SnapshotDiff,
    diff,
    json_diff,
)

HASH_A, HASH_B = "a" * 64, "b" * 64


def ref(node: str, iteration: int = 0, attempt: int = 1, seq: int = 0, h: str = HASH_A):
    return CheckpointRef("r", node, iteration, attempt, seq, h, "json", 1, "progress", None, 0)


def snap(
    frame_no: int = 0, *, status: str = "running", nodes=(), attempts=(), refs=(), loader=None
):
    """A snapshot of run ``r`` holding the views and refs given."""
    s = Snapshot("r", frame_no, status=status, loader=loader)
    s.nodes = {(n.node_id, n.iteration): n for n in nodes}
    s.attempts = {(a.node_id, a.iteration, a.attempt): a for a in attempts}
    s.refs = {(r.node_id, r.iteration, r.attempt, r.sequence): r for r in refs}
    return s


def loader_of(payloads: dict[str, Any]):
    """A loader that reads the checkpoint of each content hash from ``payloads``."""

    def load(r: CheckpointRef) -> AgentCheckpoint:
        return AgentCheckpoint(r.node_id, 1, payloads[r.content_hash])

    return load


def as_tuples(changes: list[Change]) -> list[tuple[str, str, Any, Any]]:
    """The changes as (op, path, old, new), for compact expectations."""
    return [(c.op, c.path, c.old, c.new) for c in changes]


# --- Change and SnapshotDiff as values ---------------------------------------------------------


def test_a_change_without_values_has_none_on_both_sides():
    assert Change("add", "$.a") == Change("add", "$.a", None, None)
    assert (Change("add", "$").old, Change("add", "$").new) == (None, None)


def test_a_new_snapshot_diff_is_empty():
    d = SnapshotDiff(("r", 0), ("r", 1))
    assert (d.status, d.nodes, d.attempts, d.outputs, d.checkpoints) == (None, [], [], [], {})
    assert d.empty


@pytest.mark.parametrize(
    "section",
    [
        {"status": ("running", "finished")},
        {"nodes": [Change("change", "n[0]", "running", "failed")]},
        {"attempts": [Change("add", "n[0]#1", None, "in_progress")]},
        {"outputs": [Change("remove", "$.n", 1, None)]},
        {"checkpoints": {"n": [Change("change", "$.payload", 1, 2)]}},
    ],
    ids=["status", "nodes", "attempts", "outputs", "checkpoints"],
)
def test_a_snapshot_diff_is_not_empty_when_any_section_has_a_change(section: dict[str, Any]):
    assert not SnapshotDiff(("r", 0), ("r", 1), **section).empty


def test_a_snapshot_diff_is_empty_when_a_checkpoint_changed_address_but_not_content():
    assert SnapshotDiff(("r", 0), ("r", 1), checkpoints={"n": [], "m": []}).empty


def test_the_html_of_a_diff_names_its_frames_and_escapes_its_values():
    d = diff(snap(3), snap(4, status="failed", nodes=[NodeView("<b>", 0, "failed", 1, None)]))
    html = d._repr_html_()
    assert "frame 3" in html and "frame 4" in html
    assert "running → failed" in html
    assert "&lt;b&gt;[0]" in html and "<b>[0]" not in html
    assert "no differences" in diff(snap(), snap())._repr_html_()


# --- json_diff: defaults, values that are not strict JSON, long repetitive lists ---------------


def test_json_diff_paths_start_at_the_root_by_default():
    assert json_diff([1], [2]) == [Change("change", "$[0]", 1, 2)]
    assert json_diff({"a": 1}, {}) == [Change("remove", "$.a", 1, None)]


def test_json_diff_still_compares_list_elements_that_are_not_strict_json():
    # tuples cannot be encoded canonically: their repr tells them apart instead
    assert json_diff([(1, 2), "x"], [(1, 3), "x"]) == [Change("change", "$[0]", (1, 2), (1, 3))]
    assert json_diff([(1, 2)], [(1, 2)]) == []
    assert json_diff([(1,), "k"], ["k"]) == [Change("remove", "$[0]", (1,), None)]


def test_json_diff_aligns_a_long_list_of_repeated_elements():
    # difflib's "autojunk" would treat the popular elements as junk and report 301 changes
    old = [1, "x"] * 150
    assert json_diff(old, ["head", *old]) == [Change("add", "$[0]", None, "head")]
    assert json_diff([*old, "tail"], old) == [Change("remove", "$[300]", "tail", None)]


def test_json_diff_names_a_replaced_element_by_its_index_in_the_new_list():
    assert json_diff(["a", "b", "c"], ["new", "a", "x", "y"]) == [
        Change("add", "$[0]", None, "new"),
        Change("change", "$[2]", "b", "x"),
        Change("change", "$[3]", "c", "y"),
    ]


# --- nodes and attempts ------------------------------------------------------------------------


def test_diff_reports_a_node_whose_last_attempt_changed_in_the_same_state():
    a = snap(nodes=[NodeView("n", 0, "running", 1, None)])
    b = snap(nodes=[NodeView("n", 0, "running", 2, None)])
    assert diff(a, b).nodes == [Change("change", "n[0]", "running", "running")]


def test_diff_ignores_a_node_output_seen_through_outputs_only():
    a = snap(nodes=[NodeView("n", 0, "finished", 1, {"v": 1})])
    b = snap(nodes=[NodeView("n", 0, "finished", 1, {"v": 2})])
    d = diff(a, b)
    assert d.nodes == []
    assert d.outputs == [Change("change", "$.n.v", 1, 2)]


def test_diff_labels_nodes_and_attempts_by_iteration_and_attempt_in_key_order():
    a = snap(
        nodes=[NodeView("loop", 2, "finished", 1, None), NodeView("gone", 0, "failed", 1, None)],
        attempts=[AttemptView("loop", 2, 1, "finished"), AttemptView("gone", 0, 3, "failed")],
    )
    b = snap(
        nodes=[NodeView("loop", 2, "failed", 1, None), NodeView("loop", 3, "running", 1, None)],
        attempts=[AttemptView("loop", 2, 1, "failed"), AttemptView("loop", 3, 4, "in_progress")],
    )
    d = diff(a, b)
    assert as_tuples(d.nodes) == [
        ("remove", "gone[0]", "failed", None),
        ("change", "loop[2]", "finished", "failed"),
        ("add", "loop[3]", None, "running"),
    ]
    assert as_tuples(d.attempts) == [
        ("remove", "gone[0]#3", "failed", None),
        ("change", "loop[2]#1", "finished", "failed"),
        ("add", "loop[3]#4", None, "in_progress"),
    ]


def test_diff_ignores_attempt_fields_other_than_the_state():
    a = snap(attempts=[AttemptView("n", 0, 1, "failed", error="boom", started_at_ms=1)])
    b = snap(attempts=[AttemptView("n", 0, 1, "failed", error="bang", started_at_ms=2)])
    assert diff(a, b).attempts == []


def test_diff_reports_the_status_and_the_frames_it_compares():
    d = diff(snap(2, status="interrupted"), snap(9, status="running"))
    assert (d.a, d.b, d.status) == (("r", 2), ("r", 9), ("interrupted", "running"))
    assert diff(snap(2), snap(9)).status is None


# --- checkpoints -------------------------------------------------------------------------------


def test_diff_compares_the_payloads_of_each_nodes_newest_checkpoint_path_by_path():
    load = loader_of({HASH_A: {"n": [1]}, HASH_B: {"n": [1, 2]}, "c" * 64: {"old": True}})
    # the older checkpoint ("c") of attempt 1 is shadowed by the newer ones on both sides
    a = snap(refs=[ref("w", attempt=1, seq=0, h="c" * 64), ref("w", attempt=1, seq=1)], loader=load)
    b = snap(refs=[ref("w", attempt=2, seq=0, h=HASH_B)], loader=load)
    assert diff(a, b).checkpoints == {"w": [Change("add", "$.payload.n[1]", None, 2)]}


def test_diff_skips_checkpoints_with_the_same_content_address_without_loading_them():
    def load(r: CheckpointRef) -> AgentCheckpoint:
        raise AssertionError("an unchanged checkpoint was read")

    # a different attempt with the same content: nothing to show, nothing to read
    a = snap(refs=[ref("a", attempt=1), ref("w", attempt=1)], loader=load)
    b = snap(refs=[ref("a", attempt=2), ref("w", attempt=2)], loader=load)
    assert diff(a, b).checkpoints == {}
    # ... and the nodes after an unchanged one are still compared
    b = snap(refs=[ref("a", attempt=2), ref("w", attempt=2, h=HASH_B)])
    assert diff(a, b, load=loader_of({HASH_A: 1, HASH_B: 2})).checkpoints == {
        "w": [Change("change", "$.payload", 1, 2)]
    }


def test_diff_labels_a_looped_nodes_checkpoints_by_iteration():
    load = loader_of({HASH_A: {"i": 0}, HASH_B: {"i": 1}})
    a = snap(refs=[ref("loop", 0), ref("loop", 1)], loader=load)
    b = snap(refs=[ref("loop", 0), ref("loop", 1, h=HASH_B), ref("loop", 2)], loader=load)
    d = diff(a, b)
    assert sorted(d.checkpoints) == ["loop[1]", "loop[2]"]
    assert d.checkpoints["loop[1]"] == [Change("change", "$.payload.i", 0, 1)]
    (added,) = d.checkpoints["loop[2]"]
    assert (added.op, added.path, added.old, added.new["payload"]) == ("add", "$", None, {"i": 0})


def test_diff_reports_a_checkpoint_on_one_side_only_as_removed_with_its_content():
    load = loader_of({HASH_A: {"k": "v"}})
    (change,) = diff(snap(refs=[ref("w")], loader=load), snap(loader=load)).checkpoints["w"]
    assert (change.op, change.path, change.new) == ("remove", "$", None)
    assert change.old == AgentCheckpoint("w", 1, {"k": "v"}).to_json()


@pytest.mark.parametrize("side", ["a", "b"])
def test_diff_uses_the_loader_of_either_snapshot(side: str):
    load = loader_of({HASH_A: {"x": 1}, HASH_B: {"x": 2}})
    a = snap(refs=[ref("w")], loader=load if side == "a" else None)
    b = snap(refs=[ref("w", h=HASH_B)], loader=load if side == "b" else None)
    assert diff(a, b).checkpoints == {"w": [Change("change", "$.payload.x", 1, 2)]}


def test_diff_prefers_the_loader_it_is_given_over_the_snapshots_own():
    mine = loader_of({HASH_A: {"x": "mine"}, HASH_B: {"x": "mine too"}})
    theirs = loader_of({HASH_A: {"x": "theirs"}, HASH_B: {"x": "theirs too"}})
    a, b = snap(refs=[ref("w")], loader=theirs), snap(refs=[ref("w", h=HASH_B)], loader=theirs)
    assert diff(a, b, load=mine).checkpoints["w"] == [
        Change("change", "$.payload.x", "mine", "mine too")
    ]


def test_diff_without_any_loader_shows_content_addresses_on_each_side():
    a, b = snap(refs=[ref("w"), ref("gone")]), snap(refs=[ref("w", h=HASH_B), ref("new")])
    assert diff(a, b).checkpoints == {
        "gone": [Change("remove", "$", HASH_A, None)],
        "new": [Change("add", "$", None, HASH_A)],
        "w": [Change("change", "$", HASH_A, HASH_B)],
    }
