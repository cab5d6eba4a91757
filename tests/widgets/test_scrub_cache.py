"""The scrub cache's answers besides the snapshots themselves. A diff of two nearby frames
compares only what the frames between them change (``FoldCache.touched``), and only the rows
that differ (``trimmed``): what each one reports is exactly that, so the diff can skip
everything else and still be the full diff. The sorted ref keys the inspector pages through,
each node's newest ref and the attempts per node are those of the snapshot, whether the
cache made it or not."""

from __future__ import annotations

import random
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import timetravel as tt
from smithers_tt.demo import demo_workflow
from smithers_tt.store import CheckpointRef, Frame
from smithers_tt.store.for_widgets import frame_rows
from smithers_tt.timetravel import Snapshot
from smithers_tt.timetravel._snapshot import AttemptView, NodeView
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets._newest import node_table
from smithers_tt.widgets._scrub import TOUCHED_AT_MOST, FoldCache
from smithers_tt.widgets._trim import Touched, trimmed

from ._support import BulkHistory

RUN = "r"


def _frame(no: int, kind: str, node: str | None = None, attempt: int | None = None) -> Frame:
    checkpoint = kind == "checkpoint"
    return Frame(
        RUN,
        no,
        kind,
        node,
        None if node is None else 0,
        attempt,
        0 if checkpoint else None,
        "finished" if kind in ("node_state", "cache_hit", "attempt_finished") else None,
        "a" * 64 if checkpoint else None,
        "json" if checkpoint else None,
        1 if checkpoint else None,
        "progress" if checkpoint else None,
        None,
        {},
        no,
    )


HISTORY = [
    _frame(0, "run_created"),
    _frame(1, "run_claimed"),
    _frame(2, "attempt_started", "plan", 1),
    _frame(3, "checkpoint", "plan", 1),
    _frame(4, "attempt_finished", "plan", 1),
    _frame(5, "node_state", "plan", 1),
    _frame(6, "cache_hit", "draft", 1),
    _frame(7, "breakpoints_set"),
    _frame(8, "reset"),
    _frame(9, "run_finished"),
]


def _cache(frames: list[Frame]) -> FoldCache:
    def unused(ref: CheckpointRef) -> Any:
        raise AssertionError("touched reads no payload")

    return FoldCache(RUN, frames, unused)


def test_each_range_of_frames_reports_exactly_the_rows_its_frames_set() -> None:
    cache = _cache(HISTORY)
    assert cache.touched(1, 2) == Touched(set(), {("plan", 0, 1)}, set())
    assert cache.touched(2, 3) == Touched(set(), set(), {("plan", 0)})  # not frame 4's attempt
    assert cache.touched(3, 4) == Touched(set(), {("plan", 0, 1)}, set())
    assert cache.touched(4, 5) == Touched({"plan"}, set(), set())
    assert cache.touched(5, 6) == Touched({"draft"}, set(), set())
    assert cache.touched(0, 7) == Touched({"plan", "draft"}, {("plan", 0, 1)}, {("plan", 0)})
    assert cache.touched(6, 7) == Touched(set(), set(), set())  # status only: nothing to compare
    assert cache.touched(3, 3) == Touched(set(), set(), set())


def test_a_reset_or_a_fork_between_the_frames_asks_for_the_full_comparison() -> None:
    cache = _cache(HISTORY)
    assert cache.touched(7, 8) is None
    assert cache.touched(0, 9) is None
    assert cache.touched(8, 9) == Touched(set(), set(), set())
    forked = _cache([_frame(0, "forked"), _frame(1, "node_state", "plan")])
    assert forked.touched(-1, 1) is None
    assert forked.touched(0, 1) == Touched({"plan"}, set(), set())


def test_frames_far_apart_are_compared_in_full_and_nearer_ones_are_not() -> None:
    frames = [_frame(n, "run_claimed") for n in range(2 * TOUCHED_AT_MOST + 2)]
    cache = _cache(frames)
    assert cache.touched(0, TOUCHED_AT_MOST) == Touched(set(), set(), set())
    assert cache.touched(0, TOUCHED_AT_MOST + 1) is None
    assert cache.touched(5_000, 5_001) == Touched(set(), set(), set())
    late = TOUCHED_AT_MOST + 1
    assert cache.touched(late, late + TOUCHED_AT_MOST) == Touched(set(), set(), set())


def _ref(node: str, content: str, attempt: int = 1) -> CheckpointRef:
    return CheckpointRef(RUN, node, 0, attempt, 0, content * 64, "json", 1, "progress", None, 1)


def _snap(frame_no: int, refs: list[CheckpointRef], state: str, attempt_state: str) -> Snapshot:
    return Snapshot(
        RUN,
        frame_no,
        nodes={
            ("plan", 0): NodeView("plan", 0, state, 1, {"n": 1}),
            ("draft", 0): NodeView("draft", 0, "finished", 1, {"same": [1, 2]}),
        },
        attempts={
            ("plan", 0, 1): AttemptView("plan", 0, 1, attempt_state),
            ("draft", 0, 1): AttemptView("draft", 0, 1, "finished", error="same"),
        },
        refs={(r.node_id, r.iteration, r.attempt, r.sequence): r for r in refs},
    )


