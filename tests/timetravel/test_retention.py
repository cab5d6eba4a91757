"""History retention: ``db.gc(older_than)`` deletes old ended runs, leaves of the fork tree
first, then the content nothing reaches; recent runs, forks and shared content stay."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.errors import InvalidArgument
from smithers_tt.store._records import now_ms
from smithers_tt.store.ledger._publish import insert_content
from smithers_tt.timetravel import acquire_lease, prune_runs
from tests.timetravel._support import count, dump, execute, snapshot_view

DAY_MS = 86_400_000
WEEK = datetime.timedelta(days=7)


def _run(db: st.Database, *payloads: Any, status: str = "finished") -> str:
    """A small run of one node that published ``payloads`` and ended as ``status``."""
    _, fence = db.store.create_run("small", graph={"n": []})
    key = db.store.start_attempt(fence, "n").key
    for payload in payloads:
        db.store.publish(fence, key, AgentCheckpoint("c", 1, payload))
    db.store.finish_attempt(fence, key, "finished")
    if status in ("finished", "failed"):
        db.store.finish_run(fence, status)
    elif status == "cancelled":
        db.store.cancel_run(fence.run_id)
    return fence.run_id


def _age(db: st.Database, run_id: str, days: int) -> None:
    execute(
        db,
        "UPDATE tt_runs SET updated_at_ms = :t WHERE run_id = :r",
        t=now_ms() - days * DAY_MS,
        r=run_id,
    )


def _hash(payload: Any) -> str:
    return AgentCheckpoint("c", 1, payload).encode().content_hash


def _contents(db: st.Database) -> set[str]:
    return {row[0] for row in dump(db)["tt_checkpoint_contents"]}


def _runs(db: st.Database) -> set[str]:
    return {row[0] for row in dump(db)["tt_runs"]}


def test_gc_deletes_old_ended_runs_and_their_content_and_keeps_the_rest(db: st.Database) -> None:
    shared, only_old = {"shared": True}, {"only": "old"}
    old = {
        status: _run(db, shared, only_old, {"s": status}, status=status)
        for status in ("finished", "failed", "cancelled")
    }
    recent = _run(db, shared, {"recent": 1})
    waiting = _run(db, {"waiting": 1}, status="running")  # never ended (its owner died)
    leased = _run(db, {"leased": 1})
    for run_id in [*old.values(), waiting, leased]:
        _age(db, run_id, 30)
    acquire_lease(db.store, leased, "test")  # a time-travel operation on it is under way
    kept_before = {run_id: dump(db, run_id) for run_id in (recent, waiting, leased)}

    report = db.gc(WEEK)

    assert _runs(db) == {recent, waiting, leased}
    assert report.runs_deleted == 3 and sorted(report.deleted) == sorted(old.values())
    for run_id in old.values():
        for table in ("tt_frames", "tt_nodes", "tt_attempts", "tt_checkpoint_refs"):
            assert count(db, table, "run_id = :r", r=run_id) == 0
        assert count(db, "tt_audit", "run_id = :r AND operation = 'prune'", r=run_id) == 1
    # Content only the deleted runs reached is gone; content a kept run reaches stays.
    gone = {_hash(only_old)} | {_hash({"s": s}) for s in old}
    assert not gone & _contents(db)
    assert {_hash(shared), _hash({"recent": 1}), _hash({"waiting": 1})} <= _contents(db)
    assert report.content_deleted == len(gone) and report.bytes_freed > 0
    for run_id, before in kept_before.items():
        after = dump(db, run_id)
        assert {k: v for k, v in after.items() if k != "tt_checkpoint_contents"} == {
            k: v for k, v in before.items() if k != "tt_checkpoint_contents"
        }
    assert db.verify().ok


def test_gc_keeps_an_old_parent_while_a_fork_of_it_remains(db: st.Database) -> None:
    parent = _run(db, {"p": 1}, {"p": 2})
    child = db.fork(parent, 3).id  # interrupted: waits to be resumed
    _age(db, parent, 30)
    _age(db, child, 30)
    # An old chain that ended everywhere goes whole, leaves first, in one call.
    root = _run(db, {"root": 1})
    middle = db.fork(root, 3, reset=["n"]).id
    leaf = db.fork(middle, 0).id
    for run_id in (middle, leaf):
        execute(db, "UPDATE tt_runs SET status = 'finished' WHERE run_id = :r", r=run_id)
    for run_id in (root, middle, leaf):
        _age(db, run_id, 30)

    report = db.gc(WEEK)

    assert _runs(db) == {parent, child}
    assert sorted(report.deleted) == sorted([root, middle, leaf])
    assert report.kept_for_forks == 1
    assert _hash({"root": 1}) not in _contents(db)
    assert db.get_run(child).snapshot(0).payload("n") == {"p": 2}


def test_gc_deletes_old_parents_of_kept_forks_when_told_not_to_keep_them(
    db: st.Database,
) -> None:
    parent = _run(db, {"p": 1}, {"p": 2})
    child = db.fork(parent, 4)
    db.reset(child.id, "n")  # no live ref of the child holds the content: only its frames
    view = snapshot_view(child.snapshot(0))
    _age(db, parent, 30)

    report = db.gc(WEEK, keep_forks=False)

    assert report.deleted == [parent] and report.kept_for_forks == 0
    assert _runs(db) == {child.id}
    assert snapshot_view(child.snapshot(0)) == view  # the fork is self-contained
    assert child.snapshot(0).payload("n") == {"p": 2}  # its frames pin the content
    assert _hash({"p": 1}) in _contents(db)
    assert db.verify().ok
    assert db.timeline(child.id).root == child.id


def test_gc_without_older_than_only_collects_unreachable_content(db: st.Database) -> None:
    old = _run(db, {"old": 1})
    _age(db, old, 365)
    orphan = AgentCheckpoint("c", 1, {"orphan": True}).encode()
    db.engine.transaction(lambda conn: insert_content(conn, orphan, now_ms()))
    assert orphan.content_hash in _contents(db)

    report = db.gc()

    assert report.runs_deleted == 0 and old in _runs(db)
    assert report.content_deleted == 1 and orphan.content_hash not in _contents(db)


def test_prune_runs_deletes_in_pages_and_reports_progress(db: st.Database) -> None:
    runs = [_run(db, {"i": i}) for i in range(5)]
    for run_id in runs:
        _age(db, run_id, 2)
    seen: list[int] = []
    report = prune_runs(db.store, older_than_ms=DAY_MS, page_size=2, progress=seen.append)
    assert report.runs_deleted == 5 and report.pages == 3
    assert seen[:3] == [2, 2, 1]  # pages of runs, then pages of content
    assert sum(seen[3:]) == report.content_deleted == 5
    assert not _runs(db)
    assert prune_runs(db.store, older_than_ms=0).runs_deleted == 0


@pytest.mark.parametrize("older_than", [-1, float("nan"), "7d", True, datetime.timedelta(-1)])
def test_gc_refuses_a_cutoff_that_is_not_a_duration(db: st.Database, older_than: Any) -> None:
    run_id = _run(db, {"a": 1})
    with pytest.raises(InvalidArgument):
        db.gc(older_than)
    assert _runs(db) == {run_id}


def test_gc_takes_seconds_as_well_as_timedeltas(db: st.Database) -> None:
    run_id = _run(db, {"a": 1})
    _age(db, run_id, 2)
    assert db.gc(3 * 86_400.0).runs_deleted == 0
    assert db.gc(86_400).deleted == [run_id]


def test_gc_of_chosen_runs_deletes_the_ended_ones_by_the_same_rules_and_says_why_others_stay(
    db: st.Database,
) -> None:
    done, failed, other = _run(db, {"d": 1}), _run(db, {"f": 1}, status="failed"), _run(db)
    running = _run(db, {"r": 1}, status="running")
    parent = _run(db, {"p": 1})
    child = db.fork(parent, 3).id  # interrupted: its parent stays while it does
    leased = _run(db, {"l": 1})
    acquire_lease(db.store, leased, "test")
    for run_id in (done, failed, running, parent, child, leased):
        _age(db, run_id, 1)  # a second ago is old enough for a chosen run

    report = db.gc(0, run_ids=[done, failed, running, parent, leased, "1a2b3c4d5e6f7a8b9c0d1"])

    assert sorted(report.deleted) == sorted([done, failed])
    assert _runs(db) == {other, running, parent, child, leased}  # other was not chosen
    assert report.kept == {
        running: "it is running: only finished, failed, cancelled runs are deleted",
        parent: "1 run(s) forked from it remain: delete them first",
        leased: "a rewind or another time-travel operation holds it",
    }
    assert report.kept_for_forks == 1
    for run_id in (done, failed):
        assert count(db, "tt_audit", "run_id = :r AND operation = 'prune'", r=run_id) == 1
    assert _hash({"d": 1}) not in _contents(db) and _hash({"r": 1}) in _contents(db)


def test_gc_of_a_chosen_parent_and_its_fork_deletes_both_leaf_first(db: st.Database) -> None:
    parent = _run(db, {"p": 1})
    child = db.fork(parent, 3, reset=["n"]).id
    execute(db, "UPDATE tt_runs SET status = 'finished' WHERE run_id = :r", r=child)
    for run_id in (parent, child):
        _age(db, run_id, 1)

    report = db.gc(0, run_ids=[parent, child])

    assert sorted(report.deleted) == sorted([parent, child]) and report.kept == {}
    assert _runs(db) == set()
