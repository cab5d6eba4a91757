"""The set-based path (refs resolved in SQL, ``timetravel._bulk``) gives exactly what folding
every frame in Python gives, and hands over to that fold whenever it cannot vouch for the
answer: the fold stays the definition of a snapshot."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.demo.agents import NOTES
from smithers_tt.errors import SnapshotInvalid
from smithers_tt.store import travel
from smithers_tt.store.for_timetravel import Travel
from smithers_tt.timetravel import _at, _bulk, _ops, materialize
from smithers_tt.timetravel._snapshot import Snapshot, fold
from tests.timetravel._support import dump, execute, live_view, restored_view
from tests.timetravel.conftest import Demo, fresh_workflow


def _both(db: st.Database, run_id: str, n: int) -> tuple[Snapshot | None, Snapshot, Snapshot]:
    """(set-based state with refs left in SQL or None, snapshot_at, full fold) at frame n."""

    def read(tx: Travel) -> tuple[Any, ...]:
        run = tx.run_state(run_id)
        if run is not None and run.base is not None:  # a fork by reference: no set-based path
            full = _at.fold_inherited(tx, run, tx.frames(run_id, n), n, exact=True)
            return None, _ops.snapshot_at(tx, run_id, n), full
        quick = _bulk.state_at(tx, run_id, n)
        return quick, _ops.snapshot_at(tx, run_id, n), fold(run_id, tx.frames(run_id, n))

    return travel(db.engine, read, write=False)


def _runs_with_every_kind_of_history(demo: Demo) -> list[str]:
    """The demo run after a reset and a rerun (attempt numbers reused), a fork resumed to
    its end, a fork with an edited checkpoint, and a fork of that fork."""
    db, run = demo.db, demo.run
    db.reset(run.id, "research", dependents=True)
    assert db.resume(run.id, fresh_workflow()[0]).status == "finished"
    child = db.fork(run.id, demo.frame("node_state", "research", state="finished"))
    assert db.resume(child.id, fresh_workflow()[0]).status == "finished"
    edited = AgentCheckpoint(NOTES, 1, {"topic": "bee", "notes": ["edited"], "tokens": 1})
    edit = db.fork(child.id, 3, checkpoints={"research": edited})
    grandchild = db.fork(edit.id, 0)
    return [run.id, child.id, edit.id, grandchild.id]


def test_set_based_snapshots_equal_the_full_fold_at_every_frame(demo: Demo) -> None:
    db = demo.db
    for run_id in _runs_with_every_kind_of_history(demo):
        clock = db.store.get_run(run_id).clock
        for n in range(clock + 1):
            quick, snap, full = _both(db, run_id, n)
            if not db.store.get_run(run_id).inherits:
                assert quick is not None, (run_id, n)  # the set-based path answered ...
                assert quick.stored_refs.count == len(full.refs)
            assert snap == full, (run_id, n)  # ... exactly as the fold does
            assert snap.refs == full.refs and snap.attempts == full.attempts


def test_forks_of_forks_keep_every_ref_field_including_creation_times(demo: Demo) -> None:
    db = demo.db
    _, _, edit_id, grandchild_id = _runs_with_every_kind_of_history(demo)
    at_fork = db.snapshot(edit_id, 0)
    again = db.snapshot(grandchild_id, 0)
    strip = {k: dataclasses.replace(r, run_id="") for k, r in at_fork.refs.items()}
    assert {k: dataclasses.replace(r, run_id="") for k, r in again.refs.items()} == strip
    assert live_view(db, grandchild_id)["refs"] == strip  # the live copy too
    # The edited checkpoint came into the grandchild through SQL (its base frame's data names
    # its creation time) and still resumes.
    assert again.payload("research") == {"topic": "bee", "notes": ["edited"], "tokens": 1}
    assert db.resume(grandchild_id, fresh_workflow()[0]).status == "finished"


def _rebind_a_ref_in_a_new_frame(db: st.Database, run_id: str) -> tuple[int, tuple[Any, ...]]:
    """Corrupt history: a new last frame binds an existing ref key to other content without a
    reset in between (the store never does this). Returns the frame and the key."""
    clock = db.store.get_run(run_id).clock
    snap = db.snapshot(run_id, clock)
    key = min(snap.refs)
    other = next(
        r.content_hash
        for k, r in sorted(snap.refs.items())
        if r.content_hash != snap.refs[key].content_hash
    )
    execute(
        db,
        "INSERT INTO tt_frame_rows (run_id, frame_no, kind, node_id, iteration, attempt, sequence, "
        "content_hash, codec, version, purpose, created_at_ms) SELECT run_id, :n, kind, "
        "node_id, iteration, attempt, sequence, :h, codec, version, purpose, created_at_ms "
        "FROM tt_frames WHERE run_id = :r AND kind = 'checkpoint' AND node_id = :node "
        "AND iteration = :it AND attempt = :a AND sequence = :s",
        n=clock + 1,
        h=other,
        r=run_id,
        node=key[0],
        it=key[1],
        a=key[2],
        s=key[3],
    )
    execute(db, "UPDATE tt_runs SET clock = :n WHERE run_id = :r", n=clock + 1, r=run_id)
    return clock + 1, key


def test_a_ref_key_bound_twice_is_decided_by_the_fold_in_rewind_fork_and_snapshot(
    demo: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, run = demo.db, demo.run
    n, key = _rebind_a_ref_in_a_new_frame(db, run.id)
    tries: list[bool] = []
    real = _ops.snapshot_at

    def spy(*args: Any, **kwargs: Any) -> Snapshot:
        tries.append(kwargs.get("exact", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(_ops, "snapshot_at", spy)
    monkeypatch.setattr(_at, "snapshot_at", spy)
    quick, snap, full = _both(db, run.id, n)
    assert quick is not None  # the frames look fine one by one ...
    assert snap == full  # ... but the refs come from the fold: the last binding wins
    assert full.refs[key].content_hash != run.snapshot(n - 1).refs[key].content_hash

    tries.clear()
    child = db.fork(run.id, n)  # by reference: nothing read, nothing copied
    assert tries == []
    # its own copy: the set-based copy meets the duplicate, and it is refolded, whole
    assert materialize(db.store, child.id)
    assert tries == [False, True]
    assert child.snapshot(0).refs[key].content_hash == full.refs[key].content_hash
    tries.clear()
    restored = db.rewind(run.id, n, confirm=True)
    assert tries == [False, True]
    assert restored.refs == full.refs
    assert live_view(db, run.id)["refs"] == restored_view(full)["refs"]
    assert [r.record.run_id for r in db.runs(limit=100) if r.record.parent_run_id == run.id] == [
        child.id
    ]


@pytest.mark.parametrize(
    "data",
    [
        '{"broken',
        "[1]",
        '{"created_at_ms": null}',
        '{"created_at_ms": 1.5}',
        '{"created_at_ms": 1, "created_at_ms": 2}',
    ],
    ids=["not_json", "not_an_object", "null_time", "float_time", "time_twice"],
)
def test_unusual_checkpoint_frame_data_goes_to_the_fold(demo: Demo, data: str) -> None:
    db, run = demo.db, demo.run
    n = demo.frame("node_state", "research", state="finished")
    execute(
        db,
        "UPDATE tt_frame_rows SET data_json = :d WHERE run_id = :r AND kind = 'checkpoint' "
        "AND frame_no < :n",
        d=data,
        r=run.id,
        n=n,
    )

    if data in ('{"broken', "[1]"):  # corrupt for the fold too: refused, nothing changes
        before = dump(db)
        with pytest.raises(SnapshotInvalid, match="nothing was changed"):
            db.rewind(run.id, n, confirm=True)
        with pytest.raises(SnapshotInvalid):
            run.snapshot(n)
        assert dump(db) == before
        child = db.fork(run.id, n)  # by reference: it reads nothing, so it is made ...
        forked = dump(db)
        with pytest.raises(SnapshotInvalid):
            child.snapshot(0)  # ... and inherits the corruption, which reading meets
        with pytest.raises(SnapshotInvalid):
            materialize(db.store, child.id)
        assert dump(db) == forked
    else:  # readable JSON the set-based path does not interpret: the fold answers
        quick, snap, full = _both(db, run.id, n)
        assert quick is None
        assert snap == full


def test_a_creation_time_in_checkpoint_data_is_read_by_the_fold_when_escaped(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    n = demo.frame("node_state", "research", state="finished")
    first = demo.frame("checkpoint", "research")
    # What a fork's base frames hold, with the key's "_" written as an escape.
    execute(
        db,
        "UPDATE tt_frame_rows SET data_json = :d WHERE run_id = :r AND frame_no = :f",
        d='{"created\\u005fat_ms":5,"size":1}',
        r=run.id,
        f=first,
    )
    quick, snap, full = _both(db, run.id, n)
    assert quick is None  # an escape in checkpoint data: the fold reads it
    assert snap == full
    key = next(k for k in full.refs if k[0] == "research")
    assert full.refs[key].created_at_ms == 5
    child = db.fork(run.id, n)
    assert child.snapshot(0).refs[key].created_at_ms == 5
    assert db.rewind(run.id, n, confirm=True).refs[key].created_at_ms == 5
