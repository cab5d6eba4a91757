"""The HTML toolkit of the notebook views (``_repr_html_``): escaping, capped tables, titles.

Each type draws itself with these (:class:`Snapshot`, :class:`SnapshotDiff`, :class:`Timeline`
in their own modules; a run here), so this module imports none of them.

Plain HTML tables, no script and no external style: every id, state, path and value is
untrusted text (payloads come from language models) and is escaped with :func:`esc` here.
Colours come from JupyterLab's ``--jp-*`` variables, so the tables follow the theme.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

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
MUTED = 'style="color:var(--jp-ui-font-color2,#666)"'


def esc(value: Any) -> str:
    """``value`` as text, HTML-escaped (quotes too)."""
    return html.escape(value if isinstance(value, str) else str(value), quote=True)


def short(value: Any) -> str:
    """``value`` as one line of JSON (``repr`` if it is not JSON), cut at :data:`VALUE_CHARS`."""
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
    more = f"<div {MUTED}>… {total - ROWS} more</div>" if total > ROWS else ""
    header = "".join(f"<th {_CELL}>{esc(h)}</th>" for h in head)
    return f"<table {_TABLE}><tr>{header}</tr>{''.join(body)}</table>{more}"


def title(text: str) -> str:
    """``text`` as an escaped bold heading."""
    return f"<div><b>{esc(text)}</b></div>"


def run_html(record: Any) -> str:
    """A run: id, workflow, status, frames, lineage, input and output."""
    rows = [
        ("workflow", record.workflow),
        ("status", record.status),
        ("frames", f"0 to {record.clock}"),
        ("input", short(record.input)),
    ]
    if getattr(record, "labels", None):
        rows.append(("labels", " ".join(f"{k}={v}" for k, v in record.labels.items())))
    if record.parent_run_id:
        rows.append(("forked from", f"{record.parent_run_id} @ frame {record.parent_frame_no}"))
    if record.output is not None:
        rows.append(("output", short(record.output)))
    if record.error:
        rows.append(("error", record.error))
    return f"<div>{title(f'Run {record.run_id}')}{table(['', ''], rows)}</div>"
