"""The debugger's model in the orders a person selects frames: forwards, backwards, shuffled
jumps, steps, jumps to attempts (both ways), a ref picked or pinned by hand, a rewind, and live
refresh after another process rewound or forked the run.

Each step is checked against the store, folded here independently of the model (its caches,
keyframes and incremental folds are what is under test): the snapshot at the selected frame,
and the checkpoint the inspector must show there (the one the frame published, else the newest
of its node, else the newest published at all).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt import timetravel as tt
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import InvalidArgument, SnapshotInvalid
from smithers_tt.store import Frame, now_ms, write_history
from smithers_tt.store.for_widgets import content_sizes
from smithers_tt.testing import large_run
from smithers_tt.widgets import Debugger, DebuggerModel

Key = tuple[str, int, int, int]


def _key(frame: Frame) -> Key:
    return (frame.node_id or "", frame.iteration or 0, frame.attempt or 0, frame.sequence or 0)


class History:
    """A run as the store holds it, read once and folded here, not by the model."""

    def __init__(self, db: st.Database, run_id: str) -> None:
        self.db = db
        self.run_id = run_id
        self.frames = db.store.frames(run_id)
        self.by_no = {f.frame_no: f for f in self.frames}
        self.last = self.frames[-1].frame_no
        self._folds: dict[int, tt.Snapshot] = {}

    def at(self, n: int) -> tt.Snapshot:
        if n not in self._folds:  # a fork by reference folds on what it inherits
            base = tt.inherited(self.db.store, self.run_id)
            self._folds[n] = tt.fold(self.run_id, self.frames, upto=n, base=base)
        return self._folds[n]

    def numbers(self, *kinds: str) -> list[int]:
        return [f.frame_no for f in self.frames if f.frame_no >= 0 and f.kind in kinds]

    def shown_ref(self, n: int) -> Key | None:
        """The checkpoint a person expects in the inspector at frame ``n``."""
        snap, frame = self.at(n), self.by_no[n]
        if frame.kind == "checkpoint":
            return _key(frame)
        if frame.node_id is not None:
            own = [k for k in snap.refs if k[:2] == (frame.node_id, frame.iteration or 0)]
            if own:
                return max(own, key=lambda k: (k[2], k[3]))
        # the newest by time; of two in the same millisecond, the later frame (refs a fork by
        # reference inherits come before its own frames, in their parent's publication order)
        own = {
            _key(f): f.frame_no for f in self.frames if f.frame_no <= n and f.kind == "checkpoint"
        }
        published = [
            (ref.created_at_ms, own.get(key, -1), i, key)
            for i, (key, ref) in enumerate(snap.refs.items())
        ]
        return max(published)[3] if published else None


def assert_shows(model: DebuggerModel, history: History, n: int) -> None:
    """The model is at frame ``n`` and shows exactly what the store folds to there."""
    snap = history.at(n)
    assert model.frame_no == n
    assert model.frame() == history.by_no[n]
    assert model.snapshot == snap, f"frame {n}: the model's snapshot differs from the store's"
    key = history.shown_ref(n)
    assert model.ref_key == key, (n, history.by_no[n].kind, model.ref_key, key)
    assert not model.ref_pinned and not model.ref_hidden
    if key is None:
        assert model.ref is None
        return
    assert model.ref == snap.refs[key]
    assert model.load(model.ref).payload == history.db.store.load(snap.refs[key]).payload


def _flaky_run(db: st.Database) -> str:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    return db.run(wf, {"topic": "bee"}).id


def _orders(last: int, seed: int) -> list[int]:
    """Every frame forwards, then backwards, then all of them in a shuffled order."""
    shuffled = list(range(last + 1))
    random.Random(seed).shuffle(shuffled)
    return [*range(last + 1), *range(last, -1, -1), *shuffled]


# --- selecting frames ---------------------------------------------------------------------


def test_every_frame_in_every_order_shows_the_stores_snapshot_and_checkpoint(
    db: st.Database,
) -> None:
    run_id = _flaky_run(db)
    history = History(db, run_id)
    model = DebuggerModel(db, run_id)
    assert_shows(model, history, history.last)  # it opens at the newest frame
    for n in _orders(history.last, seed=21):
        model.select_frame(n)
        assert_shows(model, history, n)
    model.select_frame(5)  # another frame than the one asked for, read while 5 is selected
    assert [model.frame(n) for n in range(history.last + 1)] == model.visible_frames
    assert model.visible_frames == history.frames
    assert all(model.snapshot_at(n) == history.at(n) for n in range(history.last + 1))
    assert [model.frame_ref_key(n) for n in range(history.last + 1)] == [
        history.shown_ref(n) for n in range(history.last + 1)
    ]
    assert model.frame_no == 5
    for outside in (-1, history.last + 1):
        with pytest.raises(InvalidArgument) as raised:
            model.snapshot_at(outside)
        assert raised.value.message == (
            f"run {run_id} has frames 0 to {history.last}, not {outside}"
        )


def test_a_long_run_folds_the_same_across_keyframes_in_any_order(db: st.Database) -> None:
    run_id = large_run(db, 640)  # keyframes at 250 and 500
    history = History(db, run_id)
    model = DebuggerModel(db, run_id)
    picks = [0, 249, 250, 251, 639, 1, 499, 500, 501, 260, 600, 248, 502, 250, 10, 639]
    picks += random.Random(5).sample(range(640), 40)
    for n in picks:
        model.select_frame(n)
        assert_shows(model, history, n)
    model.select_frame(0)
    for n in range(1, 640):  # every frame forwards after the caches were filled out of order
        model.step(1)
        assert_shows(model, history, n)


def test_a_run_reset_in_place_shows_each_frames_own_state_across_copies_and_segments(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model reads the frames as rows and folds them lazily, logging what each frame
    sets; a reset in the history starts a new segment, and copies of the rows are kept every
    few assignments here. Whatever order frames are selected in, each one shows the snapshot
    the store folds to there, and the frames it lists are the store's."""
    import smithers_tt.widgets._scrub as scrub

    monkeypatch.setattr(scrub, "SNAPSHOT_CACHE", 2)  # snapshots rebuilt, not cached
    monkeypatch.setattr(scrub, "MARK_EVERY", 5)
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    db.reset(run_id, "research", dependents=True)
    db.resume(run_id, wf)
    history = History(db, run_id)
    assert [f.kind for f in history.frames].count("reset") == 1
    model = DebuggerModel(db, run_id)
    assert model.frames == history.frames and model.visible_frames == history.frames
    assert all(type(f) is Frame for f in model.frames)
    assert_shows(model, history, history.last)  # the newest frame, folded first
    for n in _orders(history.last, seed=8):
        model.select_frame(n)
        assert_shows(model, history, n)
    model.drop_caches()  # folded again, from a frame in the middle first
    for n in random.Random(9).sample(range(history.last + 1), history.last + 1):
        model.select_frame(n)
        assert_shows(model, history, n)


