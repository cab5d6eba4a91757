"""What the debugger's diff compares, as a person picks it: the previous frame or a frame
picked by hand, another run of the fork tree picked by hand or by default (the parent at the
fork frame, else a child at its newest frame), and two attempts of a node.

Every diff is checked against :func:`smithers_tt.timetravel.diff` of the store's own
snapshots (the model trims and caches them; the result must be the same)."""

from __future__ import annotations

import itertools

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt import timetravel as tt
from smithers_tt.demo import demo_workflow
from smithers_tt.demo.agents import NOTES
from smithers_tt.errors import InvalidArgument
from smithers_tt.timetravel import Change
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets._records import DiffResult


def _expected(db: st.Database, a: tt.Snapshot, b: tt.Snapshot) -> list[tuple[str, list[Change]]]:
    """The sections a person reads, from the full snapshots' diff."""
    d = tt.diff(a, b, load=db.store.load)
    out = [("run status", [Change("change", "$", *d.status)])] if d.status else []
    out += [("nodes", d.nodes), ("attempts", d.attempts), ("outputs", d.outputs)]
    return out + [(f"checkpoint {label}", changes) for label, changes in d.checkpoints.items()]


def _assert_diff(
    db: st.Database, result: DiffResult, a: tuple[str, int], b: tuple[str, int]
) -> None:
    shown = db.store.short_run_ids([a[0], b[0]])
    assert (result.a, result.b) == (
        f"run {shown[a[0]]} frame {a[1]}",
        f"run {shown[b[0]]} frame {b[1]}",
    )
    assert result.whole == (f"run {a[0]} frame {a[1]}", f"run {b[0]} frame {b[1]}")
    expected = _expected(db, db.snapshot(*a), db.snapshot(*b))
    assert result.sections == expected
    assert result.empty is not any(changes for _, changes in expected)


def _family(db: st.Database) -> tuple[str, str, str, int, int]:
    """A run with two forks: one with an edited checkpoint, one with a node reset."""
    wf, _ = demo_workflow(flaky=True)
    parent = db.run(wf, {"topic": "bee"}).id
    frames = db.store.frames(parent)
    done = max(f.frame_no for f in frames if f.kind == "node_state" and f.state == "finished"
               and f.node_id == "research")  # fmt: skip
    notes = dict(db.snapshot(parent, done).payload("research"))
    notes["notes"] = ["edited by a person", *notes["notes"][1:]]
    edited = db.fork(parent, done, checkpoints={"research": AgentCheckpoint(NOTES, 1, notes)})
    later = done + 3
    reset = db.fork(parent, later, reset=["write"])
    return parent, edited.id, reset.id, done, later