def test_trimmed_keeps_only_rows_that_differ_even_when_equal_rows_are_other_objects() -> None:
    a = _snap(1, [_ref("plan", "a"), _ref("draft", "c")], "running", "in_progress")
    b = _snap(2, [_ref("plan", "b", attempt=2), _ref("draft", "c")], "finished", "finished")
    newest_a = {("plan", 0): a.refs[("plan", 0, 1, 0)], ("draft", 0): a.refs[("draft", 0, 1, 0)]}
    newest_b = {("plan", 0): b.refs[("plan", 0, 2, 0)], ("draft", 0): b.refs[("draft", 0, 1, 0)]}
    ta, tb = trimmed(a, b, newest_a, newest_b)
    # draft's rows are equal on both sides (distinct but equal objects): left out
    assert set(ta.nodes) == set(tb.nodes) == {("plan", 0)}
    assert set(ta.attempts) == set(tb.attempts) == {("plan", 0, 1)}
    assert list(ta.refs) == [("plan", 0, 1, 0)] and list(tb.refs) == [("plan", 0, 2, 0)]
    assert (ta.frame_no, tb.frame_no) == (1, 2)
    # given what the frames between them touched, only that is compared
    only = Touched({"draft"}, set(), set())
    ta, tb = trimmed(a, b, newest_a, newest_b, only)
    assert set(ta.nodes) == {("draft", 0)} and not ta.attempts and not ta.refs


def _newest_of_each_node(snap: Snapshot) -> dict[tuple[str, int], CheckpointRef]:
    """Each node's (and iteration's) ref with the greatest attempt, then sequence."""
    best: dict[tuple[str, int], CheckpointRef] = {}
    for ref in snap.refs.values():
        key = (ref.node_id, ref.iteration)
        if key not in best or (ref.attempt, ref.sequence) > (best[key].attempt, best[key].sequence):
            best[key] = ref
    return best


def _expected_attempts(snap: Snapshot) -> list[tuple[str, int, list[int]]]:
    found: dict[tuple[str, int], list[int]] = {}
    for node_id, iteration, attempt in snap.attempts:
        found.setdefault((node_id, iteration), []).append(attempt)
    return [(n, i, sorted(a)) for (n, i), a in sorted(found.items())]


def _flaky_run(db: st.Database) -> str:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    return db.run(wf, {"topic": "bee"}).id


@pytest.mark.parametrize("make", ["_flaky_run", "_late_checkpoints_run"])
def test_what_the_cache_derives_holds_for_its_snapshots_and_for_snapshots_from_elsewhere(
    db: st.Database, make: str
) -> None:
    run_id = globals()[make](db)
    frames = db.store.frames(run_id)
    cache = FoldCache(run_id, frame_rows(db.store.engine, run_id), db.store.load)
    order = list(range(len(frames)))
    random.Random(7).shuffle(order)
    for n in order:
        folded = tt.fold(run_id, frames, upto=n)
        assert cache.at(n) is cache.at(n)  # kept: selecting it again rebuilds nothing
        for snap in (cache.at(n), folded):  # the cache's own, and one it never made
            assert snap == folded
            assert list(cache.sorted_ref_keys(snap)) == sorted(folded.refs)
            assert cache.newest(snap) == _newest_of_each_node(folded)
            assert cache.attempts_by_node(snap) == _expected_attempts(folded)
            assert cache.sorted_ref_keys(snap) is cache.sorted_ref_keys(snap)  # kept
            for limit in (1, 3, 1_000):
                _assert_node_table(node_table(snap, limit, cache.node_keys(snap)), folded, limit)
        assert cache.node_keys(folded) is None  # not one of its own: it cannot know
        assert cache.node_keys(cache.at(n)) is cache.node_keys(cache.at(n))  # kept


def newest_turns_of(every: list[tuple[str, int]], limit: int) -> list[tuple[str, int]]:
    """The ``limit`` rows a nodes table shows of sorted (node, iteration) keys ``every``:
    each node's iterations newest first, turn by turn (every node's newest, then every
    node's one before, ...), a turn's nodes by id; in key order."""
    turn: dict[tuple[str, int], int] = {}
    for node_id, iteration in every:
        newer = sum(1 for n, i in every if n == node_id and i > iteration)
        turn[(node_id, iteration)] = newer
    return sorted(sorted(every, key=lambda k: (turn[k], k[0]))[:limit])