def test_a_fork_shows_its_inherited_checkpoints_from_frame_0(db: st.Database) -> None:
    parent = _flaky_run(db)
    fork_at = History(db, parent).numbers("checkpoint")[4]
    child = db.fork(parent, fork_at, reset=["write"]).id
    history = History(db, child)
    assert history.frames[0].frame_no == 0  # by reference: the parent's history is read there
    assert db.get_run(child).record.inherits
    model = DebuggerModel(db, child)
    assert model.visible_frames == [f for f in history.frames if f.frame_no >= 0]
    for n in _orders(history.last, seed=3):
        model.select_frame(n)
        assert_shows(model, history, n)
    model.select_frame(0)
    assert model.ref is not None and model.ref.node_id == "research"  # inherited, visible


def test_the_newest_checkpoint_of_frames_without_a_node_follows_publication_order(
    db: st.Database,
) -> None:
    # One transaction writes every frame with the same millisecond (bulk histories and
    # imports do); the run's last frame must still show the checkpoint published last.
    record, _ = db.store.create_run("same-ms", None, graph={"a": [], "b": []})
    run_id, stamp = record.run_id, now_ms()
    frames: list[Frame] = []
    contents = {}

    def add(kind: str, **fields: Any) -> None:
        frames.append(Frame(run_id, len(frames) + 1, kind, created_at_ms=stamp, **fields))

    def publish(node: str, sequence: int) -> None:
        encoded = AgentCheckpoint("x.state", 1, {"node": node, "seq": sequence}).encode()
        contents[encoded.content_hash] = encoded
        fields = {"node_id": node, "iteration": 0, "attempt": 1, "sequence": sequence}
        add("checkpoint", **fields, content_hash=encoded.content_hash, codec="x.state",
            version=1, purpose="progress", data={"size": encoded.size})  # fmt: skip

    for node in ("b", "a"):  # b first, then a: a's checkpoints are the newer ones
        add("node_state", node_id=node, iteration=0, state="running")
        add("attempt_started", node_id=node, iteration=0, attempt=1, state="in_progress")
        for sequence in range(2):
            publish(node, sequence)
        add("attempt_finished", node_id=node, iteration=0, attempt=1, state="finished")
        add("node_state", node_id=node, iteration=0, attempt=1, state="finished")
    add("run_finished", state="finished", data={"output": None, "error": None})
    created = Frame(run_id, 0, "run_created", state="running")
    snap = tt.fold(run_id, [created, *frames])
    nodes, attempts = tt.live_rows(snap, run_id)
    write_history(
        db.engine,
        run_id,
        frames,
        contents.values(),
        nodes=nodes,
        attempts=attempts,
        refs=snap.refs.values(),
        status="finished",
        output=None,
    )

    history = History(db, run_id)
    model = DebuggerModel(db, run_id)
    assert history.by_no[model.frame_no].kind == "run_finished"
    assert model.ref_key == ("a", 0, 1, 1)  # not b's (a greater id), not a's first
    assert model.load(model.ref).payload == {"node": "a", "seq": 1}
    for n in _orders(history.last, seed=8):
        model.select_frame(n)
        assert_shows(model, history, n)