def test_frames_mode_compares_with_the_previous_frame_or_one_picked_by_hand(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    last = db.store.get_run(run_id).clock
    model = DebuggerModel(db, run_id)
    assert model.diff_mode == "frames"
    for n in (last, 1, 7, last - 1, 12):
        model.select_frame(n)
        result = model.diff()
        _assert_diff(db, result, (run_id, n - 1), (run_id, n))
        assert result.note is None
    model.select_frame(0)  # the run's first: it said "both sides are the same frame"
    result = model.diff()
    assert (result.a, result.b, result.sections) == ("", "", [])
    assert result.note == "frame 0 is the run's first frame: nothing before it to compare with"
    model.set_diff(compare_frame=0)  # frame 0 picked by hand: the same frame, said so
    assert model.diff().note == "both sides are the same frame; pick another frame to compare with"
    model.set_diff(compare_frame=None)

    events: list[str] = []
    model.on("diff", lambda: events.append("diff"))
    model.select_frame(12)
    model.set_diff(compare_frame=3)  # picked by hand: stays while other frames are selected
    assert events == ["diff"]
    _assert_diff(db, model.diff(), (run_id, 3), (run_id, 12))
    model.select_frame(9)
    _assert_diff(db, model.diff(), (run_id, 3), (run_id, 9))
    model.set_diff(compare_frame=last + 50)  # beyond the newest frame: the newest
    _assert_diff(db, model.diff(), (run_id, last), (run_id, 9))
    model.set_diff(compare_frame=-4)
    _assert_diff(db, model.diff(), (run_id, 0), (run_id, 9))
    model.set_diff(compare_frame=9)
    assert "both sides are the same frame" in (model.diff().note or "")
    model.set_diff(compare_frame=None)  # back to the previous frame
    _assert_diff(db, model.diff(), (run_id, 8), (run_id, 9))


def test_runs_mode_compares_the_run_picked_by_hand(db: st.Database) -> None:
    parent, edited, reset, done, later = _family(db)
    clock = {r: db.store.get_run(r).clock for r in (parent, edited, reset)}

    model = DebuggerModel(db, parent)  # a parent: its first fork, at that fork's newest frame
    model.set_diff("runs")
    assert model.default_compare_run() == (edited, clock[edited])
    _assert_diff(db, model.diff(), (edited, clock[edited]), (parent, clock[parent]))
    model.set_diff(compare_run=reset)  # the other fork, picked by hand
    _assert_diff(db, model.diff(), (reset, clock[reset]), (parent, clock[parent]))
    model.select_frame(later)
    _assert_diff(db, model.diff(), (reset, clock[reset]), (parent, later))
    model.set_diff(compare_run_frame=0)  # and a frame of it picked by hand
    _assert_diff(db, model.diff(), (reset, 0), (parent, later))
    model.set_diff(compare_run=None, compare_run_frame=None)
    _assert_diff(db, model.diff(), (edited, clock[edited]), (parent, later))

    model = DebuggerModel(db, edited)  # a fork: its parent at the fork frame
    model.set_diff("runs")
    assert model.default_compare_run() == (parent, done)
    result = model.diff()
    _assert_diff(db, result, (parent, done), (edited, clock[edited]))
    assert any("edited by a person" in str(c.new) for _, cs in result.sections for c in cs)
    model.set_diff(compare_run=reset)  # a sibling picked by hand: at its newest frame
    _assert_diff(db, model.diff(), (reset, clock[reset]), (edited, clock[edited]))
    model.set_diff(compare_run=parent)  # the parent picked by hand: at the fork frame
    _assert_diff(db, model.diff(), (parent, done), (edited, clock[edited]))
    model.set_diff(compare_run_frame=2)
    _assert_diff(db, model.diff(), (parent, 2), (edited, clock[edited]))

    wf, _ = demo_workflow()
    alone = db.run(wf, {"topic": "ant"}).id
    model = DebuggerModel(db, alone)
    model.set_diff("runs")
    assert model.default_compare_run() is None
    result = model.diff()
    assert result.sections == [] and "no parent or forks" in (result.note or "")
    model.set_diff(compare_run=parent)  # any run can still be picked by hand
    _assert_diff(db, model.diff(), (parent, clock[parent]), (alone, model.last_frame))


def test_attempts_mode_compares_two_attempts_of_a_node(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    model = DebuggerModel(db, run_id)
    model.set_diff("attempts")
    snap = db.snapshot(run_id)
    twice = sorted({(k[0], k[1]) for k in snap.attempts if (k[0], k[1], 2) in snap.attempts})
    assert ("research", 0) in twice
    every = sorted({(k[0], k[1]) for k in snap.attempts})
    assert len(every) > len(twice)  # some nodes ran once
    assert model.attempts_with_history() == [
        (n, i, sorted(k[2] for k in snap.attempts if k[:2] == (n, i))) for n, i in every
    ]
    assert model.attempts_with_history(2) == [
        (n, i, sorted(k[2] for k in snap.attempts if k[:2] == (n, i))) for n, i in twice
    ]

    def expected(node: str, first: int, second: int) -> list[tuple[str, list[Change]]]:
        views = [snap.attempts[(node, 0, n)] for n in (first, second)]
        changes = [
            Change("change", f"$.{name}", getattr(views[0], name), getattr(views[1], name))
            for name in ("state", "error", "error_code", "resumed_from")
            if getattr(views[0], name) != getattr(views[1], name)
        ]
        newest = []
        for n in (first, second):
            keys = [k for k in snap.refs if k[:3] == (node, 0, n)]
            newest.append(db.store.load(snap.refs[max(keys)]).to_json() if keys else None)
        return [("attempt", changes), (f"checkpoint {node}", tt.json_diff(*newest))]

    result = model.diff()  # the last frame is the run's: the first node with two attempts
    first_node = twice[0][0]
    assert (result.a, result.b) == (f"{first_node} attempt #1", f"{first_node} attempt #2")
    assert result.sections == expected(first_node, 1, 2)
    for node, _ in twice:  # a frame of a node: that node's attempts
        model.select_frame(max(f.frame_no for f in model.frames if f.node_id == node))
        result = model.diff()
        assert (result.a, result.b) == (f"{node} attempt #1", f"{node} attempt #2")
        assert result.sections == expected(node, 1, 2)
        assert result.sections[0][1], "the first attempt failed, the second did not"
    model.set_diff(attempt_pair=("research", 0, 2, 1))  # picked by hand, either way round
    assert model.diff().sections == expected("research", 2, 1)
    model.set_diff(attempt_pair=("research", 0, 1, 3))
    result = model.diff()
    assert result.sections == [] and "has no attempts #1 and #3" in (result.note or "")
    model.set_diff(attempt_pair=None)
    model.select_frame(3)  # before any second attempt
    result = model.diff()
    assert result.sections == [] and result.note == "no node has two attempts at this frame"


def test_wrong_diff_settings_are_refused_and_change_nothing(db: st.Database) -> None:
    wf, _ = demo_workflow()
    model = DebuggerModel(db, db.run(wf, {"topic": "bee"}).id)
    model.set_diff("runs", compare_run_frame=2)
    with pytest.raises(InvalidArgument, match="frames, runs or attempts, not 'run'"):
        model.set_diff("run")
    with pytest.raises(InvalidArgument, match=r"unknown diff settings \['frame'\]"):
        model.set_diff("frames", frame=3)
    assert (model.diff_mode, model.compare_run_frame) == ("runs", 2)
    model.set_diff(None)  # keeps the mode
    assert model.diff_mode == "runs"


def test_runs_mode_at_a_frame_of_the_shown_run_or_of_a_fork_at_frame_0(db: st.Database) -> None:
    wf, _ = demo_workflow()
    parent = db.run(wf, {"topic": "bee"}).id
    model = DebuggerModel(db, parent)
    model.select_frame(9)
    model.set_diff("runs", compare_run=parent, compare_run_frame=3)  # the shown run itself
    _assert_diff(db, model.diff(), (parent, 3), (parent, 9))
    first = db.fork(parent, 0).id
    model = DebuggerModel(db, first)
    model.set_diff("runs")
    assert model.default_compare_run() == (parent, 0)
    _assert_diff(db, model.diff(), (parent, 0), (first, 0))


def test_a_diff_with_nothing_to_compare_says_why_without_sides(db: st.Database) -> None:
    wf, _ = demo_workflow()
    model = DebuggerModel(db, db.run(wf, {"topic": "bee"}).id)
    model.set_diff("runs")
    result = model.diff()
    assert (result.a, result.b, result.sections) == ("", "", [])
    assert result.note == "this run has no parent or forks to compare with"
    model.set_diff("attempts")
    result = model.diff()
    assert (result.a, result.b, result.sections) == ("", "", [])
    assert result.note == "no node has two attempts at this frame"


def _retried(db: st.Database) -> tuple[str, dict[str, int]]:
    """Node a: attempt 1 fails before any checkpoint, 2 fails after one, 3 finishes; then
    node b: attempt 1 fails, 2 finishes. Returns the run and the frame each attempt ended."""
    record, fence = db.store.create_run("retried", None, graph={"a": [], "b": ["a"]})
    ended = {}
    for node, attempts in (("a", 3), ("b", 2)):
        for n in range(1, attempts + 1):
            key = db.store.start_attempt(fence, node, node_state="running").key
            if (node, n) != ("a", 1):
                db.store.publish(fence, key, AgentCheckpoint("x.state", 1, {"try": n}))
            last = n == attempts
            db.store.finish_attempt(
                fence,
                key,
                "finished" if last else "failed",
                error=None if last else f"TimeoutError: try {n}",
                error_code=None if last else "TimeoutError",
                node_state="finished" if last else None,
                output={"done": node} if last else None,
            )
            ended[f"{node}{n}"] = db.store.get_run(record.run_id).clock
    return record.run_id, ended


def test_attempts_mode_follows_the_selected_frames_node_and_its_last_two_attempts(
    db: st.Database,
) -> None:
    run_id, ended = _retried(db)
    model = DebuggerModel(db, run_id)
    model.set_diff("attempts")
    assert model.attempts_with_history() == [("a", 0, [1, 2, 3]), ("b", 0, [1, 2])]
    assert model.attempts_with_history(3) == [("a", 0, [1, 2, 3])]
    snap = db.snapshot(run_id)

    def attempt(n: int, node: str = "a") -> tt.AttemptView:
        return snap.attempts[(node, 0, n)]

    result = model.diff()  # the newest frame is b's: b's two attempts
    assert (result.a, result.b) == ("b attempt #1", "b attempt #2")
    model.select_frame(ended["a3"])  # a frame of a: its last two of three
    assert model.default_attempt_pair() == ("a", 0, 2, 3)
    result = model.diff()
    assert (result.a, result.b) == ("a attempt #2", "a attempt #3")
    assert result.sections[0] == (
        "attempt",
        [
            Change("change", "$.state", "failed", "finished"),
            Change("change", "$.error", attempt(2).error, None),
            Change("change", "$.error_code", "TimeoutError", None),
        ],
    )
    model.select_frame(ended["a2"])  # a's second attempt just ended: #1 and #2
    assert model.default_attempt_pair() == ("a", 0, 1, 2)
    result = model.diff()
    payload = db.store.load(db.snapshot(run_id, ended["a2"]).newest_ref("a")).to_json()
    assert result.sections[1] == ("checkpoint a", tt.json_diff(None, payload))  # #1 has none
    model.set_diff(attempt_pair=("a", 0, 3, 1))  # #3 does not exist yet at this frame
    result = model.diff()
    assert result.sections == [] and result.note == "a has no attempts #3 and #1 at frame " + (
        str(ended["a2"])
    )


CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "Let me look."},
    {"role": "user", "content": "Thanks."},
]


