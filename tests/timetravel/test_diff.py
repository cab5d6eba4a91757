"""The diff: what changed between two JSON values, and between two snapshots of real runs.

``json_diff`` is what the debugger, the CLI and the LangGraph view show path by path; ``diff``
compares whole snapshots (status, nodes, attempts, outputs, checkpoint payloads).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.checkpoint import MAX_CHECKPOINT_BYTES, AgentCheckpoint
from smithers_tt.demo import demo_workflow
from smithers_tt.store import CheckpointRef
from smithers_tt.timetravel import Change, Snapshot, diff, json_diff
from tests.timetravel.conftest import Demo, fresh_workflow

# --- paths -----------------------------------------------------------------------------------


def test_json_diff_names_a_nested_list_element_by_its_path():
    old = {"a": {"b": [10, 11, 12]}}
    new = {"a": {"b": [10, 11, 99]}}
    assert json_diff(old, new) == [Change("change", "$.a.b[2]", 12, 99)]


@pytest.mark.parametrize(
    ("key", "path"),
    [
        ("two words", '$["two words"]'),
        ("1st", '$["1st"]'),
        ("a.b", '$["a.b"]'),
        ("", '$[""]'),
        ('say "hi"', '$["say \\"hi\\""]'),
        ("new\nline", '$["new\\nline"]'),
        ("snake_case", "$.snake_case"),
        ("café", "$.café"),
    ],
    ids=["space", "digit_first", "dot", "empty", "quotes", "newline", "identifier", "unicode"],
)
def test_json_diff_quotes_a_key_only_when_it_is_not_an_identifier(key, path):
    assert json_diff({key: 1}, {key: 2}) == [Change("change", path, 1, 2)]
    assert json_diff({}, {key: 2}) == [Change("add", path, None, 2)]


def test_json_diff_starts_paths_at_the_path_given():
    changes = json_diff({"notes": ["a"]}, {"notes": ["b"]}, "$.payload")
    assert changes == [Change("change", "$.payload.notes[0]", "a", "b")]


# --- added, removed, changed -----------------------------------------------------------------


def test_json_diff_reports_nothing_for_equal_values():
    value = {"a": [1, 2.5, "x", None, True, {"b": []}], "c": {}}
    assert json_diff(value, {"c": {}, "a": [1, 2.5, "x", None, True, {"b": []}]}) == []


def test_json_diff_reports_added_removed_and_changed_keys_in_key_order():
    old = {"keep": 1, "gone": [1], "edit": "x", "nested": {"z": 1}}
    new = {"keep": 1, "added": {"k": 2}, "edit": "y", "nested": {"z": 1, "a": 0}}
    assert json_diff(old, new) == [
        Change("add", "$.added", None, {"k": 2}),
        Change("change", "$.edit", "x", "y"),
        Change("remove", "$.gone", [1], None),
        Change("add", "$.nested.a", None, 0),
    ]


def test_json_diff_reports_a_value_that_became_null_as_a_change_not_a_removal():
    assert json_diff({"a": 1}, {"a": None}) == [Change("change", "$.a", 1, None)]
    assert json_diff({"a": None}, {}) == [Change("remove", "$.a", None, None)]


# --- lists -----------------------------------------------------------------------------------


def test_json_diff_reports_an_insertion_at_the_head_of_a_long_list_as_one_change():
    old = [f"note {i}" for i in range(200)]
    new = ["first", *old]
    assert json_diff(old, new) == [Change("add", "$[0]", None, "first")]
    assert json_diff(new, old) == [Change("remove", "$[0]", "first", None)]


def test_json_diff_reports_insertions_and_removals_in_the_middle_at_their_indices():
    old = ["a", "b", "c", "d", "e"]
    new = ["a", "c", "d", "X", "Y", "e"]
    assert json_diff(old, new) == [
        Change("remove", "$[1]", "b", None),
        Change("add", "$[3]", None, "X"),
        Change("add", "$[4]", None, "Y"),
    ]


def test_json_diff_goes_inside_list_elements_replaced_one_for_one():
    old = {"messages": [{"role": "user", "content": "hi"}, {"role": "ai", "content": "yo"}]}
    new = {"messages": [{"role": "user", "content": "hi"}, {"role": "ai", "content": "hey"}]}
    assert json_diff(old, new) == [Change("change", "$.messages[1].content", "yo", "hey")]


def test_json_diff_reports_a_replaced_run_of_unequal_length_as_removals_then_additions():
    old = [0, "a", "b", 9]
    new = [0, "x", "y", "z", 9]
    assert json_diff(old, new) == [
        Change("remove", "$[1]", "a", None),
        Change("remove", "$[2]", "b", None),
        Change("add", "$[1]", None, "x"),
        Change("add", "$[2]", None, "y"),
        Change("add", "$[3]", None, "z"),
    ]


def test_json_diff_aligns_equal_objects_in_lists_whatever_their_key_order():
    old = [{"a": 1, "b": 2}, {"c": 3}]
    new = [{"n": 0}, {"b": 2, "a": 1}, {"c": 3}]
    assert json_diff(old, new) == [Change("add", "$[0]", None, {"n": 0})]


def test_json_diff_reports_every_element_of_a_list_that_was_emptied():
    assert json_diff({"l": [1, 2]}, {"l": []}) == [
        Change("remove", "$.l[0]", 1, None),
        Change("remove", "$.l[1]", 2, None),
    ]


# --- nested JSON -----------------------------------------------------------------------------


def test_json_diff_reports_a_change_deep_inside_nested_objects_and_lists():
    def tree(leaf: Any) -> Any:
        return {"run": {"steps": [{"id": 1}, {"id": 2, "tool": {"args": [[0, leaf]]}}]}}

    assert json_diff(tree("old"), tree("new")) == [
        Change("change", "$.run.steps[1].tool.args[0][1]", "old", "new")
    ]


def test_json_diff_reports_a_whole_subtree_when_a_key_appears():
    assert json_diff({"a": {}}, {"a": {"b": {"c": [1, {"d": 2}]}}}) == [
        Change("add", "$.a.b", None, {"c": [1, {"d": 2}]})
    ]


# --- types -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (1, 1.0),
        (1, True),
        (1.0, True),
        (0, False),
        (0, None),
        ("1", 1),
        ("", None),
        ([], {}),
        ({}, None),
        ([1], {"0": 1}),
    ],
    ids=["int_float", "int_bool", "float_bool", "zero_false", "zero_null", "str_int",
         "empty_str_null", "list_object", "object_null", "list_object_full"],
)  # fmt: skip
def test_json_diff_reports_a_change_of_type_even_when_python_calls_the_values_equal(old, new):
    assert json_diff({"v": old}, {"v": new}) == [Change("change", "$.v", old, new)]
    assert json_diff([old], [new]) == [Change("change", "$[0]", old, new)]
    assert json_diff(old, new) == [Change("change", "$", old, new)]


# --- payloads near the size bound ------------------------------------------------------------


def near_bound_notes() -> list[str]:
    """A list of notes whose checkpoint is just under the 16 MiB bound."""
    notes = [f"{i:05d}" + "x" * 16_000 for i in range(1_040)]
    size = AgentCheckpoint("notes", 1, {"notes": notes}).encode().size
    assert MAX_CHECKPOINT_BYTES - 200_000 < size <= MAX_CHECKPOINT_BYTES
    return notes


def test_json_diff_of_payloads_near_the_size_bound_reports_only_what_changed():
    old = near_bound_notes()
    new = [*old]
    new[500] = new[500][:-1] + "y"
    del new[1_000]
    new.insert(0, "head")
    assert json_diff({"notes": old}, {"notes": new}) == [
        Change("add", "$.notes[0]", None, "head"),
        Change("change", "$.notes[501]", old[500], new[501]),
        Change("remove", "$.notes[1000]", old[1_000], None),
    ]


def test_json_diff_of_one_string_near_the_size_bound_reports_both_sides_whole():
    old = "a" * (MAX_CHECKPOINT_BYTES - 100)
    new = old[:-1] + "b"
    assert json_diff({"text": old}, {"text": new}) == [Change("change", "$.text", old, new)]


# --- whole snapshots of real runs ------------------------------------------------------------


def first_attempt_end(demo: Demo) -> int:
    """The frame where the researcher's first (failed) attempt ended."""
    return demo.frame("attempt_finished", "research", attempt=1)