def test_nodes_running_side_by_side_each_show_their_own_checkpoint(db: st.Database) -> None:
    # two nodes publish in turn (a parallel workflow): a frame of one node shows that node's
    # newest checkpoint, not the other node's newer one
    record, fence = db.store.create_run("parallel", None, graph={"a": [], "b": []})
    a = db.store.start_attempt(fence, "a", node_state="running").key
    b = db.store.start_attempt(fence, "b", node_state="running").key

    def publish(key: Any, step: int) -> None:
        db.store.publish(
            fence, key, AgentCheckpoint("x.state", 1, {"node": key.node_id, "step": step})
        )

    for step in range(2):
        publish(a, step)
        publish(b, step)
    db.store.finish_attempt(
        fence, a, "failed", error="TimeoutError: slow", error_code="TimeoutError"
    )
    a2 = db.store.start_attempt(fence, "a").key  # a's first attempt's checkpoints are its newest
    publish(b, 2)
    publish(a2, 0)
    db.store.finish_attempt(fence, b, "finished", node_state="finished", output={"b": 1})
    db.store.finish_attempt(fence, a2, "finished", node_state="finished", output={"a": 2})
    db.store.finish_run(fence, "finished", output={"done": True})
    history = History(db, record.run_id)
    model = DebuggerModel(db, record.run_id)
    ended_a1 = next(n for n, f in history.by_no.items() if f.kind == "attempt_finished")
    model.select_frame(ended_a1)
    assert model.ref_key == ("a", 0, 1, 1)  # b published after it: still a's
    for n in _orders(history.last, seed=34):
        model.select_frame(n)
        assert_shows(model, history, n)
    started_a2 = ended_a1 + 1
    assert history.by_no[started_a2].kind == "attempt_started"
    assert model.frame_ref_key(started_a2) == ("a", 0, 1, 1)
    ended_b = next(
        n for n, f in history.by_no.items() if f.kind == "attempt_finished" and f.node_id == "b"
    )
    assert model.frame_ref_key(ended_b) == ("b", 0, 1, 2)  # a's newer one is another node's


