"""The workflow's graph beside the timeline: its tasks and edges, coloured by their state at
the selected frame, with the task the frame touches outlined; click a task to select its
newest frame at or before the selected one.

The graph is the run's stored one (each task and the tasks it needs, as defined when the run
was created); with the workflow given to the debugger, an edge that seeds a task from
another's checkpoint (``fork=``) is drawn dashed. Tasks are laid out in layers (a task one
layer right of the furthest task it needs), ordered within a layer by where their needs are.

Drawn by a small anywidget (SVG, no JavaScript build, nothing fetched) whose view draws the
whole state it holds every time any of it changes, so it can never show another frame than
the rest of the debugger. Task names are set as text, never as HTML.
"""

from __future__ import annotations

from typing import Any

import anywidget
import traitlets

from smithers_tt.store.for_widgets import node_frame_near
from smithers_tt.widgets._html import STATE_COLOURS
from smithers_tt.widgets._model import DebuggerModel

LAYER_X, ROW_Y, NODE_W, NODE_H, PAD = 150, 44, 120, 28, 10
MAX_TASKS = 200
"""Largest graph drawn; a larger one says so instead."""

_ESM = """
const NS = "http://www.w3.org/2000/svg";
function make(tag, attrs) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}
function draw(model, el) {
  const g = model.get("graph"), states = model.get("states"), colours = model.get("colours");
  const current = model.get("current");
  el.replaceChildren();
  el.classList.add("stt-graph");
  if (!g.nodes || !g.nodes.length) {
    const note = document.createElement("div");
    note.className = "stt-muted";
    note.textContent = g.note || "";
    el.appendChild(note);
    return;
  }
  const svg = make("svg", {width: g.width, height: g.height, viewBox: `0 0 ${g.width} ${g.height}`,
                           role: "img"});
  svg.style.maxWidth = "100%";
  const defs = make("defs", {});
  const arrow = make("marker", {id: "stt-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
                                markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse"});
  arrow.appendChild(make("path", {d: "M 0 0 L 10 5 L 0 10 z",
                                  fill: "var(--jp-ui-font-color2, #777)"}));
  defs.appendChild(arrow);
  svg.appendChild(defs);
  const at = Object.fromEntries(g.nodes.map(n => [n.id, n]));
  for (const e of g.edges) {
    const a = at[e.from], b = at[e.to];
    const x1 = a.x + g.w, y1 = a.y + g.h / 2, x2 = b.x, y2 = b.y + g.h / 2, mx = (x1 + x2) / 2;
    const path = make("path", {d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`,
      fill: "none", stroke: "var(--jp-ui-font-color2, #777)", "stroke-width": 1.2,
      "marker-end": "url(#stt-arrow)"});
    if (e.fork) path.setAttribute("stroke-dasharray", "4 3");
    path.classList.add(e.fork ? "stt-graph-fork" : "stt-graph-edge");
    svg.appendChild(path);
  }
  for (const n of g.nodes) {
    const state = states[n.id] || "pending";
    const group = make("g", {transform: `translate(${n.x},${n.y})`, cursor: "pointer"});
    group.classList.add("stt-graph-node");
    group.dataset.node = n.id;
    group.dataset.state = state;
    if (n.id === current) group.classList.add("stt-graph-current");
    const title = make("title", {});
    title.textContent = `${n.id}: ${state}`;
    group.appendChild(title);
    group.appendChild(make("rect", {width: g.w, height: g.h, rx: 6,
      fill: colours[state] || "#999", "fill-opacity": 0.85,
      stroke: n.id === current ? "var(--jp-brand-color1, #1976d2)" : "none",
      "stroke-width": n.id === current ? 3 : 0}));
    const label = make("text", {x: g.w / 2, y: g.h / 2 + 4, "text-anchor": "middle",
      "font-size": 12, fill: "#fff"});
    label.textContent = n.id.length > 16 ? n.id.slice(0, 15) + "…" : n.id;
    group.appendChild(label);
    group.addEventListener("click", () => {
      model.set("clicked", [n.id, Date.now()]);
      model.save_changes();
    });
    svg.appendChild(group);
  }
  el.appendChild(svg);
}
export default {
  render({ model, el }) {
    const redraw = () => draw(model, el);
    redraw();
    model.on("change", redraw);
    return () => model.off("change", redraw);
  },
};
"""


