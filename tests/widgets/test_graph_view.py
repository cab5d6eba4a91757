"""The workflow graph beside the timeline: laid out from the stored graph, coloured by each
task's state at the selected frame, following every selection, and selecting a task's frame
when the task is clicked."""

from __future__ import annotations

import re

import smithers_tt as st
from smithers_tt import GenerateRequest, Loop, Workflow
from smithers_tt.demo import demo_workflow
from smithers_tt.testing import NODES, large_run
from smithers_tt.widgets import Debugger
from smithers_tt.widgets._graph import MAX_TASKS, layout


def _diamond() -> Workflow:
    async def work(request: GenerateRequest) -> dict:
        return {"n": request.iteration}

    wf = Workflow("diamond")
    wf.task("plan", agent=work)
    wf.task("left", agent=work, needs=["plan"])
    wf.task("right", agent=work, needs=["plan"], loop=Loop(max=3))
    wf.task("join", agent=work, needs=["left", "right"])
    return wf


def test_tasks_are_laid_out_in_layers_after_what_they_need() -> None:
    drawn = layout({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": []})
    x = {n["id"]: n["x"] for n in drawn["nodes"]}
    y = {n["id"]: n["y"] for n in drawn["nodes"]}
    assert x["a"] == x["e"] < x["b"] == x["c"] < x["d"]
    assert y["b"] != y["c"] and y["a"] != y["e"]
    assert sorted((e["from"], e["to"]) for e in drawn["edges"]) == [
        ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"),
    ]  # fmt: skip
    for n in drawn["nodes"]:  # inside the picture
        assert n["x"] + drawn["w"] <= drawn["width"] and n["y"] + drawn["h"] <= drawn["height"]


def test_the_graph_follows_every_frame_with_each_tasks_state(db: st.Database) -> None:
    wf = _diamond()
    run = db.run(wf)
    d = Debugger(db, run.id, wf, live=False)
    g = d.graph
    assert run.status == "finished"
    assert all(e["fork"] is False for e in g.graph["edges"])
    for n in range(d.model.last_frame + 1):
        d.select_frame(n)
        snap = db.snapshot(run.id, n)
        newest: dict[str, tuple[int, str]] = {}
        for (node, iteration), view in snap.nodes.items():
            if node not in newest or iteration > newest[node][0]:
                newest[node] = (iteration, view.state)
        assert g.states == {k: v for k, (_, v) in newest.items()}, n
        assert g.current == ([d.model.frame().node_id] if d.model.frame().node_id else []), n


def test_clicking_a_task_selects_its_newest_frame_at_or_before_the_selected_one(
    db: st.Database,
) -> None:
    wf = _diamond()
    run = db.run(wf)
    d = Debugger(db, run.id, wf, live=False)
    frames = run.frames()
    d.select_frame(len(frames) - 1)
    d.graph.clicked = ["right", 1]  # what the view sends on a click
    newest_right = max(f.frame_no for f in frames if f.node_id == "right")
    assert d.model.frame_no == newest_right
    assert d.graph.current == ["right"]
    first_join = min(f.frame_no for f in frames if f.node_id == "join")
    d.select_frame(1)  # before join ran: its first frame after
    d.graph.clicked = ["join", 2]
    assert d.model.frame_no == first_join
    assert d.scrubber.slider.value == first_join  # the rest of the debugger follows


def test_the_graph_shows_the_run_switched_to(db: st.Database) -> None:
    demo, _ = demo_workflow()
    first = db.run(_diamond())
    other = db.run(demo, {"topic": "bees"})
    d = Debugger(db, first.id, demo, live=False)
    d.model.switch_run(other.id)
    assert {n["id"] for n in d.graph.graph["nodes"]} == set(demo.tasks)
    edges = {(e["from"], e["to"]): e["fork"] for e in d.graph.graph["edges"]}
    assert edges == {("research", "write"): False, ("write", "review"): True}  # a task fork
    assert d.graph.current == [] and d.model.frame().node_id is None  # the run's end


def _top_iterations(snap: st.Snapshot) -> dict[str, int]:
    """Each task's highest iteration with a row (a node row or an attempt) in ``snap``."""
    top: dict[str, int] = {}
    for node, iteration in [*snap.nodes, *(key[:2] for key in snap.attempts)]:
        top[node] = max(top.get(node, 0), iteration)
    return top


def _newest_states(snap: st.Snapshot) -> dict[str, str]:
    """Each task's state in ``snap``: its node row of the highest iteration."""
    newest: dict[str, tuple[int, str]] = {}
    for (node, iteration), view in snap.nodes.items():
        if node not in newest or iteration > newest[node][0]:
            newest[node] = (iteration, view.state)
    return {k: v for k, (_, v) in newest.items()}


def _newest_rows(d: Debugger) -> dict[str, int]:
    """The inspector's nodes table as a person reads it: each task's highest iteration shown
    (``plan[41]``, or ``plan`` for iteration 0)."""
    shown: dict[str, int] = {}
    for label in re.findall(r"<tr><td>([^<]+)</td>", d.inspector.nodes.value):
        node, _, iteration = label.partition("[")
        shown[node] = max(shown.get(node, 0), int(iteration.rstrip("]") or 0))
    return shown


def test_a_long_loops_tasks_keep_their_colours_and_the_table_its_frame(db: st.Database) -> None:
    """A run whose loop made hundreds of (task, iteration) rows, more than the nodes table
    shows: every task is coloured by its newest iteration at the frame shown (the tasks after
    the first ones by name were drawn as pending), the inspector's nodes table shows where
    every task stands (it showed the first task's first 200 iterations), and the frame table
    opens on the page of the frame shown (it opened on the first page while the newest frame
    was selected)."""
    run_id = large_run(db, 20_000)
    snap = db.snapshot(run_id)
    assert len(snap.nodes) > 8 * MAX_TASKS  # rows enough that two tasks fell out of the read
    d = Debugger(db, run_id, live=False)
    newest = d.model.last_frame
    assert d.model.frame_no == newest
    assert d.graph.states == _newest_states(snap) == dict.fromkeys(NODES, "finished")
    assert _newest_rows(d) == _top_iterations(snap)
    assert "older loop turns" in d.inspector.nodes.value
    # the newest turn on top, a turn's tasks in the graph's order
    rows = [
        (node, int(it.rstrip("]")))
        for node, _, it in (
            label.partition("[")
            for label in re.findall(r"<tr><td>([^<]+)</td>", d.inspector.nodes.value)[:12]
        )
    ]
    assert rows == sorted(rows, key=lambda r: (-r[1], NODES.index(r[0])))
    assert rows[0][1] == max(_top_iterations(snap).values()) > rows[-1][1]
    table = d.frame_table
    assert table.rows.value == newest and newest in [v for _, v in table.rows.options]
    assert table.count.value.endswith(f"page {table.pages}/{table.pages}")
    for n in (17_003, 9_001):
        d.select_frame(n)
        at = db.snapshot(run_id, n)
        assert d.graph.states == _newest_states(at), n
        assert _newest_rows(d) == _top_iterations(at), n
        assert table.rows.value == n, n
