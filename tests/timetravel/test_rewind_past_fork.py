"""Rewinding past a fork point: refused without force; with it the children stay whole and the
fork tree says their fork point was rewound away."""

from __future__ import annotations

import pytest

from smithers_tt.errors import ForkPointRewound
from smithers_tt.timetravel import fork_tree, timeline
from tests.timetravel.conftest import Demo


def test_a_rewind_below_a_fork_frame_is_refused_naming_the_child(demo: Demo) -> None:
    db, run = demo.db, demo.run
    last = run.record.clock
    child = db.fork(run.id, last - 2)
    before = run.frames()

    with pytest.raises(ForkPointRewound) as caught:
        db.rewind(run.id, last - 5, confirm=True)

    assert child.id in caught.value.message
    assert "force=True" in caught.value.message
    assert caught.value.details["children"] == [child.id]
    assert run.frames() == before  # nothing changed
    with pytest.raises(ForkPointRewound):  # not LeaseBusy: the lease was given back
        db.rewind(run.id, last - 5, confirm=True)


def test_a_rewind_at_or_above_the_fork_frame_needs_no_force(demo: Demo) -> None:
    db, run = demo.db, demo.run
    last = run.record.clock
    child = db.fork(run.id, last - 5)
    db.rewind(run.id, last - 5, confirm=True)
    edges = {e.run_id: e for e in fork_tree(db.store, run.id)[1]}
    assert not edges[child.id].fork_point_rewound


def test_with_force_the_child_stays_valid_and_the_tree_marks_its_fork_point(demo: Demo) -> None:
    db, run = demo.db, demo.run
    last = run.record.clock
    child = db.fork(run.id, last - 2)
    child_snap = db.snapshot(child.id)
    expected = run.snapshot(last - 2)

    db.rewind(run.id, last - 5, confirm=True, force=True)

    # The child is self-contained: its state is what the parent's fork frame showed.
    after = db.snapshot(child.id)
    assert after.refs == child_snap.refs
    assert {k: r.content_hash for k, r in after.refs.items()} == {
        k: r.content_hash for k, r in expected.refs.items()
    }
    assert after.nodes == child_snap.nodes
    tl = timeline(db.store, child.id)
    edge = next(e for e in tl.tree if e.run_id == child.id)
    assert edge.fork_point_rewound
    assert "rewound away" in edge.where
    root = next(e for e in tl.tree if e.run_id == run.id)
    assert not root.fork_point_rewound
    assert "rewound away" in tl._repr_html_()


def test_the_mark_stays_when_the_parent_grows_past_the_fork_frame_again(demo: Demo) -> None:
    db, run = demo.db, demo.run
    last = run.record.clock
    child = db.fork(run.id, last - 1)
    db.rewind(run.id, last - 5, confirm=True, force=True)
    db.resume(run.id, demo.wf)  # new frames, numbered as the removed ones were
    assert db.get_run(run.id).record.clock >= last - 1

    edges = {e.run_id: e for e in fork_tree(db.store, run.id)[1]}
    assert edges[child.id].fork_point_rewound
