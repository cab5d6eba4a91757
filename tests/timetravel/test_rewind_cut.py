"""A rewind to the middle keeps the live rows at or below its cut (``cut_live_state``)
instead of replacing them all: the live tables, the snapshot it returns and every snapshot
of the run (and of its forks) are exactly what the full replace and the naive fold give,
and the undo puts everything back; over seeded random runs with loops, retries, cache hits,
resets, forks and edited checkpoints, on both backends."""

from __future__ import annotations

import random
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.errors import SnapshotInvalid
from smithers_tt.store import travel
from smithers_tt.timetravel import _delta, _materialize, _ops
from smithers_tt.timetravel._snapshot import Snapshot, fold
from tests.engine._workflows import state
from tests.timetravel._support import dump, execute
from tests.timetravel.test_rewind_delta import _history, _rows

SEEDS = range(5)


def _kept(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every rewind skips the rewind of the last few frames (``_delta``), so the cut path or
    the full replace takes it; the list says, per rewind, whether the cut path did."""
    monkeypatch.setattr(_delta, "tail_of", lambda *args: None)
    taken: list[bool] = []
    real = _materialize.cut_live_state

    def spy(*args: Any) -> bool:
        kept = real(*args)
        taken.append(kept)
        return kept

    monkeypatch.setattr(_ops, "cut_live_state", spy)
    return taken


def _naive(db: st.Database, run_id: str, n: int) -> Snapshot:
    """The snapshot at ``n`` folded in Python from every frame up to it."""
    return travel(db.engine, lambda tx: fold(run_id, tx.frames(run_id, n), n), write=False)


def _every_snapshot(db: st.Database, run_id: str) -> list[Snapshot]:
    clock = db.get_run(run_id).record.clock
    return [db.snapshot(run_id, n) for n in range(clock + 1)]


def _with_an_edited_fork(db: st.Database, run_id: str, wf: Any) -> str:
    """A fork with an edited checkpoint, resumed to its end: its history starts with base
    frames (the parent's state restated) and an edited attempt."""
    at = db.get_run(run_id).record.clock
    node = min(key[0] for key in db.snapshot(run_id, at).refs)
    child = db.fork(run_id, at, checkpoints={node: state({"edited": True})})
    assert db.resume(child.id, wf).status == "finished"
    return child.id


@pytest.mark.parametrize("seed", SEEDS)
def test_a_mid_run_rewind_leaves_what_the_full_replace_and_the_fold_give(
    db: st.Database, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    run_id, wf = _history(db, rng)
    if seed % 2:
        run_id = _with_an_edited_fork(db, run_id, wf)
    kept = _kept(monkeypatch)
    frames = db.get_run(run_id).frames()
    clock = frames[-1].frame_no
    resets = [f.frame_no for f in frames if f.kind == "reset"]
    cuts = sorted({rng.randrange(1, clock) for _ in range(4)} | {clock // 2}, reverse=True)
    for cut in cuts:
        before = _rows(db, run_id)
        history = _every_snapshot(db, run_id)
        above = db.fork(run_id, min(cut + 1, clock))  # by reference: materialised by force
        below = db.fork(run_id, cut - 1)
        forks = {child.id: _every_snapshot(db, child.id) for child in (above, below)}
        kept.clear()
        rewound = db.rewind(run_id, cut, confirm=True, force=True)
        assert kept == [not any(r > cut for r in resets)], (seed, cut, resets)
        after = _rows(db, run_id)
        assert rewound == db.snapshot(run_id, cut) == _naive(db, run_id, cut)
        assert _every_snapshot(db, run_id) == history[: cut + 1]
        db.rewind(run_id, cut, confirm=True, force=True)  # the newest frame: full replace
        assert kept[-1] is False
        assert _rows(db, run_id) == after
        for child, snaps in forks.items():
            assert _every_snapshot(db, child) == snaps
        db.undo_rewind(run_id)
        undone = db.undo_rewind(run_id)
        assert _rows(db, run_id) == before
        assert undone == db.snapshot(run_id, clock) == _naive(db, run_id, clock)
        assert _every_snapshot(db, run_id) == history
    assert db.resume(run_id, wf).status == "finished"


def test_live_rows_that_disagree_with_the_history_send_the_rewind_to_the_full_replace(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = _kept(monkeypatch)
    db, run_id = demo.db, demo.run.id
    clock = db.get_run(run_id).record.clock
    cut = clock // 2
    expected = db.snapshot(run_id, cut)
    assert expected.refs
    # A live ref visible at the cut goes missing behind the store's back: the check of the
    # refs left finds it, and the full fold and replace put it back.
    key = sorted(expected.refs)[0]
    execute(
        db,
        "DELETE FROM tt_checkpoint_refs WHERE run_id = :r AND node_id = :n AND iteration = :i "
        "AND attempt = :a AND sequence = :s",
        r=run_id, n=key[0], i=key[1], a=key[2], s=key[3],
    )  # fmt: skip
    db.rewind(run_id, cut, confirm=True)
    # The cut path raised Refold (the spy saw no answer); the full fold took it over.
    assert kept == [False]
    live = {
        (r.node_id, r.iteration, r.attempt, r.sequence) for r in db.get_run(run_id).checkpoints()
    }
    assert live == set(expected.refs)
    assert db.snapshot(run_id, cut) == expected
    db.undo_rewind(run_id)
    assert db.get_run(run_id).record.clock == clock


def test_a_rewind_that_keeps_rows_refuses_content_it_would_keep_that_is_too_large(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _kept(monkeypatch)
    db, run_id = demo.db, demo.run.id
    cut = db.get_run(run_id).record.clock // 2
    ref = next(iter(db.snapshot(run_id, cut).refs.values()))
    execute(
        db,
        "UPDATE tt_checkpoint_contents SET size_bytes = 20000000 WHERE content_hash = :h",
        h=ref.content_hash,
    )
    before = dump(db)
    with pytest.raises(SnapshotInvalid, match="nothing was changed"):
        db.rewind(run_id, cut, confirm=True)
    assert dump(db) == before
