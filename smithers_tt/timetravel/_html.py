"""Notebook views (``_repr_html_``) of snapshots, diffs, runs and timelines.

Plain HTML tables, no script and no external style: every id, state, path and value is
untrusted text (payloads come from language models) and is escaped with :func:`esc` here.
Colours come from JupyterLab's ``--jp-*`` variables, so the tables follow the theme.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smithers_tt.timetravel._diff import Change, SnapshotDiff
    from smithers_tt.timetravel._snapshot import Snapshot
    from smithers_tt.timetravel._timeline import Timeline

ROWS = 50
"""Rows shown per table; the rest are counted."""

VALUE_CHARS = 200
"""Characters of one value shown."""

_TABLE = (
    'style="border-collapse:collapse;font-size:var(--jp-ui-font-size1,13px);'
    'color:var(--jp-ui-font-color1,inherit)"'
)
_CELL = (
    'style="border-bottom:1px solid var(--jp-border-color2,#ddd);padding:1px 6px;'
    'text-align:left;vertical-align:top"'
)
_MUTED = 'style="color:var(--jp-ui-font-color2,#666)"'


def esc(value: Any) -> str:
    """``value`` as text, HTML-escaped (quotes too)."""
    return html.escape(value if isinstance(value, str) else str(value), quote=True)


def _short(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > VALUE_CHARS:
        text = f"{text[:VALUE_CHARS]}… ({len(text) - VALUE_CHARS} more characters)"
    return text


def table(head: Sequence[str], rows: Iterable[Sequence[Any]], total: int | None = None) -> str:
    """An escaped table of at most :data:`ROWS` rows (``total`` counts them all)."""
    body = []
    count = 0
    for row in rows:
        count += 1
        if count > ROWS:
            continue
        body.append("<tr>" + "".join(f"<td {_CELL}>{esc(c)}</td>" for c in row) + "</tr>")
    total = count if total is None else total
    more = f"<div {_MUTED}>… {total - ROWS} more</div>" if total > ROWS else ""
    header = "".join(f"<th {_CELL}>{esc(h)}</th>" for h in head)
    return f"<table {_TABLE}><tr>{header}</tr>{''.join(body)}</table>{more}"


def _title(text: str) -> str:
    return f"<div><b>{esc(text)}</b></div>"


def snapshot_html(snap: Snapshot) -> str:
    """A snapshot: status, nodes and the checkpoint refs visible at its frame."""
    nodes = table(
        ["node", "iteration", "state", "last attempt", "output"],
        (
            (n.node_id, n.iteration, n.state, n.last_attempt or "", _short(n.output))
            for _, n in sorted(snap.nodes.items())
        ),
        len(snap.nodes),
    )
    refs = table(
        ["node", "iteration", "attempt", "seq", "purpose", "codec", "hash"],
        (
            (
                r.node_id,
                r.iteration,
                r.attempt,
                r.sequence,
                r.purpose,
                f"{r.codec} v{r.version}",
                r.short_hash,
            )
            for _, r in sorted(snap.refs.items())
        ),
        len(snap.refs),
    )
    return (
        f"<div>{_title(f'Snapshot of run {snap.run_id} at frame {snap.frame_no} · {snap.status}')}"
        f"{nodes}<div {_MUTED}>checkpoint refs</div>{refs}</div>"
    )


def _changes(changes: Sequence[Change]) -> list[tuple[str, str, str, str]]:
    ops = {"add": "added", "remove": "removed", "change": "changed"}
    return [
        (
            ops.get(c.op, c.op),
            c.path,
            "" if c.op == "add" else _short(c.old),
            "" if c.op == "remove" else _short(c.new),
        )
        for c in changes
    ]


def diff_html(d: SnapshotDiff) -> str:
    """A snapshot diff: one table of changes per section."""
    (ra, fa), (rb, fb) = d.a, d.b
    parts = [_title(f"Diff A: run {ra} frame {fa} → B: run {rb} frame {fb}")]
    if d.empty:
        parts.append(f"<div {_MUTED}>no differences</div>")
    if d.status:
        parts.append(f"<div>run status: {esc(d.status[0])} → {esc(d.status[1])}</div>")
    sections = [("nodes", d.nodes), ("attempts", d.attempts), ("outputs", d.outputs)]
    sections += [(f"checkpoint {label}", c) for label, c in d.checkpoints.items()]
    for title, changes in sections:
        if changes:
            parts.append(f"<div {_MUTED}>{esc(title)} ({len(changes)})</div>")
            parts.append(table(["", "path", "A", "B"], _changes(changes), len(changes)))
    return f"<div>{''.join(parts)}</div>"


def run_html(record: Any) -> str:
    """A run: id, workflow, status, frames, lineage, input and output."""
    rows = [
        ("workflow", record.workflow),
        ("status", record.status),
        ("frames", f"0 to {record.clock}"),
        ("input", _short(record.input)),
    ]
    if record.parent_run_id:
        rows.append(("forked from", f"{record.parent_run_id} @ frame {record.parent_frame_no}"))
    if record.output is not None:
        rows.append(("output", _short(record.output)))
    if record.error:
        rows.append(("error", record.error))
    return f"<div>{_title(f'Run {record.run_id}')}{table(['', ''], rows)}</div>"


def timeline_html(t: Timeline) -> str:
    """A timeline: the run's frames (numbers, kinds, nodes) and its fork tree."""
    frames = table(
        ["frame", "kind", "node", "attempt", "seq", "state", "purpose"],
        (
            (
                f.frame_no,
                f.kind,
                f.node_id or "",
                f.attempt or "",
                "" if f.sequence is None else f.sequence,
                f.state or "",
                f.purpose or "",
            )
            for f in t.frames
            if f.frame_no >= 0
        ),
        sum(1 for f in t.frames if f.frame_no >= 0),
    )
    tree = table(
        ["run", "parent", "fork frame", "status"],
        (
            (
                e.run_id,
                e.parent_run_id or "(root)",
                ""
                if e.parent_frame_no is None
                else f"{e.parent_frame_no}" + (" (rewound away)" if e.fork_point_rewound else ""),
                e.status,
            )
            for e in t.tree
        ),
        len(t.tree),
    )
    return (
        f"<div>{_title(f'Timeline of run {t.run_id} (root {t.root})')}{frames}"
        f"<div {_MUTED}>fork tree</div>{tree}</div>"
    )