def layout(graph: dict[str, list[str]]) -> dict[str, Any]:
    """Positions of a DAG's tasks in layers, left to right, and its edges."""
    layer: dict[str, int] = {}

    def depth(task: str, seen: tuple[str, ...] = ()) -> int:
        if task not in layer:
            needs = [n for n in graph.get(task, ()) if n in graph and n not in seen]
            layer[task] = 1 + max((depth(n, (*seen, task)) for n in needs), default=-1)
        return layer[task]

    for task in graph:
        depth(task)
    rows: dict[int, list[str]] = {}
    for task in graph:  # definition order, then by where their needs sit
        rows.setdefault(layer[task], []).append(task)
    y_of: dict[str, float] = {}
    for n in sorted(rows):
        tasks = rows[n]
        if n:
            tasks.sort(
                key=lambda t: sum(y_of[d] for d in graph[t] if d in y_of) / max(1, len(graph[t]))
            )
        for i, task in enumerate(tasks):
            y_of[task] = i
    nodes = [{"id": t, "x": PAD + layer[t] * LAYER_X, "y": PAD + y_of[t] * ROW_Y} for t in graph]
    edges = [{"from": d, "to": t} for t in graph for d in graph[t] if d in graph]
    width = PAD * 2 + (max(layer.values(), default=0)) * LAYER_X + NODE_W
    height = PAD * 2 + (max((len(r) for r in rows.values()), default=1) - 1) * ROW_Y + NODE_H
    return {
        "nodes": nodes,
        "edges": edges,
        "width": width,
        "height": height,
        "w": NODE_W,
        "h": NODE_H,
    }


class GraphView(anywidget.AnyWidget):
    """The graph part of the debugger (see the module's docstring)."""

    _esm = _ESM
    graph = traitlets.Dict().tag(sync=True)
    """Tasks with positions, edges (``fork`` when a task is seeded from another), size."""
    states = traitlets.Dict().tag(sync=True)
    """Each task's state at the selected frame (of its newest iteration)."""
    current = traitlets.Unicode(None, allow_none=True).tag(sync=True)
    """The task the selected frame touches, if any."""
    colours = traitlets.Dict(STATE_COLOURS).tag(sync=True)
    clicked = traitlets.List().tag(sync=True)
    """[task, a stamp]: set by the view when a task is clicked."""

    def __init__(self, model: DebuggerModel, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model
        model.on("run", self.rebuild)
        for event in ("frame", "frames"):
            model.on(event, self.update)
        self.observe(self._clicked, names="clicked")
        self.rebuild()

    def rebuild(self) -> None:
        """Lay out the shown run's graph, then colour it for the selected frame."""
        stored = self.model.record.graph or {}
        if not stored:
            self.graph = {"note": "this run stores no workflow graph"}
        elif len(stored) > MAX_TASKS:
            self.graph = {"note": f"{len(stored)} tasks: too many to draw (at most {MAX_TASKS})"}
        else:
            drawn = layout(stored)
            wf = self.model.workflow
            forks = (
                {(t.fork, t.id) for t in wf.tasks.values() if t.fork} if wf is not None else set()
            )
            for edge in drawn["edges"]:
                edge["fork"] = (edge["from"], edge["to"]) in forks
            self.graph = drawn
        self.layout.display = None if stored else "none"
        self.update()

    def update(self) -> None:
        """Colour the tasks by their state at the selected frame; outline its task."""
        m = self.model
        table = m.node_table(limit=MAX_TASKS * 4)
        states: dict[str, tuple[int, str]] = {}
        for (node, iteration), view in table.nodes.items():
            if node not in states or iteration >= states[node][0]:
                states[node] = (iteration, view.state)
        self.states = {node: state for node, (_, state) in states.items()}
        self.current = m.frame().node_id

    def _clicked(self, change: dict[str, Any]) -> None:
        if change["new"]:
            self.select_task(change["new"][0])

    def select_task(self, task: str) -> None:
        """Select the newest frame of ``task`` at or before the selected one (if it has none
        there, its first frame after), found in the database: a click reads no history."""
        m = self.model
        found = node_frame_near(m.db.engine, m.run_id, task, m.frame_no, upto=m.last_frame)
        if found is not None:
            m.select_frame(found)
