"""A binned timeline is made from counts the database makes (``_gather_sql``), never from the
run's whole history: the figure, each point's frame, the rows and the toggles are those the
walk over every frame (``_gather_rows``) makes, on SQLite and PostgreSQL, for runs with
retries, resets, loops, forks (by reference and materialised), many nodes, checkpoint
purposes the figure does not know, breakpoints, a time axis and an unfinished run; and the
store's reads it is made from give what the frames themselves say."""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt.demo import demo_workflow
from smithers_tt.store import now_ms
from smithers_tt.store.for_widgets import (
    FrameBin,
    attempt_frames,
    frame_bins,
    frame_rows,
    frame_times,
    numbered_frames,
)
from smithers_tt.testing import large_run
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets._timeline_data import MAX_ROWS, TimelineData
from smithers_tt.widgets._timeline_figure import LATER_ATTEMPT, _figure, build_timeline
from smithers_tt.widgets._timeline_gather import _gather_rows, _gather_sql

from ._support import fork_labels

AGGREGATE_AT = (0, 5, 50)


class NoHistory(DebuggerModel):
    """A debugger model whose history cannot be read once ``sealed``: what a binned
    timeline made from SQL must not touch."""

    sealed = False

    @property
    def frames(self) -> Any:
        if self.sealed:
            raise AssertionError("the timeline read model.frames")
        return super().frames


def _plain(value: Any) -> Any:
    """A figure with its numpy arrays as lists (NaN gaps as None), for ``==``."""
    if isinstance(value, np.ndarray):
        return [None if isinstance(v, float) and math.isnan(v) else v for v in value.tolist()]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _same(a: TimelineData, b: TimelineData) -> None:
    assert a.rows == b.rows
    assert a.aggregated == b.aggregated
    assert a.toggles == b.toggles
    assert a.frames_of == b.frames_of
    assert _plain(a.figure) == _plain(b.figure)


def _check(db: st.Database, run_id: str, *, frame_no: int | None = None) -> TimelineData:
    """Every binned figure of the run from SQL equals the walk's, and reads no history (a
    debugger opened on it builds it so unless it read the history already); returns the
    last one."""
    opened = DebuggerModel(db, run_id)
    read = opened.history_loaded  # a fork or a live run read theirs at once
    assert build_timeline(opened, aggregate_at=0).aggregated
    assert opened.history_loaded == read, "a binned timeline read the run's history"
    model = NoHistory(db, run_id)
    if frame_no is not None:
        model.select_frame(frame_no)
    data = None
    for aggregate_at in AGGREGATE_AT:
        if model.last_frame + 1 <= aggregate_at:
            continue
        for time_axis in (False, True):
            model.sealed = False
            walked = _figure(model, _gather_rows, aggregated=True, time_axis=time_axis)
            model.sealed = True
            data = _figure(model, _gather_sql, aggregated=True, time_axis=time_axis)
            assert data.aggregated
            _same(data, walked)
    model.sealed = False
    assert data is not None
    return data


def _frames(db: st.Database, run_id: str) -> list[st.Frame]:
    return db.store.frames(run_id)


# --- the property, run by run ------------------------------------------------------------


def test_retries_loops_and_binned_rows_per_node(db: st.Database) -> None:
    run_id = large_run(db, 700)  # 4 nodes looping: more (node, iteration) pairs than rows
    frames = _frames(db, run_id)
    assert len({(f.node_id, f.iteration) for f in frames if f.node_id}) > MAX_ROWS
    assert any(f.kind == "attempt_started" and f.attempt == 2 for f in frames)
    assert any(f.kind == "attempt_finished" and f.state == "failed" for f in frames)
    data = _check(db, run_id, frame_no=350)
    assert data.rows == ["run", "plan", "research", "write", "review"]
    names = {t["name"] for t in data.figure["data"]}
    assert {LATER_ATTEMPT, "attempt: failed", "checkpoint: schema-correction"} <= names


def test_rows_per_node_and_iteration(db: st.Database) -> None:
    run_id = large_run(db, 120, nodes=("a", "b"))
    data = _check(db, run_id)
    assert data.rows == ["run", "a", "b", "a[1]", "b[1]", "a[2]", "b[2]", "a[3]", "b[3]", "a[4]"]