def test_a_chat_node_diffs_by_message_and_other_nodes_do_not(db: st.Database) -> None:
    record, fence = db.store.create_run("chat", None)
    agent = db.store.start_attempt(fence, "agent").key
    notes = db.store.start_attempt(fence, "aaa").key  # sorts before "agent", not a chat
    first = db.store.publish(fence, agent, AgentCheckpoint("chat.v1", 1, {"messages": CHAT[:2]}))
    db.store.publish(fence, notes, AgentCheckpoint("count.v1", 1, {"count": 1}))
    db.store.publish(fence, agent, AgentCheckpoint("chat.v1", 1, {"messages": CHAT}))
    frames = {f.frame_no: f for f in db.store.frames(record.run_id)}
    chat_frames = [n for n, f in frames.items() if f.node_id == "agent" and f.kind == "checkpoint"]
    assert db.snapshot(record.run_id, chat_frames[0]).newest_ref("agent") == first
    model = DebuggerModel(db, record.run_id)

    def marks() -> list[tuple[str, list[tuple[str, str]]]]:
        return [
            (node, [(mark, m.role) for mark, m in messages])
            for node, messages in model.diff().conversations
        ]

    model.select_frame(chat_frames[0])  # the first transcript: every message is new
    assert marks() == [("agent", [("add", "system"), ("add", "user")])]
    model.select_frame(chat_frames[0] + 1)  # only the notes changed: no conversation
    assert marks() == []
    model.select_frame(chat_frames[1])  # two more messages
    assert marks() == [
        ("agent", [("same", "system"), ("same", "user"), ("add", "assistant"), ("add", "user")])
    ]
    model.set_diff(compare_frame=0)  # both nodes changed since frame 0: the chat is listed
    assert marks() == [("agent", [("add", "system"), ("add", "user"), ("add", "assistant"),
                                  ("add", "user")])]  # fmt: skip
    model.select_frame(0)
    model.set_diff(compare_frame=chat_frames[1])  # backwards: every message removed
    assert [mark for mark, _ in marks()[0][1]] == ["remove"] * 4


