"""A run's rows keep one order, the graph's, whatever the frame shown and after any action:
the timeline's rows (its y axis, as a person reads it), the inspector's nodes table and the
Actions' list of nodes to reset, for a finished run, the same run rewound before its later
tasks ran, that rewind undone, a fork that has not started, and a run switched to and back;
walked or binned from the database's counts, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from typing import Any

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import Debugger, DebuggerModel
from smithers_tt.widgets._layers import task_order
from smithers_tt.widgets._timeline_figure import build_timeline

GRAPH_ORDER = ["research", "write", "review"]  # not alphabetical: review sorts before write


def _rows(figure: Any) -> list[str]:
    """A timeline's rows, top to bottom, as its y axis labels them."""
    axis = figure["layout"]["yaxis"]
    ticks = sorted(zip(axis["tickvals"], axis["ticktext"], strict=True))  # row 0 on top
    return [text for _, text in ticks]


def _inspected(d: Debugger) -> list[str]:
    """The nodes the inspector's table lists, top to bottom (each row's first cell)."""
    return re.findall(r"<tr><td>([^<]*)</td>", d.inspector.nodes.value)


def _shown(d: Debugger) -> tuple[list[str], list[str]]:
    """The debugger's rows and its Actions' nodes to reset; the rows binned from the
    database's counts (what a long run shows, opened afresh) read the same, and the
    inspector lists the nodes started at the frame shown in the rows' order."""
    rows = _rows(d.timeline.figure)
    binned = build_timeline(DebuggerModel(d.model.db, d.model.run_id), aggregate_at=0)
    assert binned.aggregated and _rows(binned.figure) == rows
    inspected = _inspected(d)  # it listed them by name: research, review, write
    assert inspected == [row for row in rows if row in inspected], (inspected, rows)
    return rows, list(d.actions.reset.options)


def test_rows_keep_the_graphs_order_through_rewind_undo_fork_and_switch(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    d = Debugger(db, run_id, wf, live=False)
    expected = (["run", *GRAPH_ORDER], GRAPH_ORDER)
    assert _shown(d) == expected  # the finished run: the order its tasks ran in
    assert _inspected(d) == GRAPH_ORDER
    for n in (0, 1, d.model.last_frame):
        d.select_frame(n)
        assert _shown(d) == expected, n

    d.select_frame(1)  # research is running; write and review have not started
    d.model.request_rewind()
    assert d.model.confirm().ok
    assert d.model.last_frame == 1
    assert _shown(d) == expected  # was research, review, write (their names' order)

    d.model.request_undo_rewind()
    assert d.model.confirm().ok
    assert _shown(d) == expected

    frames = db.store.frames(run_id)
    reviewing = min(f.frame_no for f in frames if f.node_id == "review")
    d.select_frame(reviewing)  # every task in the fork's base
    d.model.request_fork()
    fork = d.model.confirm()
    assert fork.ok
    d.model.switch_run(fork.run_id)  # not started: its rows come from base frames by node id
    assert d.model.run_id == fork.run_id and d.model.last_frame == 0
    assert _shown(d) == expected
    d.model.switch_run(run_id)
    assert _shown(d) == expected
    d.close()


def test_the_order_is_the_graph_views_layers_top_to_bottom_then_other_nodes_as_seen() -> None:
    graph = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": []}  # a diamond, and e
    assert task_order(graph, ["z", "d", "y", "z"]) == ["a", "e", "b", "c", "d", "z", "y"]
    chain = {f"t{i:04d}": [f"t{i - 1:04d}"] if i else [] for i in range(3000)}
    assert task_order(dict(sorted(chain.items(), reverse=True))) == sorted(chain)  # no recursion
    assert task_order(None, ["b", "a"]) == ["b", "a"]
