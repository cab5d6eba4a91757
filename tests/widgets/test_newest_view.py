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

from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import SmithersError
from smithers_tt.testing import large_run
from smithers_tt.widgets import Debugger, DebuggerModel
from smithers_tt.widgets import _loading as model_module
from smithers_tt.widgets._inspector import Inspector

from ._support import BulkHistory


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


def test_forks_by_reference_read_their_history_at_once(db: st.Database) -> None:
    """The live tables of a fork by reference hold only its own rows: what it inherits is
    folded from the history at once, edited or not."""
    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id
    for fork in (db.fork(run_id, 5).id, db.fork(run_id, 5, reset=["research"]).id):
        assert db.store.get_run(fork).inherits
        model = DebuggerModel(db, fork)
        assert model.history_loaded
        assert model.snapshot == db.snapshot(fork, model.last_frame)


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


# --- the history read behind the newest frame ---------------------------------------------


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every run past 0 frames read its history in a thread, and count the reads."""
    calls: list[int] = []
    real = model_module.load_frames

    def counted(*args: Any, **kwargs: Any) -> Any:
        if "upto" in kwargs and kwargs.get("after") in (None, -1):
            calls.append(1)  # the history from its first frame (not the newest frame alone)
        return real(*args, **kwargs)

    monkeypatch.setattr(model_module, "PRELOAD_AT", 0)
    monkeypatch.setattr(model_module, "load_frames", counted)
    return calls


def test_the_history_read_behind_is_what_the_first_step_back_uses(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    reads = _counting_reads(monkeypatch)
    model = DebuggerModel(db, run_id)
    assert model._preload is None  # not while the views are drawn
    model.read_history_behind()
    assert model._preload is not None and not model.history_loaded
    model._preload.result()  # the thread finished: nothing is read again
    last = model.last_frame
    model.select_frame(last - 1)
    assert len(reads) == 1, "the first step back read the history again"
    assert model.frames == db.store.frames(run_id)
    assert model.snapshot == db.snapshot(run_id, last - 1)
    assert model.frame_ref_key() is not None and model.ref == model.snapshot.refs[model.ref_key]


def test_a_history_read_behind_that_fails_is_read_again_when_needed(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    monkeypatch.setattr(model_module, "PRELOAD_AT", 0)
    real = model_module.load_frames

    def failing_once(*args: Any, **kwargs: Any) -> Any:
        if "upto" not in kwargs:  # the newest frame alone
            return real(*args, **kwargs)
        monkeypatch.setattr(model_module, "load_frames", real)
        raise SmithersError("the database went away")

    monkeypatch.setattr(model_module, "load_frames", failing_once)
    model = DebuggerModel(db, run_id)
    model.read_history_behind()
    assert model._preload is not None and model._preload.result() is None
    assert isinstance(model._preload.failed, SmithersError)
    model.select_frame(3)
    assert model.frames == db.store.frames(run_id) and model.snapshot == db.snapshot(run_id, 3)


def test_a_history_read_behind_a_rewind_elsewhere_is_read_again_on_the_next_selection(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    _counting_reads(monkeypatch)
    model = DebuggerModel(db, run_id)
    model.read_history_behind()
    last = model.last_frame
    db.rewind(run_id, 6, confirm=True)  # another handle, while (or after) the thread reads
    db.resume(run_id, wf)  # and the run went on: its frames differ from what was shown
    model.select_frame(2)  # reads the run's record first: its history was rewritten
    assert not model.refresh()  # nothing left for a refresh to find
    assert model.frame_no == 2 and model.frames == db.store.frames(run_id)
    assert model.last_frame == db.store.get_run(run_id).clock
    assert model.frames[-1] == db.store.frames(run_id)[-1] and model.last_frame != last
    model.select_frame(4)
    assert model.snapshot == db.snapshot(run_id, 4)


def test_the_debugger_reads_a_long_runs_history_behind_once_it_is_drawn(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _counting_reads(monkeypatch)
    monkeypatch.setattr(model_module, "PRELOAD_AT", 2_500)
    long, short = large_run(db, 2_500), large_run(db, 2_499)
    debugger = Debugger(db, long, live=False)
    try:
        assert debugger.model._preload is not None, "a long run's history is read behind"
        debugger.model._preload.result()
        debugger.select_frame(10)
        assert reads == [1] and debugger.model.snapshot == db.snapshot(long, 10)
        assert "Frame 10 " in debugger.inspector.summary.value
        debugger.model.switch_run(short)  # shorter than PRELOAD_AT: read when needed
        assert debugger.model._preload is None and not debugger.model.history_loaded
    finally:
        debugger.close()


def test_closing_the_debugger_stops_the_history_read_behind(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id
    monkeypatch.setattr(model_module, "PRELOAD_AT", 0)
    monkeypatch.setattr(model_module, "PRELOAD_STEP", 1)  # a look at every frame
    release = threading.Event()
    real = model_module.load_frames

    def held(*args: Any, **kwargs: Any) -> Any:
        if "upto" in kwargs:
            release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(model_module, "load_frames", held)
    model = DebuggerModel(db, run_id)
    model.read_history_behind()
    read = model._preload
    assert read is not None and not model.history_ready(timeout=0.05)  # still reading
    model.drop_caches()  # what Debugger.close does
    release.set()
    assert read.wait(10) and read.result() is None, "the thread went on folding"
    assert not model.history_loaded
    model.select_frame(2)  # read again, now, when needed
    assert model.history_ready() and model.snapshot == db.snapshot(run_id, 2)


def _named_nodes_run(db: st.Database, names: list[str], per_node: int) -> str:
    """A finished bulk-written run whose nodes are ``names``, each with ``per_node`` refs
    over two iterations and two attempts."""
    h = BulkHistory(db, "named", names)
    for name in names:
        for iteration in (0, 1):
            h.add("node_state", node_id=name, iteration=iteration, state="running")
            for attempt in (1, 2):
                h.add("attempt_started", node_id=name, iteration=iteration, attempt=attempt,
                      state="in_progress")  # fmt: skip
                for sequence in range(per_node // 4):
                    h.publish(name, iteration, attempt, sequence, [name, sequence])
                h.add("attempt_finished", node_id=name, iteration=iteration, attempt=attempt,
                      state="finished")  # fmt: skip
            h.add("node_state", node_id=name, iteration=iteration, attempt=2, state="finished")
    return h.write()


def test_pages_and_ranks_of_live_refs_are_in_code_point_order(db: st.Database) -> None:
    """The live refs are paged and ranked in Python's order of their keys (node ids in
    code-point order: capitals before small letters, accents and other scripts after), at
    every offset and page size, past the end too, on both databases."""
    from smithers_tt.store.for_widgets import live_ref_count, live_ref_page, live_ref_rank

    names = ["alpha", "Zeta", "éclair", "Ωmega", "b_1", "b-2", "B", "zz"]
    run_id = _named_nodes_run(db, names, per_node=8)
    engine = db.store.engine
    refs = db.snapshot(run_id).refs
    keys = sorted(refs)
    assert [k[0] for k in keys[::8]] == sorted(names)  # "B", "Zeta", "alpha", ... "Ωmega"
    assert live_ref_count(engine, run_id) == len(keys)
    for size in (1, 3, 7, 20):
        for offset in range(len(keys) + 2):
            page = live_ref_page(engine, run_id, offset, size)
            assert page == [refs[k] for k in keys[offset : offset + size]], (size, offset)
    assert [live_ref_rank(engine, run_id, k) for k in keys] == list(range(len(keys)))
    assert live_ref_rank(engine, run_id, ("nobody", 0, 1, 0)) is None
