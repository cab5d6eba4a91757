"""The layers of a workflow graph, and the one order of its tasks every view lists them in.

A task sits one layer right of the furthest task it needs (an edge that closes a loop left out
of that count); within a layer, tasks sit by where their needs sit, then in the graph's own
order (a stored graph's keys are sorted: by name). The graph view draws these layers; the
timeline's rows, the inspector's nodes table and the Actions' lists of nodes follow the same
order (:func:`task_order`, :func:`in_task_order`), so a run's rows keep one order whatever
the frame shown and after any rewind, undo, fork or switch: it comes from the graph, never
from which frames happen to be in hand (a fork's base frames come by node id; a rewound run
lost the frames that ordered it).
"""

from __future__ import annotations

from collections.abc import Iterable


def _loop_edges(graph: dict[str, list[str]]) -> set[tuple[str, str]]:
    """The edges that close a loop (a LangGraph graph may have them): found by a depth-first
    walk along the edges from the tasks in order, those that lead back to a task on the way."""
    after: dict[str, list[str]] = {task: [] for task in graph}
    for task, needs in graph.items():
        for need in needs:
            if need in after:
                after[need].append(task)
    done: dict[str, bool] = {}  # False while on the way, True once left
    loops: set[tuple[str, str]] = set()
    for root in sorted(graph, key=lambda t: bool(graph[t])):  # tasks that need nothing first
        if root in done:
            continue
        done[root] = False
        stack = [(root, iter(after[root]))]
        while stack:
            task, nexts = stack[-1]
            following = next(nexts, None)
            if following is None:
                done[task] = True
                stack.pop()
            elif following not in done:
                done[following] = False
                stack.append((following, iter(after[following])))
            elif not done[following]:
                loops.add((task, following))
    return loops


def layers(graph: dict[str, list[str]]) -> list[list[str]]:
    """The graph's layers, left to right, each listing its tasks top to bottom."""
    loops = _loop_edges(graph)
    forward = {
        t: [n for n in needs if n in graph and (n, t) not in loops] for t, needs in graph.items()
    }
    layer: dict[str, int] = {}
    for task in graph:  # each task's depth, walked with a stack (a chain may be long)
        stack = [task]
        while stack:
            top = stack[-1]
            waiting = [n for n in forward[top] if n not in layer]
            if waiting:
                stack.extend(waiting)
            else:
                layer[top] = 1 + max((layer[n] for n in forward[top]), default=-1)
                stack.pop()
    rows: dict[int, list[str]] = {}
    for task in graph:  # the graph's own order (a stored one's: by name), then by needs
        rows.setdefault(layer[task], []).append(task)
    y_of: dict[str, int] = {}
    for n in sorted(rows):
        tasks = rows[n]
        if n:
            tasks.sort(
                key=lambda t: (
                    sum(y_of[d] for d in forward[t] if d in y_of) / max(1, len(forward[t]))
                )
            )
        for i, task in enumerate(tasks):
            y_of[task] = i
    return [rows[n] for n in sorted(rows)]


def task_order(graph: dict[str, list[str]] | None, seen: Iterable[str] = ()) -> list[str]:
    """The graph's tasks layer by layer, top to bottom in each (as the graph view draws
    them), then any other node of ``seen`` (in order of first appearance in the history)."""
    ordered = [task for row in layers(graph or {}) for task in row]
    known = set(ordered)
    return ordered + [n for n in dict.fromkeys(seen) if n not in known]


def in_task_order(
    pairs: Iterable[tuple[str, int]], order: Iterable[str], by_iteration: bool
) -> list[tuple[str, int]]:
    """(node, iteration) ``pairs`` as the views list them: loop turn by loop turn (by
    iteration) when ``by_iteration``, else node by node; nodes by their place in ``order``
    (:func:`task_order`), then nodes it does not name, in the order they come in."""
    rank = {node_id: i for i, node_id in enumerate(order)}
    pairs = list(pairs)
    for node_id, _ in pairs:
        rank.setdefault(node_id, len(rank))
    if by_iteration:
        return sorted(pairs, key=lambda pair: (pair[1], rank[pair[0]]))
    return sorted(pairs, key=lambda pair: (rank[pair[0]], pair[1]))