def test_select_frame_clamps_and_announces_only_a_change(db: st.Database) -> None:
    run_id = _flaky_run(db)
    history = History(db, run_id)
    model = DebuggerModel(db, run_id)
    events: list[str] = []
    for event in ("frame", "ref", "run", "frames", "diff"):
        model.on(event, lambda event=event: events.append(event))
    model.select_frame(history.last)  # already there: nothing to redraw
    assert events == []
    model.select_frame(-5)
    assert_shows(model, history, 0)
    assert events == ["frame", "ref"]
    model.step(-1)  # before the first frame: stays
    assert events == ["frame", "ref"]
    model.select_frame(history.last + 100)
    assert_shows(model, history, history.last)
    model.step(1)
    assert_shows(model, history, history.last)
    model.select_frame(3.0)  # a slider may hand a float
    assert_shows(model, history, 3)
    model.step(4)
    assert_shows(model, history, 7)
    model.step(-2)
    assert_shows(model, history, 5)
    assert events == ["frame", "ref"] * 5


@pytest.mark.parametrize("kinds", [None, ("checkpoint",), ("node_state", "run_finished")])
def test_jumps_visit_every_frame_of_the_kinds_both_ways(
    db: st.Database, kinds: tuple[str, ...] | None
) -> None:
    run_id = _flaky_run(db)
    history = History(db, run_id)
    model = DebuggerModel(db, run_id)
    wanted = history.numbers(*(kinds or ("attempt_started", "attempt_finished")))
    assert len(wanted) >= 4

    def jump(direction: int) -> None:
        if kinds is None:
            model.jump(direction)  # the default: attempts starting and ending
        else:
            model.jump(direction, kinds)

    backwards = [n for n in reversed(wanted) if n < history.last]
    for n in backwards:  # from the newest frame, jump(-1) all the way back
        jump(-1)
        assert_shows(model, history, n)
    jump(-1)  # none before the first: it stays
    assert_shows(model, history, backwards[-1])
    model.select_frame(0)
    forwards = [n for n in wanted if n > 0]
    for n in forwards:
        jump(1)
        assert_shows(model, history, n)
    jump(1)
    assert_shows(model, history, forwards[-1])
    middle = wanted[len(wanted) // 2]
    model.select_frame(middle)  # from a frame of the kind: the next and the previous one
    jump(1)
    assert_shows(model, history, wanted[wanted.index(middle) + 1])
    model.select_frame(middle)
    jump(-1)
    assert_shows(model, history, wanted[wanted.index(middle) - 1])
    between = next(n for n in range(history.last) if n not in wanted and n + 1 not in wanted)
    model.select_frame(between)  # from a frame of another kind
    jump(-1)
    earlier = [n for n in wanted if n < between]
    assert_shows(model, history, earlier[-1] if earlier else between)


def test_a_jump_in_a_fork_counts_from_frame_0_not_from_the_base_frames(db: st.Database) -> None:
    parent = _flaky_run(db)
    child = db.fork(parent, History(db, parent).numbers("attempt_finished")[1]).id
    wf, _ = demo_workflow()
    db.resume(child, wf)
    history = History(db, child)
    model = DebuggerModel(db, child)
    wanted = history.numbers("attempt_started", "attempt_finished")
    model.select_frame(0)
    for n in wanted:
        model.jump(1)
        assert_shows(model, history, n)
    for n in reversed(wanted[:-1]):
        model.jump(-1)
        assert_shows(model, history, n)


# --- the inspector's checkpoint -------------------------------------------------------------


def test_a_ref_picked_by_hand_lasts_until_another_frame_is_selected(db: st.Database) -> None:
    run_id = _flaky_run(db)
    history = History(db, run_id)
    model = DebuggerModel(db, run_id)
    checkpoints = history.numbers("checkpoint")
    events: list[str] = []
    model.on("ref", lambda: events.append("ref"))
    for n in (checkpoints[-1], checkpoints[2], history.last, checkpoints[0] + 1):
        model.select_frame(n)
        picked = min(history.at(n).refs)  # the first in the list, not the frame's own
        assert picked != history.shown_ref(n)
        events.clear()
        model.select_ref(picked)
        assert model.ref_key == picked and model.ref == history.at(n).refs[picked]
        assert not model.ref_pinned and events == ["ref"]
        model.select_ref(list(picked))  # the same ref again (a list from the browser): no redraw
        assert events == ["ref"]
        model.select_frame(n)  # the same frame: the choice stays
        assert model.ref_key == picked
        other = checkpoints[1] if n != checkpoints[1] else checkpoints[3]
        model.select_frame(other)  # another frame: its own checkpoint again
        assert_shows(model, history, other)
    model.select_ref(None)
    assert model.ref_key is None and model.ref is None
    with pytest.raises(InvalidArgument, match="shows no checkpoint ref"):
        model.select_ref(("write", 0, 9, 9))
    assert model.ref_key is None


def test_a_pinned_ref_holds_across_frames_and_unpinning_follows_the_frame(
    db: st.Database,
) -> None:
    run_id = _flaky_run(db)
    history = History(db, run_id)
    model = DebuggerModel(db, run_id)
    checkpoints = history.numbers("checkpoint")
    pin_at = checkpoints[2]
    model.select_frame(pin_at)
    pinned = history.shown_ref(pin_at)
    events = _recorder(model)
    model.pin_ref()
    assert model.ref_pinned and model.ref_key == pinned and events == ["ref"]
    model.select_ref(pinned)  # picked again in the list: still pinned
    assert model.ref_pinned and events == ["ref"]
    for n in _orders(history.last, seed=2)[::3]:
        model.select_frame(n)
        assert model.frame_no == n and model.snapshot == history.at(n)
        assert model.ref_key == pinned
        visible = pinned in history.at(n).refs
        assert model.ref_hidden is not visible
        assert model.ref == (history.at(n).refs[pinned] if visible else None)
    model.select_frame(checkpoints[0])  # published before the pinned one
    assert model.ref_hidden and model.ref is None
    model.pin_ref(True)  # pinning again changes nothing
    assert model.ref_pinned and model.ref_key == pinned
    events.clear()
    model.pin_ref(False)
    assert_shows(model, history, checkpoints[0])
    assert events == ["ref"]
    model.pin_ref(False)
    assert_shows(model, history, checkpoints[0])
    assert events == ["ref"]
    model.select_frame(checkpoints[-1])
    model.select_ref(history.shown_ref(checkpoints[1]), pin=True)  # pick and pin in one
    model.select_ref(history.shown_ref(checkpoints[2]))  # another one: the pin moves to it
    model.select_frame(checkpoints[3])
    assert model.ref_key == history.shown_ref(checkpoints[2]) and model.ref_pinned
    model.select_ref(history.shown_ref(checkpoints[3]), pin=False)
    assert not model.ref_pinned
    model.select_frame(checkpoints[4])
    assert_shows(model, history, checkpoints[4])
    model.select_frame(0)  # nothing published yet: nothing to pin
    assert model.ref_key is None
    model.pin_ref()
    assert not model.ref_pinned
    model.select_ref(None, pin=True)
    assert not model.ref_pinned


def test_the_inspector_shows_each_frames_checkpoint_after_jumps_in_both_ways(
    db: st.Database,
) -> None:
    run_id = _flaky_run(db)
    history = History(db, run_id)
    dbg = Debugger(db, run_id, live=False)
    for n in _orders(history.last, seed=13)[::2]:
        dbg.select_frame(n)
        assert_shows(dbg.model, history, n)
        key = history.shown_ref(n)
        assert f'<h4>Frame {n} · run <code class="stt-id" title="{run_id}">' in (
            dbg.inspector.summary.value
        )
        assert dbg.scrubber.slider.value == n
        assert dbg.inspector.refs.value == key
        if key is not None:
            assert f"#{key[2]} seq {key[3]}</h4>" in dbg.inspector.payload.value
    dbg.select_frame(history.last)
    for n in reversed(history.numbers("attempt_started", "attempt_finished")):
        dbg.scrubber.prev_attempt.click()  # ◀◀ from the newest frame back to the first attempt
        assert_shows(dbg.model, history, n)
        assert dbg.inspector.refs.value == history.shown_ref(n)
    for n in history.numbers("checkpoint"):
        dbg.scrubber.next_checkpoint.click()  # ◆▶ forwards again
        assert_shows(dbg.model, history, n)
        assert f"#{n and _key(history.by_no[n])[2]} seq " in dbg.inspector.payload.value


# --- rewind, and refresh after another process changed the run ---------------------------


def _recorder(model: DebuggerModel) -> list[str]:
    events: list[str] = []
    for event in ("run", "frames", "frame", "ref", "tree", "diff"):
        model.on(event, lambda event=event: events.append(event))
    return events


@pytest.mark.parametrize("where", ["newest", "before", "after"])
def test_refresh_after_a_rewind_elsewhere_shows_the_rewound_history(
    db: st.Database, where: str
) -> None:
    run_id = _flaky_run(db)
    old = History(db, run_id)
    model = DebuggerModel(db, run_id)
    to = old.numbers("checkpoint")[3]
    looked = {"newest": old.last, "before": to - 2, "after": to + 3}[where]
    model.select_frame(looked)
    events = _recorder(model)
    db.rewind(run_id, to, confirm=True)  # another handle; the model has not read it yet
    assert model.refresh()
    new = History(db, run_id)
    assert new.last == to and model.last_frame == to
    assert model.frames == new.frames
    assert events == ["run", "tree", "frame", "ref", "diff"]
    assert model.record.status == "interrupted"
    assert model.edge(run_id).status == "interrupted"  # the fork tree says so too
    assert (model.root, model.tree) == tt.fork_tree(db.store, run_id)
    assert_shows(model, new, min(looked, to))
    events.clear()
    assert not model.refresh() and events == []  # nothing changed since


def test_refresh_after_a_rewind_and_a_resume_elsewhere_drops_the_old_frames(
    db: st.Database,
) -> None:
    run_id = _flaky_run(db)
    model = DebuggerModel(db, run_id)
    following = DebuggerModel(db, run_id)
    old = History(db, run_id)
    to = old.numbers("attempt_finished")[1]
    db.rewind(run_id, to, confirm=True)
    wf, _ = demo_workflow()  # resumed by another process: new frames after the rewind point
    db.resume(run_id, wf)
    fork = db.fork(run_id, 3).id  # and forked: the tree changed too
    new = History(db, run_id)
    assert new.frames[to + 1] != old.frames[to + 1]
    events = _recorder(model)
    model.select_frame(to - 1)  # a selection reads the run again first: it was rewritten
    assert not model.refresh()  # nothing is left for a refresh to find
    assert model.frames == new.frames, "frames of the old history are still shown"
    assert "run" in events
    assert model.edge(run_id).status == "finished" and model.edge(fork) is not None
    assert (model.root, model.tree) == tt.fork_tree(db.store, run_id)
    assert_shows(model, new, to - 1)
    for n in range(to, new.last + 1):
        model.select_frame(n)
        assert_shows(model, new, n)
    assert following.refresh()  # one that was following the newest frame
    assert following.frames == new.frames
    assert following.last_frame == new.last
    assert following.snapshot == new.at(following.frame_no)


def test_refresh_after_new_frames_follows_only_from_the_newest_frame(db: st.Database) -> None:
    record, fence = db.store.create_run("outside", None)
    key = db.store.start_attempt(fence, "a").key
    model = DebuggerModel(db, record.run_id)
    events = _recorder(model)
    assert not model.refresh() and events == []
    for step in range(3):
        db.store.publish(fence, key, AgentCheckpoint("x.state", 1, {"step": step}))
        assert model.refresh()
        history = History(db, record.run_id)
        assert events == ["frames", "frame", "ref"]
        assert_shows(model, history, history.last)
        assert model.load(model.ref).payload == {"step": step}
        events.clear()
    model.select_frame(1)
    events.clear()
    db.store.publish(fence, key, AgentCheckpoint("x.state", 1, {"step": 9}))
    db.store.publish(fence, key, AgentCheckpoint("x.state", 1, {"step": 10}))
    assert model.refresh()
    history = History(db, record.run_id)
    assert events == ["frames"]  # more frames, the selection stays where the person looks
    assert model.frames == history.frames and model.last_frame == history.last
    assert_shows(model, history, 1)
    model.select_frame(history.last)
    assert_shows(model, history, history.last)
    events.clear()
    child = db.fork(record.run_id, 2)  # a fork elsewhere, then the run ends
    db.store.finish_run(fence, "finished")
    assert model.refresh() and model.record.status == "finished"
    assert events == ["tree", "frames", "frame", "ref"] and not model.live
    assert model.edge(child.id).parent_frame_no == 2
    assert model.edge(record.run_id).status == "finished"


def test_a_rewind_from_the_model_shows_the_frame_it_rewound_to(db: st.Database) -> None:
    run_id = _flaky_run(db)
    model = DebuggerModel(db, run_id)
    old = History(db, run_id)
    to = old.numbers("checkpoint")[2] + 1
    model.select_frame(to)
    model.pin_ref(True)
    events = _recorder(model)
    pending = model.request_rewind("  look again  ")
    assert pending is not None and pending.frame_no == to
    assert pending.options == {"reason": "look again"}
    assert model.frames == old.frames  # nothing yet
    result = model.confirm()
    assert result is not None and result.ok, result
    assert (result.action, result.run_id, result.frame_no) == ("rewind", run_id, to)
    assert model.last_result == result
    assert (model.message.kind, model.message.text) == ("success", result.text)
    assert f"{old.last - to} later frame(s) removed" in result.text
    new = History(db, run_id)
    assert new.last == to and model.frames == new.frames
    assert_shows(model, new, to)  # the pin does not survive the reload
    assert {"run", "tree", "frame", "ref", "diff"} <= set(events)
    assert model.request_rewind() is None  # at the newest frame now
    assert "nothing to rewind" in model.message.text
    with db.lineage() as lin:  # the reason went to the audit with the rewind
        rows = lin.sql("SELECT operation, detail_json FROM audit WHERE run_id = ?", [run_id])
    reasons = {(r.operation, json.loads(r.detail_json).get("reason")) for r in rows.itertuples()}
    assert ("rewind", "look again") in reasons


def test_the_rewind_confirmation_says_what_is_deleted_and_why(db: st.Database) -> None:
    run_id = _flaky_run(db)
    model = DebuggerModel(db, run_id)
    last = model.last_frame
    model.select_frame(6)
    pending = model.request_rewind()
    assert pending is not None and pending.options == {}
    assert pending.summary == (
        f"Rewind run {run_id} to frame 6: frames 7 to {last} are deleted in place "
        "(Undo rewind brings them back)."
    )
    assert model.pending == pending and model.message is None
    model.cancel()
    assert model.pending is None
    assert (model.message.kind, model.message.text) == (
        "info",
        "Rewind cancelled; nothing was changed.",
    )
    pending = model.request_rewind(" a typo in the prompt ")
    assert pending is not None and pending.summary.endswith(
        "(Undo rewind brings them back); reason: a typo in the prompt."
    )
    model.cancel()
    model.select_frame(last)
    assert model.request_rewind() is None and model.pending is None
    assert (model.message.kind, model.message.text) == (
        "info",
        f"run {run_id} is already at frame {last}: nothing to rewind",
    )
    assert db.store.get_run(run_id).clock == last


def test_switching_runs_starts_from_the_other_runs_newest_frame(db: st.Database) -> None:
    parent = _flaky_run(db)
    child = db.fork(parent, 9).id
    db.resume(child, demo_workflow()[0])
    model = DebuggerModel(db, parent)
    model.select_frame(4)
    model.pin_ref(True)
    model.set_diff("attempts", compare_frame=2, compare_run=child, attempt_pair=("write", 0, 1, 2))
    model.request_rewind()
    model.select_frame(model.last_frame)
    assert model.request_rewind() is None and model.message is not None  # nothing to rewind
    model.select_frame(4)
    assert model.pending is not None  # the rewind to frame 4 still waits
    events = _recorder(model)
    model.on("pending", lambda: events.append("pending"))
    model.switch_run(parent)  # the run already shown: nothing changes
    assert events == [] and model.frame_no == 4 and model.pending is not None
    model.switch_run(child)
    history = History(db, child)
    assert model.run_id == child and model.record == db.store.get_run(child)
    assert model.frames == history.frames
    assert_shows(model, history, history.last)  # the pin and the selection were the parent's
    assert (model.diff_mode, model.compare_frame, model.compare_run) == ("frames", None, None)
    assert (model.compare_run_frame, model.attempt_pair) == (None, None)
    assert model.pending is None and model.message is None
    assert events == ["run", "tree", "frame", "ref", "diff", "pending"]
    assert {e.run_id for e in model.tree} == {parent, child}
    with pytest.raises(st.RunNotFound):
        model.switch_run("no-such-run")
    assert model.run_id == child and model.frames == history.frames


def test_an_update_read_before_switching_runs_is_not_applied(db: st.Database) -> None:
    first, second = _flaky_run(db), _flaky_run(db)
    model = DebuggerModel(db, first)
    db.rewind(first, 4, confirm=True)
    update = model.fetch_update()  # read in the live refresher's thread...
    model.switch_run(second)  # ...while the person opens another run
    history = History(db, second)
    assert model.apply_update(update) is False
    assert model.run_id == second and model.frames == history.frames
    assert_shows(model, history, history.last)


def test_a_run_with_a_missing_frame_is_refused_naming_the_gap(db: st.Database) -> None:
    run_id = _flaky_run(db)
    with db.engine.sa.begin() as conn:  # damaged on purpose
        conn.execute(
            sa.text("DELETE FROM tt_frame_rows WHERE run_id = :r AND frame_no = 4"), {"r": run_id}
        )
    with pytest.raises(SnapshotInvalid, match=f"run {run_id}.*frames jump from 3 to 5"):
        DebuggerModel(db, run_id)


def test_nodes_and_checkpoint_sizes_of_a_run_written_without_a_graph(db: st.Database) -> None:
    record, fence = db.store.create_run("outside", None)  # no graph: nodes as they appear
    model = DebuggerModel(db, record.run_id)
    assert model.node_ids == []
    for node, step in (("zeta", 1), ("alpha", 2), ("zeta", 3)):
        key = db.store.start_attempt(fence, node).key
        db.store.publish(fence, key, AgentCheckpoint("x.state", 1, {"step": "x" * step}))
        model.refresh()
    assert model.node_ids == ["zeta", "alpha"]
    refs = list(model.snapshot.refs.values())
    stored = content_sizes(db.engine, [r.content_hash for r in refs])
    assert model.sizes(refs) == stored and len(stored) == 3
    assert all(f"{stored[r.content_hash]} B" in model.ref_label(r, stored[r.content_hash])
               for r in refs)  # fmt: skip
    wf, _ = demo_workflow()
    demo_id = db.run(wf, {"topic": "bee"}).id
    graph = db.store.get_run(demo_id).graph
    assert graph is not None and set(graph) == {"research", "write", "review"}
    # the graph's nodes first, in its order (research feeds write, which feeds review), not
    # the stored graph's (its keys are sorted: research, review, write)
    assert DebuggerModel(db, demo_id).node_ids == ["research", "write", "review"]
