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
from smithers_tt.store import travel
from smithers_tt.store.for_timetravel import Travel
from smithers_tt.testing import large_run
from smithers_tt.timetravel import _delta, _wide
from tests._statements import statements
from tests.store._support import count
from tests.timetravel._support import execute
from tests.timetravel.test_rewind_delta import _cuts, _history, _rows

SEEDS = range(6)


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every rewind goes the wide way when it can (never the last-k way); the list names
    each rewind that did ("rewind") and each undo that put back what one kept ("undo")."""
    monkeypatch.setattr(_wide, "WIDE_SPAN", 0)
    monkeypatch.setattr(_delta, "MOST_FRAMES", 0)
    taken: list[str] = []
    real_rewind, real_restore = _wide.rewind, Travel.restore_kept

    def rewind(*args: Any) -> Any:
        taken.append("rewind")
        return real_rewind(*args)

    def restore(self: Travel, *args: Any) -> Any:
        taken.append("undo")
        return real_restore(self, *args)

    monkeypatch.setattr(_wide, "rewind", rewind)
    monkeypatch.setattr(Travel, "restore_kept", restore)
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


def _kept_rows(db: st.Database) -> dict[str, int]:
    """How many rows each table of what rewinds kept holds."""
    return {t: count(db, t) for t in ("tt_rewound_nodes", "tt_rewound_attempts", "tt_rewound_refs")}


def test_what_a_wide_rewind_keeps_outlives_garbage_collection_and_goes_with_its_rewind(
    db: st.Database, wide: list[str]
) -> None:
    run_id = large_run(db, 1_000, payload_bytes=40)
    before = _reads(db, run_id)
    db.rewind(run_id, 500, confirm=True)
    kept = _kept_rows(db)
    assert kept["tt_rewound_refs"] == len(before["refs"]) - len(db.get_run(run_id).checkpoints())
    assert kept["tt_rewound_nodes"] > 0 and kept["tt_rewound_attempts"] > 0
    db.collect_garbage()  # the frames above the cut pin the content the kept refs read
    with statements(db) as sent:
        db.undo_rewind(run_id)
    assert wide == ["rewind", "undo"]
    # What the rewind kept goes back as it was: nothing folded, no frame read but the probe
    # for one above the clock (whether the run still hides any).
    reads = [sql for sql in sent if "tt_frame" in sql]
    assert len(reads) == 1 and "LIMIT" in reads[0], reads
    assert _reads(db, run_id) == before
    assert db.verify().ok  # every ref's content is there
    assert _kept_rows(db) == dict.fromkeys(kept, 0)  # undone: released

    db.rewind(run_id, 400, confirm=True)
    db.rewind(run_id, 300, confirm=True)  # stacked: each keeps its own rows
    assert wide[2:] == ["rewind", "rewind"]
    db.undo_rewind(run_id)
    assert _reads(db, run_id)["rows"] == _rows_after_full_rewind(db, run_id, 400)
    assert _kept_rows(db)["tt_rewound_refs"] > 0  # the first rewind's, still kept
    db.reset(run_id, "plan")  # a frame on top: no undo reaches that rewind any more,
    assert _kept_rows(db) == dict.fromkeys(kept, 0)  # so what it kept goes with that frame
    assert count(db, "tt_rewinds", run_id=run_id) == 1  # (its row says why: no undo now)
    db.collect_garbage()  # which releases it
    assert count(db, "tt_rewinds", run_id=run_id) == 0


def _decided(tail: _wide.WideTail | None) -> Any:
    """What a wide tail decides, or None."""
    if tail is None:
        return None
    return (
        tail.checkpoints, tail.nodes, tail.attempts, tail.started, tail.run_level,
        tail.split_nodes,
    )  # fmt: skip


@pytest.mark.parametrize("seed", SEEDS)
def test_a_frame_above_the_cut_that_names_no_node_sends_the_rewind_to_the_full_fold(
    db: st.Database, seed: int, wide: list[str]
) -> None:
    run_id, _ = _history(db, random.Random(seed))
    clock = db.get_run(run_id).record.clock

    def decided(cut: int) -> Any:
        return travel(
            db.store.engine,
            lambda tx: _decided(_wide.tail_of(tx, run_id, cut, clock)),
            write=False,
        )

    answered = {cut: decided(cut) for cut in range(clock)}
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
    assert decided(finished - 1) is None  # a frame above the cut names no node
    assert decided(finished) == answered[finished]  # at the cut: not read


def test_verify_pages_through_what_a_rewind_kept_and_names_a_damaged_row(
    db: st.Database, wide: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from smithers_tt.store import _maintenance

    monkeypatch.setattr(_maintenance, "_ROW_PAGE", 7)  # many pages of kept nodes
    run_id = large_run(db, 1_000, payload_bytes=40)
    db.rewind(run_id, 500, confirm=True)
    assert wide == ["rewind"] and count(db, "tt_rewound_nodes") > 3 * 7
    assert db.verify().ok
    execute(
        db,
        "UPDATE tt_rewound_nodes SET output_json = '{x' WHERE node_id = 'write' AND "
        "iteration = (SELECT max(iteration) FROM tt_rewound_nodes WHERE node_id = 'write')",
    )
    (found,) = db.verify().damaged
    assert found.startswith("tt_rewound_nodes.output_json of rewind_id=")
    db.undo_rewind(run_id)  # the damaged row is live again, and named there
    (found,) = db.verify().damaged
    assert found.startswith(f"tt_nodes.output_json of run_id={run_id!r}, node_id='write'")
