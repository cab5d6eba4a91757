"""The frame table reads from the database only what it shows. Its filters' values and the
frames matching node, kind and purpose come from SQL, and are exactly what a walk over the
model's visible frames gives (the table's answers before it stopped walking them): on runs
with failed attempts, loops, resets, a rewound and resumed history, a fork whose base frames
(below 0) hold values its visible frames do not, and a live run that gets frames after the
table was built; on both backends, and both ways the dialects find where values first appear.
Building the table and filtering it never touches the model's history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt.demo import demo_workflow
from smithers_tt.store.for_widgets import choices_of_bins, frame_bins, frame_choices, frames_at
from smithers_tt.testing import large_run
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets._frametable import ANY, PAGE, FrameSearch, FrameTable, row_label
from smithers_tt.widgets._timeline_figure import build_timeline

NOTHING = "no-such-value"
"""A filter value no frame has."""

Filters = tuple[str | None, str | None, str | None]


# --- what the table showed when it walked the frames ---------------------------------------


def walked_choices(model: DebuggerModel) -> dict[str, list[str]]:
    """The filters' values in first-seen order over the visible frames."""
    nodes: dict[str, None] = {}
    kinds: dict[str, None] = {}
    purposes: dict[str, None] = {}
    for f in model.visible_rows:
        kinds.setdefault(f.kind, None)
        if f.node_id is not None:
            nodes.setdefault(f.node_id, None)
        if f.purpose is not None:
            purposes.setdefault(f.purpose, None)
    return {"node": list(nodes), "kind": list(kinds), "purpose": list(purposes)}


def walked_frames(
    model: DebuggerModel, node: str | None, kind: str | None, purpose: str | None
) -> list[int]:
    """The visible frames with the node, kind and purpose given (None: any), in order."""
    return [
        f.frame_no
        for f in model.visible_rows
        if (node is None or f.node_id == node)
        and (kind is None or f.kind == kind)
        and (purpose is None or f.purpose == purpose)
    ]


def every_filter(choices: dict[str, list[str]]) -> list[Filters]:
    """Every combination of node, kind and purpose: any, each value, and one nothing has."""
    return [
        (node, kind, purpose)
        for node in (None, *choices["node"], NOTHING)
        for kind in (None, *choices["kind"], NOTHING)
        for purpose in (None, *choices["purpose"], NOTHING)
    ]


def assert_answers_as_walked(search: FrameSearch, model: DebuggerModel) -> None:
    choices = walked_choices(model)
    assert search.choices() == choices
    for node, kind, purpose in every_filter(choices):
        found = search.find(node=node, kind=kind, purpose=purpose)
        assert found.frames == walked_frames(model, node, kind, purpose), (node, kind, purpose)
        assert found.complete


# --- runs ----------------------------------------------------------------------------------


def _failed_attempts(db: st.Database) -> str:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    return db.run(wf, {"topic": "bee"}).id


def _fork(db: st.Database) -> str:
    """A replayed fork: its base frames hold research and write, which it never runs."""
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    parent = db.run(wf, {"topic": "bee"}).id
    return db.replay(parent, 17, wf, reset=["review"]).id


def _reset(db: st.Database) -> str:
    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id
    db.reset(run_id, "write", dependents=True, force=True)
    db.resume(run_id, wf)
    return run_id


def _rewound(db: st.Database) -> str:
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    db.rewind(run_id, 12, confirm=True, force=True)
    db.resume(run_id, demo_workflow(invalid_first_draft=True)[0])
    return run_id


def _loops(db: st.Database) -> str:
    return large_run(db, 1_500)  # loop iterations, failed first attempts, over a block


RUNS: dict[str, Callable[[st.Database], str]] = {
    "failed_attempts": _failed_attempts,
    "fork": _fork,
    "reset": _reset,
    "rewound": _rewound,
    "loops": _loops,
}


@pytest.fixture(params=[None, 1, 5, "dialect"], ids=["grouped", "block1", "block5", "dialect"])
def choice_block(request: pytest.FixtureRequest, db: st.Database, monkeypatch) -> Any:
    """Each way of finding where values first appear, on each backend."""
    backend = db.store.engine.backend
    if request.param != "dialect":
        monkeypatch.setattr(backend, "choice_block", request.param)
    return backend.choice_block


@pytest.mark.parametrize("make", list(RUNS.values()), ids=list(RUNS))
def test_sql_answers_are_those_of_a_walk_over_the_visible_frames(
    db: st.Database, make: Callable[[st.Database], str]
) -> None:
    model = DebuggerModel(db, make(db))
    assert_answers_as_walked(FrameSearch(model), model)


