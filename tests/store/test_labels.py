"""Run labels: given to a run when it is made, stored once, read with it, filtered by, and
carried over to forks (which may override them) and replays (which add ``replay_of``)."""

from __future__ import annotations

from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import InvalidArgument
from smithers_tt.store import Store
from tests.store._support import count

TOPIC = {"topic": "bee"}


def test_run_carries_the_labels_it_was_made_with(db: st.Database) -> None:
    wf, _ = demo_workflow()
    run = db.run(wf, TOPIC, labels={"case": "clean", "owner": "ana"})

    assert run.labels == {"case": "clean", "owner": "ana"}
    assert db.get_run(run.id).labels == {"case": "clean", "owner": "ana"}
    assert "<td" in run._repr_html_() and "case=clean owner=ana" in run._repr_html_()


def test_submitted_run_carries_its_labels_while_queued(db: st.Database) -> None:
    wf, _ = demo_workflow()
    run = db.submit(wf, TOPIC, labels={"case": "queued"})

    assert run.status == "queued"
    assert db.get_run(run.id).record.labels == {"case": "queued"}


def test_run_made_without_labels_has_none(store: Store) -> None:
    record, _ = store.create_run("wf")

    assert record.labels == {} == store.get_run(record.run_id).labels
    assert count(store, "tt_run_labels") == 0


def test_labels_are_stored_once_one_row_per_key(store: Store) -> None:
    record, _ = store.create_run("wf", labels={"a": "1", "b": "2"})

    assert count(store, "tt_run_labels") == 2
    assert count(store, "tt_run_labels", run_id=record.run_id, key="a", value="1") == 1


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (["case", "retry"], "labels must be a mapping"),
        ({"": "x"}, "label key '' is not allowed"),
        ({"has space": "x"}, "label key 'has space' is not allowed"),
        ({"a=b": "x"}, "label key 'a=b' is not allowed"),
        ({"k" * 65: "x"}, "is not allowed: a key is 1 to 64"),
        ({1: "x"}, "label key 1 is not allowed"),
        ({"case": 3}, "label 'case' must have a str value, got int"),
        ({"case": None}, "must have a str value, got NoneType"),
        ({"case": "v" * 201}, "is 201 characters long; the most is 200"),
        ({"case": "a\x00b"}, "contains NUL"),
        ({"case": "\ud800"}, "lone surrogate"),
        ({f"k{i}": "v" for i in range(33)}, "at most 32 labels; got 33"),
    ],
    ids=["list", "empty-key", "space", "equals", "long-key", "int-key", "int-value",
         "none-value", "long-value", "nul", "surrogate", "too-many"],
)  # fmt: skip
def test_create_run_refuses_bad_labels_and_writes_nothing(
    store: Store, labels: Any, message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        store.create_run("wf", labels=labels)

    assert count(store, "tt_runs") == 0 and count(store, "tt_run_labels") == 0


def test_runs_filters_by_every_label_given(store: Store, db: st.Database) -> None:
    a, _ = store.create_run("wf", labels={"case": "retry", "owner": "ana"})
    b, _ = store.create_run("wf", labels={"case": "retry", "owner": "bo"})
    store.create_run("wf", labels={"case": "clean", "owner": "ana"})
    store.create_run("wf")

    assert [r.id for r in db.runs(labels={"case": "retry"})] == sorted([a.run_id, b.run_id])
    assert [r.id for r in db.runs(labels={"case": "retry", "owner": "ana"})] == [a.run_id]
    assert db.runs(labels={"case": "nothing-like-it"}) == []
    assert [r.record.labels for r in db.runs(labels={"owner": "bo"})] == [b.labels]


def test_runs_filter_by_labels_and_status_together(store: Store, db: st.Database) -> None:
    queued, _ = store.create_run("wf", status="queued", labels={"case": "retry"})
    store.create_run("wf", labels={"case": "retry"})

    assert [r.id for r in db.runs(status="queued", labels={"case": "retry"})] == [queued.run_id]


def test_list_runs_pages_through_labelled_runs_with_their_labels(store: Store) -> None:
    made = [store.create_run("wf", labels={"case": "page", "n": str(i)})[0] for i in range(5)]
    store.create_run("wf", labels={"case": "other"})

    first = store.list_runs(limit=3, labels={"case": "page"})
    rest = store.list_runs(limit=3, labels={"case": "page"}, cursor=first.next_cursor)

    paged = first.items + rest.items
    assert [r.run_id for r in paged] == sorted(r.run_id for r in made)  # by id, as listings go
    assert {r.run_id: r.labels for r in paged} == {r.run_id: r.labels for r in made}
    assert rest.next_cursor is None


def test_fork_inherits_its_parents_labels_and_may_override_or_drop_them(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow()
    parent = db.run(wf, TOPIC, labels={"case": "clean", "owner": "ana", "tmp": "x"})

    child = db.fork(parent.id, 3, labels={"case": "fork", "tmp": None, "why": "shorter"})
    plain = db.fork(parent.id, 3)

    want = {"case": "fork", "owner": "ana", "why": "shorter"}
    assert child.record.labels == want == db.get_run(child.id).record.labels
    assert db.get_run(plain.id).record.labels == parent.record.labels
    assert db.get_run(parent.id).record.labels == {"case": "clean", "owner": "ana", "tmp": "x"}


def test_fork_with_a_bad_label_is_refused_and_creates_nothing(db: st.Database) -> None:
    wf, _ = demo_workflow()
    parent = db.run(wf, TOPIC)

    with pytest.raises(InvalidArgument, match="label key 'no good' is not allowed"):
        db.fork(parent.id, 3, labels={"no good": "x"})

    assert [r.id for r in db.runs()] == [parent.id]


def test_replay_is_labelled_replay_of_its_run_over_the_labels_it_inherits(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow()
    parent = db.run(wf, TOPIC, labels={"case": "clean"})

    replayed = db.replay(parent.id[:8], 3, demo_workflow()[0], labels={"try": "2"})

    assert replayed.status == "finished"
    assert db.get_run(replayed.id).record.labels == {
        "case": "clean", "replay_of": parent.id, "try": "2"
    }  # fmt: skip


def test_deleting_a_run_deletes_its_labels(db: st.Database) -> None:
    wf, _ = demo_workflow()
    db.run(wf, TOPIC, labels={"case": "old"})

    db.gc(0, keep_forks=False)

    assert db.runs() == [] and count(db.store, "tt_run_labels") == 0