class PayloadLens:
    """A lens whose diff reads both snapshots' payloads (as integrations' lenses do)."""

    def diff(self, a: tt.Snapshot, b: tt.Snapshot) -> list[tuple[str, list[Change]]]:
        old, new = a.payload("research"), b.payload("research")
        return [("research notes", [Change("change", "$", old["notes"][0], new["notes"][0])])]


def test_a_lens_diff_reads_the_other_runs_payloads(db: st.Database) -> None:
    parent, edited, _, done, _ = _family(db)
    model = DebuggerModel(db, edited, lens=PayloadLens())
    model.set_diff("runs")
    result = model.diff()
    first = db.snapshot(parent, done).payload("research")["notes"][0]
    assert result.sections == [
        ("research notes", [Change("change", "$", first, "edited by a person")])
    ]
    shown = db.store.short_run_ids([parent, edited])
    assert (result.a, result.b) == (
        f"run {shown[parent]} frame {done}",
        f"run {shown[edited]} frame 0",
    )


def test_scrubbing_a_run_reset_in_place_diffs_like_the_full_snapshots(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model follows each node's newest checkpoint through its fold and compares only
    what the frames between two frames changed; a reset in the history (which removes
    refs), keyframes crossed, nearby and far comparisons must all give the diff of the full
    snapshots."""
    import random

    import smithers_tt.widgets._scrub as scrub

    monkeypatch.setattr(scrub, "SNAPSHOT_CACHE", 2)  # snapshots rebuilt, not cached
    monkeypatch.setattr(scrub, "MARK_EVERY", 7)  # many copies of the rows in a short run
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    db.reset(run_id, "research", dependents=True)
    db.resume(run_id, wf)
    frames = db.store.frames(run_id)
    assert any(f.kind == "reset" for f in frames)
    last = frames[-1].frame_no
    model = DebuggerModel(db, run_id)
    rng = random.Random(16)
    for _ in range(40):
        n = rng.randrange(1, last + 1)
        far = rng.random() < 0.4
        compare = rng.randrange(0, last + 1) if far else None
        model.set_diff("frames", compare_frame=compare)
        model.select_frame(n)
        other = compare if compare is not None else n - 1
        _assert_diff(db, model.diff(), (run_id, other), (run_id, n))
        ref = model.ref
        key = model.frame_ref_key(n)
        assert (ref is None) == (key is None)
        frame = model.frame(n)
        if frame.node_id is not None and frame.kind != "checkpoint":
            expected = db.snapshot(run_id, n).newest_ref(frame.node_id, frame.iteration or 0)
            if expected is not None:
                assert key == (expected.node_id, expected.iteration, expected.attempt,
                               expected.sequence)  # fmt: skip
    # Closing the debugger lets go of what scrubbing kept; the model folds again after.
    model.drop_caches()
    for n in (last, last // 2):
        snap = model.snapshot_at(n)
        assert (snap.nodes, snap.attempts, snap.refs) == (
            (s := db.snapshot(run_id, n)).nodes,
            s.attempts,
            s.refs,
        )


def test_frame_0_of_a_fork_compares_with_its_parents_frame_at_the_fork_point(
    db: st.Database,
) -> None:
    parent, edited, reset, done, later = _family(db)
    for child, at in ((edited, done), (reset, later)):
        model = DebuggerModel(db, child)
        model.select_frame(0)
        result = model.diff()
        _assert_diff(db, result, (parent, at), (child, 0))  # never frame 0 with itself
        assert not result.empty  # the edited checkpoint, the node reset
        assert result.note == (
            f"frame 0 of a fork: compared with its parent's frame {at}, where it was forked"
        )
    db.rewind(
        parent, done - 1, confirm=True, force=True
    )  # the parent no longer has either fork frame
    for child in (edited, reset):
        model = DebuggerModel(db, child)
        model.select_frame(0)
        result = model.diff()
        assert (result.a, result.b, result.sections) == ("", "", [])
        assert result.note == "frame 0 of a fork: nothing before it in this run"
        model.set_diff(compare_frame=0)  # frame 0 picked by hand: the same frame, said so
        assert "both sides are the same frame" in (model.diff().note or "")


def test_a_checkpoint_that_stores_its_nodes_content_again_says_so(db: st.Database) -> None:
    """The retried research ends with a turn checkpoint of the same notes as the progress
    checkpoint before it: the diff with the previous frame is empty, and says why (it read
    "no differences" alone); a checkpoint whose content changed shows the change, no note;
    against a frame picked by hand, no such note."""
    wf, _ = demo_workflow(flaky=True)
    run = db.run(wf, {"topic": "bee"})
    frames = run.frames()
    checkpoints = [f for f in frames if f.kind == "checkpoint"]
    again = next(
        f
        for prev, f in itertools.pairwise(checkpoints)
        if (prev.node_id, prev.attempt, prev.content_hash) == (f.node_id, f.attempt, f.content_hash)
        and prev.frame_no == f.frame_no - 1
    )
    changed = next(f for f in checkpoints if f.sequence and f.content_hash != again.content_hash)
    model = DebuggerModel(db, run.id)
    model.select_frame(again.frame_no)
    result = model.diff()
    assert result.empty
    assert result.note == (
        f"no differences: this checkpoint of {again.node_id} stored the same content as its "
        f"node's checkpoint before it ({again.content_hash[:12]})"
    )
    model.select_frame(changed.frame_no)
    result = model.diff()
    assert not result.empty and result.note is None
    model.select_frame(again.frame_no)
    model.set_diff(compare_frame=again.frame_no - 1)
    assert model.diff().note is not None
    model.set_diff(compare_frame=0)
    assert not model.diff().empty
