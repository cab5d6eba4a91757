"""A lens renames what the debugger shows for a run written in another framework's terms
(a LangGraph thread): whatever a lens says about the frame, node, checkpoint, view, pause and
related runs is what the model gives its views, from the very thing asked about; what it
does not say, or cannot say, is smithers_tt's own display."""

from __future__ import annotations

from typing import Any

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import CheckpointCorrupt
from smithers_tt.store import CheckpointRef, Frame
from smithers_tt.timetravel import Change, Snapshot
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets._words import describe_frame, node_label, ref_label


class Lens:
    """Says everything, from its arguments (so a lens asked about the wrong thing shows)."""

    def frame_title(self, frame: Frame) -> str:
        return f"step {frame.frame_no}: {frame.kind}"

    def node_label(self, node_id: str, iteration: int) -> str:
        return f"graph node {node_id.upper()} / {iteration}"

    def ref_label(self, ref: CheckpointRef) -> str:
        return f"state of {ref.node_id} v{ref.sequence}"

    def view(self, ref: CheckpointRef) -> Any:
        return {"channel": ref.node_id, "seq": ref.sequence}

    def diff(self, a: Snapshot, b: Snapshot) -> list[tuple[str, list[Change]]]:
        return [(f"frames {a.frame_no} to {b.frame_no}", [])]

    def related(self, run_id: str) -> list[tuple[str, str]]:
        return [(f"subgraph of {run_id}", "other-run")]

    def pause(self, run_id: str) -> dict[str, Any]:
        return {"reason": "interrupt", "question": run_id, "hint": "resume it"}


class Silent:
    """A lens that says nothing (every method returns None, or is missing)."""

    def frame_title(self, frame: Frame) -> None:
        return None

    def ref_label(self, ref: CheckpointRef) -> None:
        return None


class Sloppy:
    """A lens that answers with the wrong kind of thing where a dict or list is needed."""

    def pause(self, run_id: str) -> str:
        return f"{run_id} waits"


class Broken:
    """A lens that cannot read what it names (a corrupt checkpoint)."""

    def ref_label(self, ref: CheckpointRef) -> str:
        raise CheckpointCorrupt(f"cannot read {ref.short_hash}")

    def node_label(self, node_id: str, iteration: int) -> str:
        raise CheckpointCorrupt("nope")


def _run(db: st.Database) -> str:
    wf, _ = demo_workflow()
    return db.run(wf, {"topic": "bee"}).id


def test_a_lens_names_each_thing_from_the_thing_asked_about(db: st.Database) -> None:
    run_id = _run(db)
    model = DebuggerModel(db, run_id, lens=Lens())
    frame = model.frame(3)
    assert model.frame_title(frame) == f"step 3: {frame.kind}"
    assert model.frame_title() == f"step {model.frame_no}: {model.frame().kind}"
    assert model.node_label("draft", 2) == "graph node DRAFT / 2"
    ref = next(iter(model.snapshot.refs.values()))
    assert model.ref_label(ref) == f"state of {ref.node_id} v{ref.sequence}"
    assert model.ref_label(ref, 10) == f"state of {ref.node_id} v{ref.sequence}"
    assert model.view(ref) == {"channel": ref.node_id, "seq": ref.sequence}
    assert model.related() == [(f"subgraph of {run_id}", "other-run")]
    assert model.outside_pause() == {"reason": "interrupt", "question": run_id, "hint": "resume it"}
    model.select_frame(4)
    assert [title for title, _ in model.diff().sections] == ["frames 3 to 4"]


def test_without_a_lens_or_when_it_says_nothing_the_debugger_names_things_itself(
    db: st.Database,
) -> None:
    run_id = _run(db)
    for lens in (None, Silent()):
        model = DebuggerModel(db, run_id, lens=lens)
        frame = model.frame(3)
        assert model.frame_title(frame) == describe_frame(frame)
        assert model.node_label("draft", 2) == node_label("draft", 2) == "draft[2]"
        ref = next(iter(model.snapshot.refs.values()))
        assert model.ref_label(ref, 10) == ref_label(ref, 10)
        assert model.view(ref) == model.load(ref).payload == db.store.load(ref).payload
        assert model.related() == []
        assert model.outside_pause() is None


def test_a_pause_a_lens_reports_in_the_wrong_shape_is_no_pause(db: st.Database) -> None:
    model = DebuggerModel(db, _run(db), lens=Sloppy())
    assert model.outside_pause() is None


def test_a_lens_that_cannot_read_a_checkpoint_leaves_the_debuggers_own_name(
    db: st.Database, caplog: Any
) -> None:
    run_id = _run(db)
    model = DebuggerModel(db, run_id, lens=Broken())
    ref = next(iter(model.snapshot.refs.values()))
    assert model.ref_label(ref, 10) == ref_label(ref, 10)
    assert model.node_label("draft", 0) == "draft"
    said = f"the debugger's lens could not name this: cannot read {ref.short_hash}"
    assert said in [r.getMessage() for r in caplog.records]