def test_diff_of_a_snapshot_with_itself_is_empty(demo: Demo):
    snap = demo.run.snapshot()
    result = diff(snap, demo.run.snapshot())
    assert result.empty
    assert (result.status, result.nodes, result.attempts, result.outputs) == (None, [], [], [])
    assert result.checkpoints == {}


def test_diff_of_an_early_frame_and_the_end_shows_what_the_run_did_since(demo: Demo):
    run, store = demo.run, demo.db.store
    early = first_attempt_end(demo)
    result = diff(run.snapshot(early), run.snapshot())
    assert (result.a, result.b) == ((run.id, early), (run.id, run.refresh().record.clock))
    assert result.status == ("running", "finished")
    assert result.nodes == [
        Change("change", "research[0]", "running", "finished"),
        Change("add", "review[0]", None, "finished"),
        Change("add", "write[0]", None, "finished"),
    ]
    assert result.attempts == [
        Change("add", "research[0]#2", None, "finished"),
        Change("add", "review[0]#1", None, "finished"),
        Change("add", "write[0]#1", None, "finished"),
    ]
    nodes = ("research", "review", "write")
    assert result.outputs == [Change("add", f"$.{n}", None, run.output[n]) for n in nodes]
    assert sorted(result.checkpoints) == ["research", "review", "write"]
    for node in ("review", "write"):  # checkpoints of nodes that had not started are added
        newest = store.load(store.newest_ref(run.id, node, 0)).to_json()
        assert result.checkpoints[node] == [Change("add", "$", None, newest)]
    # the researcher's second attempt resumed from its first: only its new notes differ
    research = result.checkpoints["research"]
    assert [c.op for c in research if c.path.startswith("$.payload.notes")] == ["add", "add"]
    assert all(c.path.startswith("$.payload.") for c in research)


