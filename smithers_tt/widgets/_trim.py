"""What a diff of two snapshots needs to compare: each node's newest ref, and the two
snapshots trimmed to what can differ (:func:`trimmed`), or to what the frames between two
frames of one run touched (:class:`Touched`, from
:meth:`~smithers_tt.widgets._scrub.FoldCache.touched`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

from smithers_tt.store import CheckpointRef
from smithers_tt.timetravel import Snapshot


class Touched(NamedTuple):
    """What a range of frames changes (:meth:`.FoldCache.touched`)."""

    nodes: set[str]
    attempts: set[tuple[Any, ...]]
    refs: set[tuple[Any, ...]]


def newest_refs(snap: Snapshot) -> dict[tuple[str, int], CheckpointRef]:
    """Each node's (and iteration's) newest ref in a snapshot: highest attempt, then sequence."""
    newest: dict[tuple[str, int], tuple[tuple[int, int], CheckpointRef]] = {}
    for (node_id, iteration, attempt, sequence), ref in snap.refs.items():
        key = (node_id, iteration)
        found = newest.get(key)
        if found is None or found[0] < (attempt, sequence):
            newest[key] = ((attempt, sequence), ref)
    return {k: v[1] for k, v in newest.items()}


def trimmed(
    a: Snapshot,
    b: Snapshot,
    na: dict[tuple[str, int], CheckpointRef],
    nb: dict[tuple[str, int], CheckpointRef],
    touched: Touched | None = None,
) -> tuple[Snapshot, Snapshot]:
    """The two snapshots with only what :func:`timetravel.diff` can report: each node's
    newest ref where the two sides differ, the attempts that differ, and every iteration of
    the nodes whose rows differ (outputs take a node's highest finished iteration). Same
    result, in one pass over the refs instead of one per node, and a diff of two nearby
    frames of a 100,000-frame run sorts what changed, not the thousands of rows that did
    not (folded snapshots share the objects of the rows they did not change). ``touched``,
    when given, is what the frames between two frames of one run change: only that is
    compared."""
    differ = {
        k
        for k in (set(na) | set(nb) if touched is None else touched.refs)
        if k not in na or k not in nb or na[k].content_hash != nb[k].content_hash
    }

    def keep(snap: Snapshot, newest: dict[tuple[str, int], CheckpointRef]) -> Snapshot:
        refs = {
            (r.node_id, r.iteration, r.attempt, r.sequence): r
            for r in (newest.get(k) for k in differ)
            if r is not None
        }
        return replace(
            snap,
            refs=refs,
            nodes={k: v for k, v in snap.nodes.items() if k[0] in nodes},
            attempts={k: snap.attempts[k] for k in attempts if k in snap.attempts},
        )

    if touched is None:
        nodes = {k[0] for k in _differing(a.nodes, b.nodes)}
        attempts = _differing(a.attempts, b.attempts)
    else:
        nodes, attempts = touched.nodes, touched.attempts
    return keep(a, na), keep(b, nb)


def _differing(x: dict[Any, Any], y: dict[Any, Any]) -> set[Any]:
    """Keys whose values differ between two dicts (the same object counts as equal)."""
    return {k for k in x.keys() | y.keys() if x.get(k) is not y.get(k) and x.get(k) != y.get(k)}
