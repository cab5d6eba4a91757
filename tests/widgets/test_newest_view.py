"""The debugger opens on a run's newest frame without reading its history: what it shows there
(read a page at a time from the live tables, :mod:`smithers_tt.widgets._newest`) must be what
the fold of every frame shows.

Each run is opened twice, once as a person opens it and once with its history read first, and
every question the views ask at the newest frame gets the same answer from both: the selected
checkpoint and its payload, every page of refs, the nodes table, the status, the nodes with
checkpoints and their newest ones, the diff with the previous frame, the node ids. Rewinding a
run one frame at a time makes every kind of frame the newest in turn (a rewound run is
``interrupted``: not live, so it opens this way).
"""

from __future__ import annotations

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.testing import large_run
from smithers_tt.widgets import Debugger, DebuggerModel
from smithers_tt.widgets._inspector import Inspector


def _answers(model: DebuggerModel, size: int) -> dict[str, object]:
    first = model.ref_page(size=size)
    pages = [model.ref_page(page=p, size=size) for p in range(first.pages)]
    nodes = model.node_ids
    table = model.node_table(3)
    diff = model.diff()
    return {
        "frame": model.frame(),
        "last": model.last_frame,
        "ref_key": model.ref_key,
        "ref": model.ref,
        "payload": None if model.ref is None else model.load(model.ref).payload,
        "first page": (first.keys, first.refs, first.total, first.page, first.pages),
        "pages": [(p.keys, p.refs, p.total, p.matched, p.page) for p in pages],
        "status": model.status_at(),
        "table": (table.keys, table.total, table.nodes, table.attempts),
        "checkpointed": model.checkpointed_nodes(),
        "newest": {n: model.newest_ref(n) for n in nodes},
        "nodes": nodes,
        "diff": (diff.a, diff.b, diff.sections, diff.note, diff.conversations),
        "hidden": model.ref_hidden,
    }


def _assert_same(db: st.Database, run_id: str, size: int = 4) -> None:
    opened = DebuggerModel(db, run_id)
    assert not opened.history_loaded, "a finished run opens without reading its history"
    read = DebuggerModel(db, run_id)
    read.frames  # noqa: B018 (reads the history: every answer comes from the fold)
    assert read.history_loaded
    assert _answers(opened, size) == _answers(read, size), f"frame {read.last_frame}"
    assert not opened.history_loaded, "the newest frame's answers read no history"


def _rewound_one_by_one(db: st.Database, run_id: str, step: int = 1) -> None:
    last = db.store.get_run(run_id).clock
    for to in range(last, 0, -step):
        if to != last:
            db.rewind(run_id, to, confirm=True)
        _assert_same(db, run_id)


def test_every_kind_of_newest_frame_shows_what_the_fold_shows(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    _rewound_one_by_one(db, run_id)


def test_a_run_reset_in_place_shows_at_its_newest_frame_what_the_fold_shows(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    db.reset(run_id, "research", dependents=True)
    _assert_same(db, run_id)  # the reset frame itself is the newest
    db.resume(run_id, wf)
    _rewound_one_by_one(db, run_id, step=3)


def test_a_long_looping_run_with_retries_shows_what_the_fold_shows(db: st.Database) -> None:
    run_id = large_run(db, 700)
    _rewound_one_by_one(db, run_id, step=37)


def test_a_fork_and_a_live_run_read_their_history_as_before(db: st.Database) -> None:
    """What the newest view cannot vouch for is folded from the history at once."""
    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id
    child = db.fork(run_id, 5).id  # a fork by reference reads its parent
    assert DebuggerModel(db, child).history_loaded
    queued = db.fork(run_id, 5, reset=["research"]).id
    assert DebuggerModel(db, queued).history_loaded or db.store.get_run(queued).status not in (
        "running",
        "queued",
    )


def test_selecting_another_frame_reads_the_history_and_shows_that_frame(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    model = DebuggerModel(db, run_id)
    assert not model.history_loaded
    model.select_frame(3)
    assert model.history_loaded and model.frame_no == 3
    assert model.snapshot == db.snapshot(run_id, 3)


def test_the_debugger_opens_a_finished_run_without_its_history_and_shows_the_newest_frame(
    db: st.Database,
) -> None:
    """What a person sees in the inspector is the same as for a debugger that folded every
    frame (the views are drawn from the model's answers above). A run short enough for the
    timeline to draw every frame reads its history for it (the walk costs less than the
    counts)."""
    run_id = large_run(db, 2_500)  # past AGGREGATE_AT: the timeline is binned in SQL
    fast = Debugger(db, run_id, live=False)
    model = DebuggerModel(db, run_id)
    model.frames  # noqa: B018 (read first)
    slow = Inspector(model)
    try:
        assert not fast.model.history_loaded
        for part in ("summary", "nodes", "page_label", "payload"):
            assert getattr(fast.inspector, part).value == getattr(slow, part).value, part
        assert fast.inspector.refs.options == slow.refs.options
        assert "frames 0 to 2499" in fast.header.value
    finally:
        fast.close()