def test_diff_of_the_end_and_an_early_frame_removes_what_the_early_frame_lacks(demo: Demo):
    run = demo.run
    result = diff(run.snapshot(), run.snapshot(first_attempt_end(demo)))
    assert result.status == ("finished", "running")
    assert [(c.op, c.path) for c in result.nodes] == [
        ("change", "research[0]"),
        ("remove", "review[0]"),
        ("remove", "write[0]"),
    ]
    assert {c.op for c in result.attempts} == {"remove"}
    assert {c.op for c in result.outputs} == {"remove"}
    for node in ("review", "write"):
        (change,) = result.checkpoints[node]
        assert (change.op, change.path, change.new) == ("remove", "$", None)
        assert change.old["payload"] == run.checkpoint(node).payload


def test_diff_of_the_first_frame_and_the_end_only_adds(demo: Demo):
    result = diff(demo.run.snapshot(0), demo.run.snapshot())
    changes = [*result.nodes, *result.attempts, *result.outputs]
    changes += [c for cs in result.checkpoints.values() for c in cs]
    assert changes
    assert {c.op for c in changes} == {"add"}
    assert all(c.old is None for c in changes)


def test_diff_of_two_runs_on_other_topics_shows_their_different_state(db: st.Database):
    wf, _ = fresh_workflow()
    bee = db.run(wf, {"topic": "bee"})  # flaky researcher: two attempts
    ant = db.run(fresh_workflow()[0], {"topic": "ant"})
    result = diff(bee.snapshot(), ant.snapshot())
    assert (result.a[0], result.b[0]) == (bee.id, ant.id)
    assert result.status is None  # both finished
    assert Change("change", "$.research.topic", "bee", "ant") in result.outputs
    assert all(c.op == "change" for c in result.outputs)
    assert sorted(result.checkpoints) == ["research", "review", "write"]
    assert Change("change", "$.payload.title", "What we know about the bee", "What we know "
                  "about the ant") in result.checkpoints["write"]  # fmt: skip
    assert not result.empty
    assert diff(ant.snapshot(), ant.snapshot()).empty


def test_diff_of_two_runs_reports_an_attempt_only_one_made_as_removed(db: st.Database):
    flaky = db.run(fresh_workflow()[0], {"topic": "bee"})  # the researcher fails once
    steady = db.run(demo_workflow(invalid_first_draft=True)[0], {"topic": "bee"})
    result = diff(flaky.snapshot(), steady.snapshot())
    assert Change("remove", "research[0]#2", "finished", None) in result.attempts
    assert Change("change", "research[0]#1", "failed", "finished") in result.attempts
    assert result.outputs == []  # the same topic: the same outputs


def without_loader(snap: Snapshot) -> Snapshot:
    copy = dataclasses.replace(snap, loader=None)
    copy.refs = dict(snap.refs)
    return copy


def test_diff_without_a_loader_compares_checkpoints_by_address(demo: Demo):
    run = demo.run
    early = run.snapshot(first_attempt_end(demo))
    result = diff(without_loader(early), without_loader(run.snapshot()))
    write = run.snapshot().newest_ref("write")
    assert result.checkpoints["write"] == [Change("add", "$", None, write.content_hash)]
    (research,) = result.checkpoints["research"]
    assert (research.op, research.path) == ("change", "$")
    assert research.old == early.newest_ref("research").content_hash
    assert research.new == run.snapshot().newest_ref("research").content_hash


def test_diff_reads_checkpoints_with_the_loader_it_is_given(demo: Demo):
    run, store = demo.run, demo.db.store
    loaded: list[CheckpointRef] = []

    def load(ref: CheckpointRef) -> AgentCheckpoint:
        loaded.append(ref)
        return store.load(ref)

    early = without_loader(run.snapshot(first_attempt_end(demo)))
    result = diff(early, without_loader(run.snapshot()), load=load)
    assert {r.node_id for r in loaded} == {"research", "review", "write"}
    assert result.checkpoints["write"][0].new["payload"] == run.checkpoint("write").payload
