"""Selecting a frame shows that frame's checkpoint, in every order a person selects frames:
forwards, backwards, jumps, the slider, a click and live refresh; a pinned ref stays."""

from __future__ import annotations

import itertools
import random

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt.demo import demo_workflow
from smithers_tt.testing import large_run
from smithers_tt.widgets import Debugger, DebuggerModel
from smithers_tt.widgets import _loading as loading
from smithers_tt.widgets._scrubber import Scrubber


def _key(frame: st.Frame) -> tuple[str, int, int, int]:
    return (frame.node_id, frame.iteration or 0, frame.attempt or 0, frame.sequence or 0)


def _checkpoint_frames(model: DebuggerModel) -> list[st.Frame]:
    return [f for f in model.visible_frames if f.kind == "checkpoint"]


def _assert_shows_own(dbg: Debugger, frame: st.Frame) -> None:
    m = dbg.model
    assert m.frame_no == frame.frame_no
    assert m.ref_key == _key(frame), (frame.frame_no, m.ref_key)
    assert dbg.inspector.refs.value == _key(frame)
    assert f"seq {frame.sequence}</h4>" in dbg.inspector.payload.value


def test_every_checkpoint_frame_shows_its_own_checkpoint_forwards_and_backwards(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run = db.run(wf, {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    frames = _checkpoint_frames(dbg.model)
    assert len(frames) >= 6
    for frame in frames:  # forwards: each earlier ref is still visible, and must not stick
        dbg.select_frame(frame.frame_no)
        _assert_shows_own(dbg, frame)
    for frame in reversed(frames):  # backwards
        dbg.select_frame(frame.frame_no)
        _assert_shows_own(dbg, frame)
    for frame in (frames[-1], frames[0], frames[len(frames) // 2], frames[1]):  # jumps
        dbg.timeline.model.select_frame(frame.frame_no)
        _assert_shows_own(dbg, frame)


def test_the_slider_steps_and_jumps_follow_the_frame(db: st.Database) -> None:
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    frames = _checkpoint_frames(dbg.model)
    for frame in frames:
        dbg.scrubber.slider.value = frame.frame_no
        _assert_shows_own(dbg, frame)
    dbg.scrubber.first.click()
    for frame in frames:  # "next checkpoint" walks them in order
        dbg.scrubber.next_checkpoint.click()
        _assert_shows_own(dbg, frame)
    dbg.select_frame(frames[1].frame_no)
    while dbg.model.frame_no > frames[0].frame_no:  # step back to the first one
        dbg.scrubber.prev.click()
    _assert_shows_own(dbg, frames[0])


def test_a_jump_button_is_off_where_it_would_go_nowhere(db: st.Database) -> None:
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    s = dbg.scrubber
    frames = dbg.model.visible_frames
    last_checkpoint = _checkpoint_frames(dbg.model)[-1].frame_no
    # at the newest frame (opened there, its history not read): nothing lies ahead
    assert (s.next_attempt.disabled, s.next_checkpoint.disabled) == (True, True)
    assert s.prev_attempt.disabled is False
    s.first.click()  # frame 0: nothing lies behind
    assert s.prev_attempt.disabled is True
    assert (s.next_attempt.disabled, s.next_checkpoint.disabled) == (False, False)
    dbg.select_frame(last_checkpoint)  # no checkpoint after this frame
    assert s.next_checkpoint.disabled is True
    assert any(f.kind == "attempt_finished" for f in frames if f.frame_no > dbg.model.frame_no)
    assert s.next_attempt.disabled is False
    s.next_checkpoint.click()  # a disabled button is not clicked by a person; nothing moves
    assert dbg.model.frame_no == last_checkpoint


def _jumps(frames: list[st.Frame], n: int) -> tuple[int | None, int | None, int | None]:
    """Where ◀◀, ▶▶ and ◆▶ go from frame ``n`` of ``frames`` (None: nowhere)."""
    attempts = [f.frame_no for f in frames if f.kind in ("attempt_started", "attempt_finished")]
    checkpoints = [f.frame_no for f in frames if f.kind == "checkpoint"]
    return (
        max((a for a in attempts if a < n), default=None),
        min((a for a in attempts if a > n), default=None),
        min((c for c in checkpoints if c > n), default=None),
    )


def _assert_jumps_at_every_frame(s: Scrubber) -> dict[int, tuple[int | None, ...]]:
    """At every frame of the shown run (forwards, then backwards), each jump button is off
    exactly where the store's frames say it would go nowhere, and (forwards) a click on one
    that is on selects the frame it should."""
    m = s.model
    frames = [f for f in m.db.store.frames(m.run_id) if f.frame_no >= 0]  # base frames: not shown
    assert m.last_frame == frames[-1].frame_no
    buttons = (s.prev_attempt, s.next_attempt, s.next_checkpoint)
    seen = {}
    for n in range(m.last_frame + 1):
        m.select_frame(n)
        seen[n] = expected = _jumps(frames, n)
        assert [b.disabled for b in buttons] == [e is None for e in expected], (n, expected)
        button, target = buttons[n % 3], expected[n % 3]  # each button at a third of them
        if target is not None:
            button.click()
            assert m.frame_no == target, (n, button.description)
    for n in range(m.last_frame, -1, -1):
        m.select_frame(n)
        assert [b.disabled for b in buttons] == [e is None for e in seen[n]], (n, seen[n])
    return seen


def test_the_jump_buttons_follow_a_rewind_its_undo_and_a_fork(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    model = DebuggerModel(db, run_id)
    s = Scrubber(model)
    whole = _assert_jumps_at_every_frame(s)
    # rewind to just before a checkpoint that follows another kind of frame: from the frame
    # before, ◆▶ went to that checkpoint; in the rewound history it goes nowhere
    frames = db.store.frames(run_id)
    to = max(
        f.frame_no
        for f, g in itertools.pairwise(frames)
        if g.kind == "checkpoint" and f.kind != "checkpoint"
    )
    model.select_frame(to)
    model.request_rewind()
    assert model.confirm().ok
    assert model.last_frame == to
    rewound = _assert_jumps_at_every_frame(s)
    assert (whole[to - 1][2], rewound[to - 1][2]) == (to + 1, None)
    model.request_undo_rewind()
    assert model.confirm().ok
    assert _assert_jumps_at_every_frame(s) == whole  # all back as it was
    # a fork with base frames (its parent's, below frame 0): no jump goes to one of them
    child = db.fork(run_id, 12).id
    assert db.materialize(child)
    db.resume(child, wf)
    model.switch_run(child)
    base = [f for f in model.frames if f.frame_no < 0]
    assert any(f.kind in ("attempt_started", "checkpoint") for f in base)
    _assert_jumps_at_every_frame(s)


def test_the_jump_buttons_follow_frames_another_writer_adds(db: st.Database) -> None:
    record, fence = db.store.create_run("outside", None)
    key = db.store.start_attempt(fence, "a").key
    db.store.publish(fence, key, AgentCheckpoint("x.state", 1, {"step": 0}))
    db.store.start_attempt(fence, "b")
    model = DebuggerModel(db, record.run_id)
    s = Scrubber(model)
    before = _assert_jumps_at_every_frame(s)  # the history read, its frames numbered once
    at = max(n for n, e in before.items() if e[2] is not None) + 1  # past the last checkpoint
    model.select_frame(at)
    assert (s.next_attempt.disabled, s.next_checkpoint.disabled) == (False, True)
    c = db.store.start_attempt(fence, "c").key  # another attempt, then a checkpoint of it
    db.store.publish(fence, c, AgentCheckpoint("x.state", 1, {"step": 1}))
    model.refresh()  # the new frames are added to the history held
    assert model.frame_no == at  # looking back: new frames do not move it
    assert s.next_checkpoint.disabled is False
    s.next_checkpoint.click()
    assert model.frame() == db.store.frames(record.run_id)[-1]
    _assert_jumps_at_every_frame(s)


def test_the_jump_buttons_on_a_history_read_behind_the_newest_frame(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loading, "PRELOAD_AT", 0)  # its frames numbered in the thread
    run_id = db.run(demo_workflow(flaky=True)[0], {"topic": "bee"}).id
    model = DebuggerModel(db, run_id)
    s = Scrubber(model)
    model.read_history_behind()
    assert model._preload is not None and model._preload.result() is not None
    assert not model.history_loaded
    _assert_jumps_at_every_frame(s)


def test_a_click_on_a_checkpoint_point_after_another(db: st.Database) -> None:
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    progress = [f for f in _checkpoint_frames(dbg.model) if f.purpose == "progress"]
    for index in (0, 3, 1, 2):
        dbg.timeline.click("checkpoint: progress", index)
        _assert_shows_own(dbg, progress[index])


def test_a_large_run_shows_the_checkpoint_of_frame_500(db: st.Database) -> None:
    run_id = large_run(db, 1_200)
    dbg = Debugger(db, run_id, live=False)
    frames = {f.frame_no: f for f in _checkpoint_frames(dbg.model)}
    picks = [n for n in sorted(frames) if n > 290][:1] + [n for n in sorted(frames) if n >= 497]
    first, later = picks[0], picks[1:4]
    dbg.select_frame(first)
    _assert_shows_own(dbg, frames[first])
    for n in later:  # the reported bug: frame 500 kept showing the checkpoint of seq 298
        dbg.select_frame(n)
        _assert_shows_own(dbg, frames[n])


def test_a_pinned_ref_stays_and_looks_pinned(db: st.Database) -> None:
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    frames = _checkpoint_frames(dbg.model)
    research = [f for f in frames if f.node_id == "research"]
    dbg.select_frame(research[1].frame_no)
    dbg.inspector.pin.value = True  # pin the shown ref
    pinned = _key(research[1])
    assert dbg.model.ref_pinned and dbg.model.ref_key == pinned
    assert "pinned" in dbg.inspector.payload.value
    assert dbg.inspector.pin.description.startswith("pinned")
    dbg.select_frame(research[3].frame_no)  # another checkpoint frame: the pin holds
    assert dbg.model.ref_key == pinned and dbg.inspector.refs.value == pinned
    assert "pinned" in dbg.inspector.payload.value
    assert f"this frame published research attempt #1 seq {research[3].sequence}" in (
        dbg.inspector.payload.value
    )
    dbg.select_frame(research[0].frame_no)  # before it was published: said, not swapped
    assert dbg.model.ref_key == pinned and dbg.model.ref is None and dbg.model.ref_hidden
    assert "not visible at frame" in dbg.inspector.payload.value
    dbg.inspector.pin.value = False  # unpinned: back to the frame's own checkpoint
    _assert_shows_own(dbg, research[0])
    assert "pinned" not in dbg.inspector.payload.value
    dbg.select_frame(research[2].frame_no)
    _assert_shows_own(dbg, research[2])

    # a ref picked in the list without pinning lasts only for this frame
    dbg.select_frame(frames[-1].frame_no)
    dbg.inspector.refs.value = _key(research[0])
    assert dbg.model.ref_key == _key(research[0]) and not dbg.model.ref_pinned
    dbg.select_frame(research[3].frame_no)
    _assert_shows_own(dbg, research[3])


def test_live_refresh_shows_each_new_checkpoint(db: st.Database) -> None:
    record, fence = db.store.create_run("outside", None)
    key = db.store.start_attempt(fence, "a").key
    dbg = Debugger(db, record.run_id, live=False)
    for step in range(4):  # another writer publishes; the debugger follows the newest frame
        db.store.publish(fence, key, AgentCheckpoint("x.state", 1, {"step": step}))
        dbg.refresh_button.click()
        newest = dbg.model.frame()
        assert newest.kind == "checkpoint" and newest.sequence == step
        _assert_shows_own(dbg, newest)
        assert f'&quot;step&quot;</span>: <span class="stt-num">{step}</span>' in (
            dbg.inspector.payload.value
        )
    dbg.select_frame(dbg.model.last_frame - 1)  # looking back: new frames do not move it
    looked = dbg.model.frame()
    db.store.publish(fence, key, AgentCheckpoint("x.state", 1, {"step": 9}))
    dbg.refresh_button.click()
    _assert_shows_own(dbg, looked)


def test_a_frame_selected_before_display_shows_in_the_timeline(db: st.Database) -> None:
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    dbg.select_frame(7)  # in the same cell as Debugger(...), before any view exists
    # what a view renders from when it is displayed later: the line is at frame 7
    assert dbg.timeline.figure._widget_layout["shapes"][0]["x0"] == 7
    assert dbg.timeline.figure.layout.shapes[0].x0 == 7
    dbg.theme_probe.theme = {"light": True, "ink": "rgb(1, 2, 3)"}  # then the theme arrives
    assert dbg.timeline.figure._widget_layout["shapes"][0]["x0"] == 7
    dbg.select_frame(3)
    assert dbg.timeline.figure._widget_layout["shapes"][0]["x0"] == 3


def test_the_pages_of_checkpoints_list_what_each_frame_shows_in_key_order(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inspector's list of refs, page after page, is every ref visible at the frame in
    (node, iteration, attempt, sequence) order, with the selected ref on the page shown first,
    at frames between and on the copies the scrub cache keeps (many, in a short run)."""

    import smithers_tt.widgets._scrub as scrub

    monkeypatch.setattr(scrub, "MARK_EVERY", 500)  # copies every ~100 frames: keys added between
    run_id = large_run(db, 1_500)
    model = DebuggerModel(db, run_id)
    rng = random.Random(4)
    for n in [0, 1, model.last_frame, *rng.sample(range(model.last_frame), 25)]:
        model.select_frame(n)
        expected = sorted(db.snapshot(run_id, n).refs)
        first = model.ref_page(size=7)
        listed = [k for p in range(first.pages) for k in model.ref_page(page=p, size=7).keys]
        assert listed == expected, n
        assert (first.total, first.matched) == (len(expected), len(expected))
        if model.ref_key is not None:
            assert model.ref_key in first.keys
        labels = {k: model.ref_label(model.snapshot.refs[k]).lower() for k in expected}
        searched = [k for k in expected if "plan" in labels[k]]
        found = model.ref_page("plan", page=0, size=7)
        assert found.matched == len(searched) and found.keys == searched[:7]


def test_which_page_of_checkpoints_the_inspector_opens_on(db: st.Database) -> None:
    """The page holding the selected ref; with none selected (or it is not among a search's
    matches) the last page, of the newest sequences, or the first page of a search; a page
    asked for past the end is the last one; a frame with no checkpoint has one empty page."""
    model = DebuggerModel(db, large_run(db, 200))
    model.select_frame(model.last_frame)
    keys = sorted(model.snapshot.refs)
    size = 4
    pages = -(-len(keys) // size)
    assert pages > 3
    chosen = model.ref_page(size=size)
    at = keys.index(model.ref_key)
    assert (chosen.page, chosen.keys) == (
        at // size,
        keys[at // size * size : at // size * size + size],
    )
    assert (chosen.pages, chosen.total, chosen.matched, chosen.query) == (
        pages,
        len(keys),
        len(keys),
        "",
    )

    model.select_ref(None)  # none selected: the last page, the newest sequences
    last = model.ref_page(size=size)
    assert (last.page, last.keys) == (pages - 1, keys[(pages - 1) * size :])
    assert model.ref_page(page=pages + 5, size=size).page == pages - 1
    assert model.ref_page(page=-3, size=size).page == 0

    model.select_ref(keys[-1])  # selected, but not among what a search matches
    node = keys[0][0]
    matched = [k for k in keys if node in model.ref_label(model.snapshot.refs[k]).lower()]
    assert keys[-1] not in matched and len(matched) > size
    found = model.ref_page(node, size=size)
    assert (found.page, found.keys, found.matched, found.query) == (
        0,
        matched[:size],
        len(matched),
        node,
    )
    assert found.pages == -(-len(matched) // size)

    model.select_frame(0)  # nothing published yet
    empty = model.ref_page(size=size)
    assert (empty.keys, empty.total, empty.page, empty.pages) == ([], 0, 0, 1)
    assert model.ref_page("anything", size=size).pages == 1


def test_every_frame_of_a_looping_run_shows_its_own_iterations_checkpoint(
    db: st.Database,
) -> None:
    """A node that runs in loop iterations has a newest checkpoint per iteration: a frame of
    ``plan[3]`` shows ``plan[3]``'s, not ``plan``'s first iteration's, in any order."""
    from tests.widgets.test_model_sequences import History, assert_shows

    run_id = large_run(db, 150)
    history = History(db, run_id)
    assert any((f.iteration or 0) > 0 for f in history.frames if f.kind == "node_state")
    model = DebuggerModel(db, run_id)
    order = list(range(history.last, -1, -1))
    random.Random(11).shuffle(order)
    for n in order:
        model.select_frame(n)
        assert_shows(model, history, n)


def test_the_nodes_table_after_any_selections_is_the_one_drawn_afresh(db: st.Database) -> None:
    """The inspector keeps the rows it drew while their node and attempts are the same
    objects: after selections in any order (a flaky run's retries and failures, a looping
    run's iterations, more rows than are shown), every frame's table is the one an inspector
    that never drew anything shows."""
    from smithers_tt.widgets import _inspector
    from smithers_tt.widgets._inspector import Inspector

    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    for run_id, shown in ((db.run(wf, {"topic": "bee"}).id, 200), (large_run(db, 400), 7)):
        dbg = Debugger(db, run_id, live=False)
        order = list(range(dbg.model.last_frame + 1))
        random.Random(len(order)).shuffle(order)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_inspector, "NODE_ROWS", shown)
            for n in order[:60]:
                dbg.select_frame(n)
                assert dbg.inspector.nodes.value == Inspector(dbg.model).nodes.value, n
            dbg.select_frame(dbg.model.last_frame)
            if shown < 200:  # the long run has more rows than it shows, and says so
                assert (
                    "older loop turns (each node's newest are shown)" in dbg.inspector.nodes.value
                )
        dbg.close()
