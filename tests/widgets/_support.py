"""Helpers of the widget tests: a hostile workflow, walkers over a widget tree, and a
recorder of what a debugger model announces."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import ipywidgets as W
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt import AgentCheckpoint, CheckpointCapability, CheckpointFormat, Retry, Workflow

HOSTILE = '<img src=x onerror="window.__pwned=1">'
SCRIPT = "<script>window.__pwned=2</script>"
HOSTILE_NODE = "<img src=x onerror=alert(3)>"
HOSTILE_CODEC = "x<svg onload=alert(4)>"
HOSTILE_RUN = "<b onmouseover=alert(5)>run</b>"


class HostileAgent:
    """Publishes checkpoints full of markup, fails its first attempt with markup in the error,
    and returns markup as its output."""

    id = "<i onclick=alert(6)>agent</i>"
    checkpoint_formats = [CheckpointFormat(HOSTILE_CODEC, [1])]
    checkpoint_capabilities = [CheckpointCapability(HOSTILE_CODEC, [1], ["resume"])]

    async def generate(self, request: st.GenerateRequest) -> Any:
        state = (
            request.resume_checkpoint.payload
            if request.resume_checkpoint is not None
            else {"notes": [], HOSTILE: SCRIPT, "long": "word " * 60}
        )
        state["notes"].append(f"{HOSTILE} step {request.attempt}")
        state["long"] = state["long"] + f" {SCRIPT} "
        await request.on_checkpoint(AgentCheckpoint(HOSTILE_CODEC, 1, state))
        if request.attempt == 1:
            raise RuntimeError(f"the model answered {HOSTILE}")
        return {"answer": HOSTILE, SCRIPT: [HOSTILE]}


def hostile_workflow() -> Workflow:
    wf = Workflow("<i>hostile</i>")
    wf.task(HOSTILE_NODE, agent=HostileAgent(), retry=Retry(count=1))
    wf.task("after", agent=lambda request: {"echo": HOSTILE}, needs=[HOSTILE_NODE])
    return wf


def walk(widget: Any) -> Iterator[Any]:
    """Every widget under ``widget`` (children of boxes, depth first)."""
    yield widget
    for child in getattr(widget, "children", ()) or ():
        yield from walk(child)


def html_values(widget: Any) -> list[str]:
    """The values of every HTML widget under ``widget`` (what the browser parses as HTML)."""
    return [w.value for w in walk(widget) if isinstance(w, W.HTML | W.HTMLMath)]


def figure_texts(figure: Any) -> list[str]:
    """Every string plotly renders with its pseudo-HTML: hover texts, names, ticks, notes."""
    out: list[str] = []
    for trace in figure.data:
        out.append(str(trace.name))
        texts = trace.hovertext if trace.hovertext is not None else ()
        out.extend(str(t) for t in texts if t is not None)
    out.extend(str(t) for t in (figure.layout.yaxis.ticktext or ()))
    out.extend(str(a.text) for a in figure.layout.annotations)
    return out


EVENTS = ("run", "frames", "frame", "ref", "diff", "pending", "message", "tree", "breakpoints")
"""Everything a debugger model announces (see :mod:`smithers_tt.widgets._state`)."""


class Heard:
    """Every announcement of a debugger model, in order, until taken."""

    def __init__(self, model: Any) -> None:
        self.events: list[str] = []
        for event in EVENTS:
            model.on(event, lambda e=event: self.events.append(e))

    def take(self) -> list[str]:
        events, self.events = self.events, []
        return events


def fork_labels(figure: Any) -> dict[str, str]:
    """The timeline's fork labels by the run each names in full on hover, after checking that
    each label names its run by a prefix of 8 or more characters, shorter than the whole id
    (as every widget shows run ids)."""
    layout = figure["layout"] if isinstance(figure, dict) else figure.layout.to_plotly_json()
    labels = {}
    for note in layout.get("annotations", []):
        whole, text = note.get("hovertext"), note["text"]
        if whole is None:
            continue
        shown = text.split(" @ ")[0].rsplit(" ", 1)[-1]
        assert whole.startswith(shown) and 8 <= len(shown) < len(whole), (text, whole)
        labels[whole] = text.replace(shown, "<id>")
    return labels


def audit(db: st.Database, run_id: str) -> list[tuple[str, int | None, dict[str, Any]]]:
    """A run's audit rows, oldest first: operation, frame and details (the reason among them)."""
    with db.engine.sa.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT operation, frame_no, detail_json FROM tt_audit WHERE run_id = :r "
                "ORDER BY created_at_ms, audit_id"
            ),
            {"r": run_id},
        ).all()
    return [(r[0], r[1], json.loads(r[2] or "{}")) for r in rows]


