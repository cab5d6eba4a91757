"""The workflow's graph beside the timeline: its tasks and edges, coloured by their state at
the selected frame, with the task the frame touches outlined; click a task to select its
newest frame at or before the selected one.

The graph is the run's stored one (each task and the tasks it needs, as defined when the run
was created); with the workflow given to the debugger, an edge that seeds a task from
another's checkpoint (``fork=``) is drawn dashed. For a LangGraph thread opened with its
compiled graph (``langgraph_view.debug(saver, thread_id, graph=compiled)``), the lens gives
that graph instead (``compiled.get_graph()``: its nodes, ``__start__`` and ``__end__``
included, and edges, conditional ones dotted) and each node's state at the selected frame's
checkpoint. Tasks are laid out in layers (a task one layer right of the furthest task it
needs, an edge that closes a loop left out of that count), ordered within a layer by where
their needs are.

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
from smithers_tt.widgets._layers import layers
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
  const current = model.get("current") || [];
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
    else if (e.conditional) path.setAttribute("stroke-dasharray", "1.5 3");
    path.classList.add(e.fork ? "stt-graph-fork"
                       : e.conditional ? "stt-graph-conditional" : "stt-graph-edge");
    svg.appendChild(path);
  }
  for (const n of g.nodes) {
    const state = states[n.id] || "pending";
    const group = make("g", {transform: `translate(${n.x},${n.y})`, cursor: "pointer"});
    group.classList.add("stt-graph-node");
    group.dataset.node = n.id;
    group.dataset.state = state;
    const touched = current.includes(n.id);
    if (touched) group.classList.add("stt-graph-current");
    const title = make("title", {});
    title.textContent = `${n.id}: ${state}`;
    group.appendChild(title);
    group.appendChild(make("rect", {width: g.w, height: g.h, rx: 6,
      fill: colours[state] || "#999", "fill-opacity": 0.85,
      stroke: touched ? "var(--jp-brand-color1, #1976d2)" : "none",
      "stroke-width": touched ? 3 : 0}));
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
    """Positions of a graph's tasks in layers, left to right, and its edges (those that close
    a loop drawn, but left out of the layers)."""
    rows = layers(graph)
    layer = {task: n for n, row in enumerate(rows) for task in row}
    y_of = {task: i for row in rows for i, task in enumerate(row)}
    nodes = [{"id": t, "x": PAD + layer[t] * LAYER_X, "y": PAD + y_of[t] * ROW_Y} for t in graph]
    pairs = dict.fromkeys((d, t) for t in graph for d in graph[t] if d in graph)
    edges = [{"from": d, "to": t} for d, t in pairs]
    width = PAD * 2 + (max(layer.values(), default=0)) * LAYER_X + NODE_W
    height = PAD * 2 + (max((len(r) for r in rows), default=1) - 1) * ROW_Y + NODE_H
    return {
        "nodes": nodes,
        "edges": edges,
        "width": width,
        "height": height,
        "w": NODE_W,
        "h": NODE_H,
    }


def _needs(shape: dict[str, Any]) -> tuple[dict[str, list[str]], set[tuple[str, str]]]:
    """A lens's graph (nodes, edges) as each node and the nodes it needs, and its
    conditional edges."""
    needs: dict[str, list[str]] = {str(n): [] for n in shape.get("nodes", ())}
    conditional = set()
    for e in shape.get("edges", ()):
        if e["to"] in needs:
            needs[e["to"]].append(e["from"])
        if e.get("conditional"):
            conditional.add((e["from"], e["to"]))
    return needs, conditional


class GraphView(anywidget.AnyWidget):
    """The graph part of the debugger (see the module's docstring)."""

    _esm = _ESM
    graph = traitlets.Dict().tag(sync=True)
    """Tasks with positions, edges (``fork`` when a task is seeded from another), size."""
    states = traitlets.Dict().tag(sync=True)
    """Each task's state at the selected frame (of its newest iteration)."""
    current = traitlets.List(traitlets.Unicode()).tag(sync=True)
    """The tasks the selected frame touches: its own node, if any (for a LangGraph thread,
    the nodes its checkpoint's super-step ran)."""
    colours = traitlets.Dict(STATE_COLOURS).tag(sync=True)
    clicked = traitlets.List().tag(sync=True)
    """[task, a stamp]: set by the view when a task is clicked."""

    def __init__(self, model: DebuggerModel, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model
        self._from_lens = False
        model.on("run", self.rebuild)
        for event in ("frame", "frames"):
            model.on(event, self.update)
        self.observe(self._clicked, names="clicked")
        self.rebuild()

    def rebuild(self) -> None:
        """Lay out the shown run's graph (the lens's, when it knows one), then colour it for
        the selected frame."""
        shape = self.model.lens_graph()
        self._from_lens = shape is not None
        forks: set[tuple[str, str]] = set()
        conditional: set[tuple[str, str]] = set()
        if shape is not None:
            stored, conditional = _needs(shape)
        else:
            stored = self.model.record.graph or {}
            wf = self.model.workflow
            if wf is not None:
                forks = {(t.fork, t.id) for t in wf.tasks.values() if t.fork}
        if not stored:
            self.graph = {"note": "this run stores no workflow graph"}
        elif len(stored) > MAX_TASKS:
            self.graph = {"note": f"{len(stored)} tasks: too many to draw (at most {MAX_TASKS})"}
        else:
            drawn = layout(stored)
            for edge in drawn["edges"]:
                pair = (edge["from"], edge["to"])
                edge["fork"], edge["conditional"] = pair in forks, pair in conditional
            self.graph = drawn
        self.layout.display = None if stored else "none"
        self.update()

    def update(self) -> None:
        """Colour the tasks by their state at the selected frame; outline its task."""
        m = self.model
        if self._from_lens:
            found = m.lens_graph_state() or {}
            self.states = dict(found.get("states") or {})
            self.current = list(found.get("current") or [])
            return
        self.states = m.node_states()
        node = m.frame().node_id
        self.current = [node] if node else []

    def _clicked(self, change: dict[str, Any]) -> None:
        if change["new"]:
            self.select_task(change["new"][0])

    def select_task(self, task: str) -> None:
        """Select the newest frame of ``task`` at or before the selected one (if it has none
        there, its first frame after), found in the database: a click reads no history. (A
        LangGraph node has no frames of its own: its thread's frames are checkpoints.)"""
        m = self.model
        if self._from_lens:
            return
        found = node_frame_near(m.db.engine, m.run_id, task, m.frame_no, upto=m.last_frame)
        if found is not None:
            m.select_frame(found)