def test_more_nodes_than_rows(db: st.Database) -> None:
    nodes = tuple(f"node{i:02d}" for i in range(MAX_ROWS + 5))
    run_id = large_run(db, 900, nodes=nodes)
    data = _check(db, run_id)
    assert data.rows[1:] == list(nodes)


def test_pairs_only_checkpoints_name_still_make_rows_per_node(db: st.Database) -> None:
    run_id = large_run(db, 240, nodes=("a",))
    with db.engine.sa.begin() as conn:  # progress checkpoints of iterations no attempt names
        conn.execute(
            sa.text(
                "UPDATE tt_frame_rows SET iteration = frame_no + 1000 "
                "WHERE run_id = :r AND kind = 'checkpoint' AND purpose = 'progress'"
            ),
            {"r": run_id},
        )
    frames = _frames(db, run_id)
    node_level = {(f.node_id, f.iteration) for f in frames if f.kind != "checkpoint" and f.node_id}
    assert len(node_level) < MAX_ROWS < len({(f.node_id, f.iteration) for f in frames})
    assert _check(db, run_id).rows == ["run", "a"]


def test_purposes_the_figure_does_not_know_are_progress(db: st.Database) -> None:
    run_id = large_run(db, 300)
    with db.engine.sa.begin() as conn:  # as a newer writer may record them
        conn.execute(
            sa.text(
                "UPDATE tt_frame_rows SET purpose = CASE WHEN frame_no % 3 = 0 THEN 'mystery' "
                "ELSE 'later' END WHERE run_id = :r AND kind = 'checkpoint' AND frame_no % 2 = 0"
            ),
            {"r": run_id},
        )
    _check(db, run_id)