def test_each_way_of_finding_first_frames_gives_the_walks_order(
    db: st.Database, choice_block: Any
) -> None:
    for make in RUNS.values():
        model = DebuggerModel(db, make(db))
        assert FrameSearch(model).choices() == walked_choices(model), make.__name__


def test_the_timelines_counts_give_the_walks_choices(db: st.Database, monkeypatch) -> None:
    """The choices of the counts a binned timeline makes (every visible frame, per bin)
    are the walk's, for whole runs and for the frames up to any point; a table built after
    such a figure takes them and groups no frame again, and a figure walked over the frames
    leaves none behind."""
    import smithers_tt.widgets._frametable as table

    grouped = table.frame_choices
    counted_runs = 0
    for make in RUNS.values():
        run_id = make(db)
        walking = DebuggerModel(db, run_id)
        walked = walked_choices(walking)  # reads the history
        last = walking.last_frame
        for upto in sorted({0, 3, last // 2, last}):
            for by_iteration in (True, False):
                for width in (1, 4, 250):
                    bins = frame_bins(
                        db.engine, run_id, upto=upto, width=width, by_iteration=by_iteration
                    )
                    counted = choices_of_bins(bins)
                    assert counted == frame_choices(db.engine, run_id, upto=upto), make.__name__
        build_timeline(walking, aggregate_at=0)  # the history is read: the walk, no counts
        assert walking.counted_choices is None
        model = DebuggerModel(db, run_id)
        build_timeline(model, aggregate_at=0)
        if model.history_loaded:  # a fork reads its history at once: walked, no counts
            assert model.counted_choices is None
            continue
        counted_runs += 1
        assert model.counted_choices is not None
        assert model.counted_choices[:2] == (run_id, last)
        monkeypatch.setattr(table, "frame_choices", _refuse)
        assert FrameSearch(model).choices() == walked, make.__name__
        monkeypatch.setattr(table, "frame_choices", grouped)
    assert counted_runs >= 4


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the table grouped the frames again")


def test_a_forks_base_frames_are_not_among_its_choices_or_matches(db: st.Database) -> None:
    model = DebuggerModel(db, _fork(db))
    base = [f for f in model.frames.rows if f.frame_no < 0]
    assert base  # the fixture is what it says: values only its base frames have
    choices = FrameSearch(model).choices()
    assert "research" not in choices["node"] and "progress" not in choices["purpose"]
    assert {f.node_id for f in base} >= {"research", "write"}
    assert FrameSearch(model).find(node="research").frames == []
    assert FrameSearch(model).find(kind="checkpoint").frames == [4]


# --- a live run --------------------------------------------------------------------------


def test_a_live_run_keeps_the_answers_of_a_walk_as_frames_arrive(
    db: st.Database, choice_block: Any
) -> None:
    record, fence = db.store.create_run("live", None)
    key = db.store.start_attempt(fence, "agent", node_state="running").key
    db.store.publish(fence, key, AgentCheckpoint("x.v1", 1, {"n": 1}))
    model = DebuggerModel(db, record.run_id)
    table = FrameTable(model)
    search = table.search
    table.kind.value = "checkpoint"  # kept by the table's search, extended on refresh
    assert table.matches.frames == [3]
    assert_answers_as_walked(FrameSearch(model), model)
    kept = FrameSearch(model)  # a few filters kept (all of them fit), extended later
    few: list[Filters] = [("agent", None, None), (None, "checkpoint", "progress")]
    few += [(None, None, "turn"), ("second", "checkpoint", None), (None, "node_state", None)]
    for node, kind, purpose in few:
        assert kept.find(node=node, kind=kind, purpose=purpose).frames == walked_frames(
            model, node, kind, purpose
        )

    # The first new frame alone has purpose "turn"; a new node, and new kinds, follow.
    db.store.publish(fence, key, AgentCheckpoint("x.v1", 1, {"n": 2}), purpose="turn")
    db.store.finish_attempt(fence, key, "finished", node_state="finished", output={"ok": 1})
    other = db.store.start_attempt(fence, "second", node_state="running").key
    for n in range(3):
        db.store.publish(fence, other, AgentCheckpoint("x.v1", 1, {"n": n}))
    # Written, not yet loaded: the answers are for the frames the model holds.
    assert_answers_as_walked(FrameSearch(model), model)
    assert table.matches.frames == [3]

    assert model.refresh()  # "frames": the table refilters, the searches extend what they kept
    assert table.search is search
    checkpoints = walked_frames(model, None, "checkpoint", None)
    assert table.kind.value == "checkpoint" and table.matches.frames == checkpoints
    assert [n for _, n in table.rows.options] == checkpoints
    assert table.count.value.startswith(f"{len(checkpoints)} of {model.last_frame + 1} frames")
    assert "second" in table.node.options and "turn" in table.purpose.options
    for node, kind, purpose in few:
        assert kept.find(node=node, kind=kind, purpose=purpose).frames == walked_frames(
            model, node, kind, purpose
        )
    assert_answers_as_walked(search, model)
    assert_answers_as_walked(FrameSearch(model), model)

    db.rewind(record.run_id, 4, confirm=True, force=True)  # history rewritten: "run"
    assert model.refresh()
    assert table.search is not search
    assert_answers_as_walked(table.search, model)
    assert table.matches.frames == walked_frames(model, None, "checkpoint", None)
    assert_answers_as_walked(search, model)  # fewer frames than it kept: it reads them again


def test_a_search_of_a_model_that_shows_another_run_reads_that_run(db: st.Database) -> None:
    first, second = _failed_attempts(db), _loops(db)
    model = DebuggerModel(db, first)
    search = FrameSearch(model)
    assert_answers_as_walked(search, model)
    assert search.find(kind="checkpoint").frames == walked_frames(model, None, "checkpoint", None)
    model.switch_run(second)  # more frames than the first: kept answers are the first run's
    assert search.find(kind="checkpoint").frames == walked_frames(model, None, "checkpoint", None)
    assert_answers_as_walked(search, model)


# --- building and filtering read only what is shown ----------------------------------------


class Unread:
    """A debugger model whose history the table must not read: ``frames``, ``visible_rows``,
    ``visible_frames`` and ``frame(n)`` raise; everything else is the model's."""

    HISTORY = ("frames", "visible_rows", "visible_frames", "frame")

    def __init__(self, model: DebuggerModel) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        if name in Unread.HISTORY:
            raise AssertionError(f"the frame table read model.{name}")
        if name == "history_loaded":  # the test reads it to compare: the table may not
            return False
        return getattr(self._model, name)


def assert_shows(table: FrameTable, model: DebuggerModel, filters: Filters) -> None:
    """The page a person sees: each row's label, and the count, from the model's frames."""
    frames = walked_frames(model, *filters)
    pages = max(1, -(-len(frames) // PAGE))
    page = frames[table.page * PAGE : (table.page + 1) * PAGE]
    labels = [row_label(model.frame(n)) for n in page]
    assert list(table.rows.options) == list(zip(labels, page, strict=True))
    assert table.count.value == (
        f"{len(frames)} of {model.last_frame + 1} frames · page {table.page + 1}/{pages}"
    )


def test_building_and_filtering_the_table_reads_no_history(db: st.Database) -> None:
    model = DebuggerModel(db, large_run(db, 1_234))
    table = FrameTable(Unread(model))  # type: ignore[arg-type]
    # it opens on the page of the frame shown, the newest: the last
    assert table.page == table.pages - 1 > 0 and table.rows.value == model.frame_no
    assert_shows(table, model, (None, None, None))
    table.turn(-1)
    assert_shows(table, model, (None, None, None))
    choices = walked_choices(model)
    assert list(table.node.options) == [ANY, *choices["node"]]
    assert list(table.kind.options) == [ANY, *choices["kind"]]
    assert list(table.purpose.options) == [ANY, *choices["purpose"]]

    table.kind.value = "checkpoint"
    assert_shows(table, model, (None, "checkpoint", None))
    table.node.value = "write"
    table.purpose.value = "turn"
    assert_shows(table, model, ("write", "checkpoint", "turn"))
    table.kind.value = "attempt_started"  # nothing: no page to show
    assert table.rows.options == ()
    assert_shows(table, model, ("write", "attempt_started", "turn"))
    table.purpose.value = ANY
    table.turn(1)
    assert_shows(table, model, ("write", "attempt_started", None))

    table.node.value = ANY
    table.kind.value = "checkpoint"
    checkpoints = walked_frames(model, None, "checkpoint", None)
    model.select_frame(checkpoints[450])  # the table follows to the selected frame's page
    assert table.page == 450 // PAGE and table.rows.value == checkpoints[450]
    assert_shows(table, model, (None, "checkpoint", None))
    table.rows.value = checkpoints[451]  # picking a row selects its frame
    assert model.frame_no == checkpoints[451]


def test_a_page_of_rows_is_read_as_the_model_holds_them(db: st.Database) -> None:
    model = DebuggerModel(db, _fork(db))
    engine, run_id = db.store.engine, model.run_id
    wanted = [*range(-3, 3), 5, model.last_frame, model.last_frame + 7]
    rows = frames_at(engine, run_id, reversed(wanted))
    assert rows == [f for f in model.frames.rows if f.frame_no in wanted]
    assert frames_at(engine, run_id, []) == []
    assert frames_at(engine, run_id, range(-12, 600)) == model.frames.rows  # over IN chunks
