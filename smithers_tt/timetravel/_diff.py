"""Differences between two snapshots: nodes, attempts, outputs and checkpoint payloads.

JSON values are compared structurally: objects key by key, arrays aligned with a sequence
matcher on element fingerprints (so an insertion at the head of a long list is one change,
not one per element), scalars by type and value.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from smithers_tt.checkpoint import AgentCheckpoint, canonical_bytes, child_path
from smithers_tt.store import CheckpointRef
from smithers_tt.timetravel._html import MUTED, esc, short, table, title
from smithers_tt.timetravel._snapshot import Snapshot


@dataclass(frozen=True)
class Change:
    """One difference at a JSON path: ``op`` is ``add``, ``remove`` or ``change``."""

    op: str
    path: str
    old: Any = None
    new: Any = None


@dataclass
class SnapshotDiff:
    """What changed between two snapshots (``a`` before, ``b`` after)."""

    a: tuple[str, int]
    b: tuple[str, int]
    status: tuple[str, str] | None = None
    nodes: list[Change] = field(default_factory=list)
    attempts: list[Change] = field(default_factory=list)
    outputs: list[Change] = field(default_factory=list)
    checkpoints: dict[str, list[Change]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Whether the two snapshots show the same state."""
        return not (
            self.status
            or self.nodes
            or self.attempts
            or self.outputs
            or any(self.checkpoints.values())
        )

    def _repr_html_(self) -> str:
        """The differences as escaped HTML tables in notebooks."""
        return diff_html(self)


def _fingerprint(value: Any) -> bytes:
    try:
        return canonical_bytes(value)
    except Exception:  # not strict JSON: fall back to identity of its repr
        return repr(value).encode()


def json_diff(old: Any, new: Any, path: str = "$") -> list[Change]:
    """Structural differences between two JSON values, as path changes."""
    if type(old) is dict and type(new) is dict:
        changes: list[Change] = []
        for key in sorted(set(old) | set(new)):
            sub = child_path(path, key)
            if key not in old:
                changes.append(Change("add", sub, None, new[key]))
            elif key not in new:
                changes.append(Change("remove", sub, old[key], None))
            else:
                changes.extend(json_diff(old[key], new[key], sub))
        return changes
    if type(old) is list and type(new) is list:
        return _list_diff(old, new, path)
    if type(old) is type(new) and old == new:
        return []
    return [Change("change", path, old, new)]


def _list_diff(old: list[Any], new: list[Any], path: str) -> list[Change]:
    matcher = difflib.SequenceMatcher(
        a=[_fingerprint(v) for v in old], b=[_fingerprint(v) for v in new], autojunk=False
    )
    changes: list[Change] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for offset in range(i2 - i1):
                changes.extend(
                    json_diff(old[i1 + offset], new[j1 + offset], f"{path}[{j1 + offset}]")
                )
            continue
        changes.extend(Change("remove", f"{path}[{i}]", old[i], None) for i in range(i1, i2))
        changes.extend(Change("add", f"{path}[{j}]", None, new[j]) for j in range(j1, j2))
    return changes


Loader = Callable[[CheckpointRef], AgentCheckpoint]


def diff(a: Snapshot, b: Snapshot, load: Loader | None = None) -> SnapshotDiff:
    """Compare two snapshots of one run, two runs, or a run and its fork.

    ``load`` reads checkpoint content (defaults to the loader the snapshots came with); the
    payloads of each node's newest checkpoint are compared path by path.
    """
    result = SnapshotDiff((a.run_id, a.frame_no), (b.run_id, b.frame_no))
    if a.status != b.status:
        result.status = (a.status, b.status)
    for key in sorted(set(a.nodes) | set(b.nodes)):
        na, nb = a.nodes.get(key), b.nodes.get(key)
        label = f"{key[0]}[{key[1]}]"
        if na is None or nb is None or (na.state, na.last_attempt) != (nb.state, nb.last_attempt):
            result.nodes.append(
                Change(
                    "add" if na is None else "remove" if nb is None else "change",
                    label,
                    None if na is None else na.state,
                    None if nb is None else nb.state,
                )
            )
    for key in sorted(set(a.attempts) | set(b.attempts)):
        aa, ab = a.attempts.get(key), b.attempts.get(key)
        if aa is None or ab is None or aa.state != ab.state:
            result.attempts.append(
                Change(
                    "add" if aa is None else "remove" if ab is None else "change",
                    f"{key[0]}[{key[1]}]#{key[2]}",
                    None if aa is None else aa.state,
                    None if ab is None else ab.state,
                )
            )
    result.outputs = json_diff(a.outputs(), b.outputs())
    loader = load or a.loader or b.loader
    for node_id, iteration in sorted({(k[0], k[1]) for k in (*a.refs, *b.refs)}):
        ra, rb = a.newest_ref(node_id, iteration), b.newest_ref(node_id, iteration)
        if ra is not None and rb is not None and ra.content_hash == rb.content_hash:
            continue
        label = node_id if iteration == 0 else f"{node_id}[{iteration}]"
        if loader is None:  # content unknown: its address stands for it
            old, new = ra and ra.content_hash, rb and rb.content_hash
        else:
            old = None if ra is None else loader(ra).to_json()
            new = None if rb is None else loader(rb).to_json()
        if ra is None or rb is None:  # a checkpoint on one side only: added or removed
            result.checkpoints[label] = [Change("add" if ra is None else "remove", "$", old, new)]
        elif loader is None:
            result.checkpoints[label] = [Change("change", "$", old, new)]
        else:
            result.checkpoints[label] = json_diff(old, new)
    return result


def _changes(changes: Sequence[Change]) -> list[tuple[str, str, str, str]]:
    ops = {"add": "added", "remove": "removed", "change": "changed"}
    return [
        (
            ops.get(c.op, c.op),
            c.path,
            "" if c.op == "add" else short(c.old),
            "" if c.op == "remove" else short(c.new),
        )
        for c in changes
    ]


def diff_html(d: SnapshotDiff) -> str:
    """A snapshot diff: one table of changes per section."""
    (ra, fa), (rb, fb) = d.a, d.b
    parts = [title(f"Diff A: run {ra} frame {fa} → B: run {rb} frame {fb}")]
    if d.empty:
        parts.append(f"<div {MUTED}>no differences</div>")
    if d.status:
        parts.append(f"<div>run status: {esc(d.status[0])} → {esc(d.status[1])}</div>")
    sections = [("nodes", d.nodes), ("attempts", d.attempts), ("outputs", d.outputs)]
    sections += [(f"checkpoint {label}", c) for label, c in d.checkpoints.items()]
    for heading, changes in sections:
        if changes:
            parts.append(f"<div {MUTED}>{esc(heading)} ({len(changes)})</div>")
            parts.append(table(["", "path", "A", "B"], _changes(changes), len(changes)))
    return f"<div>{''.join(parts)}</div>"