def _assert_node_table(table: Any, folded: tt.Snapshot, limit: int) -> None:
    """The nodes table's ``limit`` rows are those :func:`newest_turns_of` every (node,
    iteration) with a node row or an attempt, in key order, with their node rows and all
    their attempts."""
    every = sorted(set(folded.nodes) | {key[:2] for key in folded.attempts})
    shown = newest_turns_of(every, limit)
    assert table.keys == shown and table.total == len(every)
    assert table.nodes == {k: folded.nodes[k] for k in shown if k in folded.nodes}
    assert table.attempts == {k: v for k, v in folded.attempts.items() if k[:2] in shown}


def _late_checkpoints_run(db: st.Database) -> str:
    """A bulk-written history where an older attempt of a node publishes after a newer one
    (so not every checkpoint is its node's newest) and the newest key is bound again with
    other content, over enough frames for several copies."""
    h = BulkHistory(db, "late", ["a", "b", "c"])

    def publish(node: str, attempt: int, sequence: int, again: bool = False) -> None:
        h.publish(node, 0, attempt, sequence, {"n": node, "a": attempt, "s": sequence,
                                               "again": again})  # fmt: skip

    for node in ("b", "a"):
        h.add("node_state", node_id=node, iteration=0, state="running")
        for attempt in (1, 2):
            h.add("attempt_started", node_id=node, iteration=0, attempt=attempt,
                  state="in_progress")  # fmt: skip
        for sequence in range(4):
            publish(node, 2, sequence)
            publish(node, 1, sequence)  # older attempt, later: not the node's newest
        publish(node, 2, 3, again=True)  # the newest key bound again (an import may do that)
        for attempt in (1, 2):
            h.add("attempt_finished", node_id=node, iteration=0, attempt=attempt,
                  state="finished")  # fmt: skip
        h.add("node_state", node_id=node, iteration=0, attempt=2, state="finished")
    # attempts of a node that never wrote a node row: the nodes table still lists it
    for attempt in (1, 2):
        h.add("attempt_started", node_id="c", iteration=0, attempt=attempt, state="in_progress")
        h.add("attempt_finished", node_id="c", iteration=0, attempt=attempt, state="failed")
    return h.write()


def _reset_run(db: st.Database) -> str:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    db.reset(run_id, "research", dependents=True)
    db.resume(run_id, wf)
    return run_id


def _failed_run(db: st.Database) -> str:
    """A run whose second node fails: every frame from there on carries the run's error."""

    async def fine(request: st.GenerateRequest) -> Any:
        return {"ok": True}

    async def boom(request: st.GenerateRequest) -> Any:
        raise RuntimeError("the model said no")

    wf = st.Workflow("fails")
    wf.task("fine", agent=fine)
    wf.task("boom", agent=boom, needs=["fine"])
    run = db.run(wf)
    assert run.status == "failed" and "the model said no" in (db.snapshot(run.id).error or "")
    return run.id


@pytest.mark.parametrize("mark_every", [2, 5])
@pytest.mark.parametrize("make", [_late_checkpoints_run, _reset_run, _failed_run])
def test_sorted_keys_and_pages_hold_across_copies_and_segments_in_any_order(
    db: st.Database, monkeypatch: pytest.MonkeyPatch, make: Any, mark_every: int
) -> None:
    """Copies of the rows every few assignments (a long run's keyframes, made small here),
    segments after a reset, and checkpoints that are not their node's newest: the inspector's
    sorted keys and pages at every frame are the fold's, in any order of selection."""
    import smithers_tt.widgets._scrub as scrub

    monkeypatch.setattr(scrub, "MARK_EVERY", mark_every)
    monkeypatch.setattr(scrub, "SNAPSHOT_CACHE", 2)  # rebuilt from the copies, not cached
    run_id = make(db)
    frames = db.store.frames(run_id)
    last = frames[-1].frame_no
    model = DebuggerModel(db, run_id)
    order = [*range(last, -1, -1), *random.Random(mark_every).sample(range(last + 1), last + 1)]
    for n in order:
        folded = tt.fold(run_id, frames, upto=n)
        model.select_frame(n)
        snap = model.snapshot
        assert snap == folded
        assert (snap.status, snap.error, snap.output) == (
            folded.status,
            folded.error,
            folded.output,
        )
        keys = sorted(folded.refs)
        assert list(model._fold.sorted_ref_keys(snap)) == keys
        assert model._fold.newest(snap) == _newest_of_each_node(folded)
        frame = frames[n - frames[0].frame_no]
        if frame.kind == "checkpoint":  # the inspector shows what the frame published
            published = (frame.node_id, frame.iteration, frame.attempt, frame.sequence)
            assert model.ref_key == published and model.ref == folded.refs[published]
        for limit in (1, 2, 1_000):  # the nodes table, whatever copy it is rebuilt from
            _assert_node_table(model.node_table(limit), folded, limit)
        pages = [model.ref_page(page=p, size=3) for p in range(max(1, -(-len(keys) // 3)))]
        assert [k for page in pages for k in page.keys] == keys
        assert {page.total for page in pages} == {len(keys)}
