"""A rewind of many frames (half a long run) and its undo change only what those frames
touched, with the checkpoint frames left in the database (``timetravel._wide``): the live
tables each leaves are those a full replace from the history leaves, and the undo gives back
every read exactly as it was before the rewind (frames, snapshot, timeline, nodes, attempts,
refs), over seeded random runs and a bulk-written run, on both backends. The path is taken
here for every cut (its bounds lowered), not only for long histories."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.errors import CheckpointMissing
from smithers_tt.store import travel
from smithers_tt.testing import large_run
from smithers_tt.timetravel import _delta, _wide
from tests.timetravel._support import dump, execute
from tests.timetravel.test_rewind_delta import _cuts, _history, _rows

SEEDS = range(6)


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every rewind and undo goes the wide way when it can (never the last-k way); the list
    names each one that did."""
    monkeypatch.setattr(_wide, "WIDE_SPAN", 0)
    monkeypatch.setattr(_delta, "MOST_FRAMES", 0)
    taken: list[str] = []
    for name in ("rewind", "undo"):
        real = getattr(_wide, name)

        def spy(*args: Any, _real: Any = real, _name: str = name) -> Any:
            taken.append(_name)
            return _real(*args)

        monkeypatch.setattr(_wide, name, spy)
    return taken


def _reads(db: st.Database, run_id: str) -> dict[str, Any]:
    """Everything a reader of the run sees: its frames, its snapshot, its timeline, its
    nodes, attempts and refs, and its live tables."""
    run = db.get_run(run_id)
    return {
        "frames": run.frames(),
        "snapshot": db.snapshot(run_id),
        "timeline": db.timeline(run_id),
        "nodes": sorted(repr(n) for n in run.nodes()),
        # The epoch an attempt was written under: a full replace writes 0, the engine its
        # owner's; every owner is fenced by the run's new epoch either way.
        "attempts": sorted(repr(dataclasses.replace(a, owner_epoch=0)) for a in run.attempts()),
        "refs": sorted(repr(r) for r in run.checkpoints()),
        "rows": _rows(db, run_id),
    }


@pytest.mark.parametrize("seed", SEEDS)
def test_wide_rewind_and_undo_leave_what_a_full_replace_leaves(
    db: st.Database, seed: int, wide: list[str]
) -> None:
    rng = random.Random(seed)
    run_id, wf = _history(db, rng)
    for cut, set_based in _cuts(db, run_id, rng):
        clock = db.get_run(run_id).record.clock
        before = _reads(db, run_id)
        wide.clear()
        rewound = db.rewind(run_id, cut, confirm=True)
        after = _rows(db, run_id)
        taken = list(wide)
        db.rewind(run_id, cut, confirm=True)  # to the newest frame: rebuilt from the history
        assert _rows(db, run_id) == after
        assert rewound == db.snapshot(run_id, cut)
        db.undo_rewind(run_id)
        wide.clear()
        undone = db.undo_rewind(run_id)
        taken += wide
        assert _reads(db, run_id) == before
        assert undone == db.snapshot(run_id, clock)
        db.rewind(run_id, clock, confirm=True)  # the run as the full replace leaves it
        assert _rows(db, run_id) == before["rows"]
        db.undo_rewind(run_id)
        assert taken == (["rewind", "undo"] if set_based else []), (cut, clock)
    assert db.resume(run_id, wf).status == "finished"


def test_a_bulk_run_rewound_to_its_middle_and_undone_reads_exactly_as_before(
    db: st.Database, wide: list[str]
) -> None:
    run_id = large_run(db, 3_000, payload_bytes=40)
    before = _reads(db, run_id)
    db.rewind(run_id, 1_500, confirm=True)
    assert _reads(db, run_id)["rows"] == _rows_after_full_rewind(db, run_id, 1_500)
    db.undo_rewind(run_id)
    assert wide == ["rewind", "undo"]
    assert _reads(db, run_id) == before


def _rows_after_full_rewind(db: st.Database, run_id: str, cut: int) -> dict[str, Any]:
    """The live rows a full replace gives at ``cut`` (the run is at ``cut``: a rewind to
    its newest frame rebuilds them from the history), leaving the run's rewinds as they
    were (that rewind is undone)."""
    db.rewind(run_id, cut, confirm=True)
    rows = _rows(db, run_id)
    db.undo_rewind(run_id)
    return rows


def test_a_wide_undo_whose_frames_name_missing_content_refuses_and_changes_nothing(
    db: st.Database, wide: list[str]
) -> None:
    run_id = large_run(db, 1_000, payload_bytes=40)
    frames = db.get_run(run_id).frames()
    db.rewind(run_id, 500, confirm=True)
    in_use = {r.content_hash for r in db.get_run(run_id).checkpoints()}
    gone = next(f.content_hash for f in frames[501:] if f.content_hash not in (None, *in_use))
    execute(db, "DELETE FROM tt_checkpoint_contents WHERE content_hash = :h", h=gone)
    before = dump(db)
    with pytest.raises(CheckpointMissing, match="nothing was changed"):
        db.undo_rewind(run_id)  # the wide copy misses a ref: the full fold names it
    assert dump(db) == before
    assert wide == ["rewind", "undo"]


def _decided(tail: _wide.WideTail | None) -> Any:
    """What a wide tail decides (all but the frames an undo folds), or None."""
    if tail is None:
        return None
    return (
        tail.checkpoints, tail.nodes, tail.attempts, tail.started, tail.run_level,
        tail.split_nodes,
    )  # fmt: skip


@pytest.mark.parametrize("seed", SEEDS)
def test_a_rewind_reading_only_the_keys_decides_what_reading_the_frames_decides(
    db: st.Database, seed: int, wide: list[str]
) -> None:
    # A rewind reads the keys of the frames it takes away; an undo reads the same frames
    # whole (it folds them). Over every cut of random runs (resets above some cuts, which
    # both refuse), and a frame a key is missing from, both come to the same answer.
    run_id, _ = _history(db, random.Random(seed))
    clock = db.get_run(run_id).record.clock

    def both(cut: int) -> tuple[Any, Any]:
        return travel(
            db.store.engine,
            lambda tx: tuple(
                _decided(_wide.tail_of(tx, run_id, cut, clock, undo=undo)) for undo in (False, True)
            ),
            write=False,
        )

    answered = {}
    for cut in range(clock):
        by_keys, by_frames = both(cut)
        assert by_keys == by_frames, cut
        answered[cut] = by_keys
    assert sum(a is not None for a in answered.values()) > clock // 4  # below no reset
    finished = max(
        f.frame_no
        for f in db.get_run(run_id).frames()
        if f.kind == "attempt_finished" and answered[f.frame_no - 1] is not None
    )
    execute(
        db,
        "UPDATE tt_frame_rows SET node_id = NULL WHERE run_id = :r AND frame_no = :n",
        r=run_id, n=finished,
    )  # fmt: skip
    assert both(finished - 1) == (None, None)  # a frame above the cut names no node
    assert both(finished) == (answered[finished],) * 2  # at the cut: not read