def test_a_flaky_run_and_its_forks_by_reference_and_materialised(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run = db.run(wf, {"topic": "bee"})
    _check(db, run.id)
    by_reference = db.fork(run.id, 9).id
    data = _check(db, by_reference)
    assert "attempt: inherited" in {t["name"] for t in data.figure["data"]}
    materialised = db.fork(run.id, 12).id
    assert db.materialize(materialised)
    assert any(f.frame_no < 0 for f in _frames(db, materialised))  # base frames
    _check(db, materialised)
    db.resume(materialised, wf)
    _check(db, materialised)
    data = _check(db, run.id)  # its forks' marks: frames no bar or marker may end at
    labels = fork_labels(data.figure)
    assert labels[by_reference] == labels[materialised] == "fork → <id>"


def test_a_long_fork_materialised(db: st.Database) -> None:
    parent = large_run(db, 1_000)  # bins of 3 frames
    frames = _frames(db, parent)
    # a fork point inside a bin of progress checkpoints of one node: on a time axis, its mark
    # needs the time of a frame no bar or marker names
    at = next(
        f.frame_no
        for f, g in itertools.pairwise(frames[300:])
        if f.frame_no % 3 == 0 and f.purpose == g.purpose == "progress" and f.node_id == g.node_id
    )
    time.sleep(max(0, frames[at].created_at_ms - now_ms() + 5) / 1000)  # stamped ahead
    child = db.fork(parent, at).id
    data = _check(db, parent)
    assert fork_labels(data.figure)[child] == "fork → <id>"
    _check(db, child)
    db.materialize(child)
    _check(db, child)


def test_resets_end_open_attempts(db: st.Database) -> None:
    graph = {"a": [], "b": ["a"], "c": ["b"]}
    record, fence = db.store.create_run("open", None, graph=graph)
    for node in ("a", "b"):
        key = db.store.start_attempt(fence, node, node_state="running").key
        for i in range(4):
            db.store.publish(fence, key, AgentCheckpoint("x.v1", 1, {"i": i}))
    db.reset(record.run_id, "a", dependents=True, force=True)  # a and b were still open
    frames = _frames(db, record.run_id)
    assert frames[-1].kind == "reset"
    data = _check(db, record.run_id)
    assert "attempt: reset" in {t["name"] for t in data.figure["data"]}
    assert [node for node, _ in data.toggles[::2]] == ["a", "b", "c"]  # c has not run


def test_an_unfinished_run_with_breakpoints(db: st.Database) -> None:
    graph = {"a": [], "b": ["a"], "c": ["b"], "d": ["c"]}
    record, fence = db.store.create_run("running", None, graph=graph)
    done = db.store.start_attempt(fence, "a", node_state="running").key
    db.store.publish(fence, done, AgentCheckpoint("x.v1", 1, {"i": 0}), purpose="turn")
    db.store.finish_attempt(fence, done, "failed", error="boom " * 30)
    again = db.store.start_attempt(fence, "a").key
    db.store.finish_attempt(fence, again, "finished", node_state="finished", output={"ok": 1})
    key = db.store.start_attempt(fence, "b", node_state="running").key
    for i in range(7):
        db.store.publish(fence, key, AgentCheckpoint("x.v1", 1, {"i": i}), purpose="session")
    model = DebuggerModel(db, record.run_id)
    model.breakpoints.toggle("c", "before")
    model.breakpoints.toggle("a", "after")
    data = _check(db, record.run_id)
    assert "attempt: in_progress" in {t["name"] for t in data.figure["data"]}
    assert ("c", "before") in data.toggles and ("d", "after") in data.toggles


# --- what the figure is made of -------------------------------------------------------


def test_short_runs_keep_the_walk(db: st.Database) -> None:
    run_id = large_run(db, 60)
    model = NoHistory(db, run_id)
    data = build_timeline(model)  # 60 frames: one point per frame, from the model's frames
    assert not data.aggregated
    model.sealed = True
    with pytest.raises(AssertionError, match=r"model\.frames"):
        build_timeline(model)
    fresh = NoHistory(db, run_id)  # opened on its newest frame: the history is not read
    fresh.sealed = True
    assert build_timeline(fresh, aggregate_at=0).aggregated  # binned: no history read
    with pytest.raises(AssertionError, match=r"model\.frames"):
        build_timeline(model, aggregate_at=0)  # binned, but read already: the cheaper walk


def test_a_bin_of_one_frame_says_what_the_frame_is(db: st.Database) -> None:
    run_id = large_run(db, 3_000)
    model = NoHistory(db, run_id)
    model.sealed = True
    data = build_timeline(model, aggregate_at=0)
    texts = [t for trace in data.figure["data"] for t in trace["hovertext"] if t]
    assert any(t.startswith("<b>frames ") and " x checkpoint: progress" in t for t in texts)
    retries = next(t for t in data.figure["data"] if t["name"] == LATER_ATTEMPT)
    assert all("started, resumed from" in t for t in retries["hovertext"])  # one frame each


# --- the store's reads --------------------------------------------------------------------


def test_the_counts_and_the_frames_read_by_number_are_the_frames(db: st.Database) -> None:
    run_id = large_run(db, 3_000)
    rows = frame_rows(db.engine, run_id)
    wanted = [n for n in range(-5, 3_005) if n % 7]  # more than one statement's worth
    assert numbered_frames(db.engine, run_id, wanted) == [r for r in rows if r.frame_no % 7]
    assert frame_times(db.engine, run_id, wanted) == {
        r.frame_no: r.created_at_ms for r in rows if r.frame_no % 7
    }
    assert numbered_frames(db.engine, run_id, []) == []
    for by_iteration in (True, False):
        bins = frame_bins(
            db.engine, run_id, upto=2_000, width=64, by_iteration=by_iteration, times=True
        )
        assert sum(b.count for b in bins) == 2_001
        expected: dict[tuple[Any, ...], list[Any]] = {}
        for r in rows[:2_001]:
            key = (r.frame_no // 64, r.node_id, r.kind, r.purpose)
            key += (r.iteration if by_iteration else 0,)
            expected.setdefault(key, []).append(r)
        assert {(b.bin, b.node_id, b.kind, b.purpose, b.iteration): b for b in bins} == {
            key: FrameBin(*key, len(g), g[0].frame_no, g[-1].frame_no, g[-1].created_at_ms)
            for key, g in expected.items()
        }
    attempts = attempt_frames(db.engine, run_id, upto=2_000)
    assert [a.frame_no for a in attempts] == [
        r.frame_no
        for r in rows[:2_001]
        if r.kind in ("attempt_started", "attempt_finished") or r.kind == "reset"
    ]
    assert all(a.data == rows[a.frame_no].data for a in attempts)