class BulkHistory:
    """A finished run's history written in bulk, frame by frame as a test lists them: its
    frames, the contents its checkpoints publish, then the live rows their fold gives."""

    def __init__(self, db: st.Database, workflow: str, nodes: list[str]) -> None:
        from smithers_tt.store import now_ms

        record, _ = db.store.create_run(workflow, None, graph={name: [] for name in nodes})
        self.db, self.run_id, self.stamp = db, record.run_id, now_ms()
        self.frames: list[Any] = []
        self.contents: dict[str, Any] = {}

    def add(self, kind: str, **fields: Any) -> None:
        """The next frame."""
        from smithers_tt.store import Frame

        number = len(self.frames) + 1
        self.frames.append(Frame(self.run_id, number, kind, created_at_ms=self.stamp, **fields))

    def publish(self, node: str, iteration: int, attempt: int, sequence: int, payload: Any) -> None:
        """A checkpoint frame of ``payload`` (codec ``x.state``, purpose ``progress``)."""
        encoded = AgentCheckpoint("x.state", 1, payload).encode()
        self.contents[encoded.content_hash] = encoded
        self.add("checkpoint", node_id=node, iteration=iteration, attempt=attempt,
                 sequence=sequence, content_hash=encoded.content_hash, codec="x.state",
                 version=1, purpose="progress", data={"size": encoded.size})  # fmt: skip

    def write(self) -> str:
        """End the run (finished) and write it all; its id."""
        from smithers_tt import timetravel as tt
        from smithers_tt.store import Frame, write_history

        self.add("run_finished", state="finished", data={"output": None, "error": None})
        run_id, frames = self.run_id, self.frames
        snap = tt.fold(run_id, [Frame(run_id, 0, "run_created", state="running"), *frames])
        nodes, attempts = tt.live_rows(snap, run_id)
        write_history(self.db.engine, run_id, frames, self.contents.values(), nodes=nodes,
                      attempts=attempts, refs=snap.refs.values(), status="finished",
                      output=None)  # fmt: skip
        return run_id


def plotly_drawn_key() -> str:
    """The state key plotly's installed widget bundle sets when its view has plotted a figure
    (``_sendLayoutDelta`` in ``plotly/package_data/widgetbundle.js``)."""
    import re
    from pathlib import Path

    import plotly

    bundle = Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"
    found = re.search(r'_sendLayoutDelta\(\w+\)\{.{0,400}?\.set\("(\w+)"', bundle.read_text())
    assert found, "plotly's widget bundle no longer reports its draws by _sendLayoutDelta"
    return found.group(1)


def view_drew(figure: Any, edit: int | None = None) -> None:
    """What plotly's view sends once it plotted ``figure``, delivered as the comm delivers it
    (``set_state`` of the key the installed bundle sets: a key the figure has no trait for is
    dropped, as in a real page). ``edit`` is the layout edit id the view saw last: by default
    the figure's last, as a view whose page model heard every message reports it."""
    edit = figure._last_layout_edit_id if edit is None else edit
    figure.set_state({plotly_drawn_key(): {"layout_delta": {}, "layout_edit_id": edit}})
