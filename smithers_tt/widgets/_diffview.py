"""The diff view: what differs between two frames, a run and its fork, or two attempts.

Differences come from :func:`smithers_tt.timetravel.diff` / ``json_diff`` (structural, list
insertions aligned) and are rendered here as escaped HTML: one row per JSON path, long
strings as inline text diffs (difflib), each section cut at ``CHANGES_SHOWN`` rows.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from smithers_tt.errors import SmithersError
from smithers_tt.timetravel import Change
from smithers_tt.widgets._conversation import transcript_diff_html
from smithers_tt.widgets._html import esc, is_long_text, text_diff, value_html, wrap
from smithers_tt.widgets._model import DebuggerModel
from smithers_tt.widgets._records import DiffResult
from smithers_tt.widgets._words import node_label

CHANGES_SHOWN = 200
"""Rows shown per section; the rest are counted."""

_OPS = {"add": "added", "remove": "removed", "change": "changed"}


def _side(label: str, value: Any, present: bool) -> str:
    shown = value_html(value) if present else '<span class="stt-muted">(absent)</span>'
    return f'<div><div class="stt-side-label">{label}</div>{shown}</div>'


def _row(change: Change) -> str:
    op = change.op if change.op in _OPS else "change"
    if op == "change" and is_long_text(change.old, change.new):
        body = f"<div>{text_diff(change.old, change.new)}</div>"
    else:
        body = (
            '<div class="stt-sides">'
            f"{_side('A', change.old, op != 'add')}{_side('B', change.new, op != 'remove')}"
            "</div>"
        )
    return (
        f'<div class="stt-chg stt-{op}"><div class="stt-chg-head">'
        f'<span class="stt-op">{esc(_OPS[op])}</span>'
        f'<span class="stt-path">{esc(change.path)}</span></div>{body}</div>'
    )


def render_diff(result: DiffResult, limit: int = CHANGES_SHOWN) -> str:
    """The HTML of a diff result (everything escaped)."""
    parts: list[str] = []
    if result.a or result.b:
        heading = f"A: {result.a} → B: {result.b}"
        wa, wb = result.whole
        whole = f"A: {wa} → B: {wb}" if wa else heading  # whole run ids on hover
        parts.append(f'<h4 title="{esc(whole)}">{esc(heading)}</h4>')
    if result.note:
        parts.append(f'<div class="stt-muted">{esc(result.note)}</div>')
    if result.empty:
        if not result.note:
            parts.append('<div class="stt-muted">no differences</div>')
        return wrap("".join(parts))
    for title, marked in result.conversations:
        added = sum(1 for mark, _ in marked if mark == "add")
        removed = sum(1 for mark, _ in marked if mark == "remove")
        parts.append(
            f"<h4>conversation {esc(title)} (+{added} / -{removed} messages)</h4>"
            f"{transcript_diff_html(marked)}"
        )
    for title, changes in result.sections:
        if not changes:
            continue
        rows = "".join(_row(c) for c in changes[:limit])
        more = ""
        if len(changes) > limit:
            more = f'<div class="stt-muted">… and {len(changes) - limit} more changes</div>'
        parts.append(
            f'<h4>{esc(title)} ({len(changes)})</h4><div class="stt-changes">{rows}</div>{more}'
        )
    return wrap("".join(parts))


class DiffView:
    """Controls choosing what to compare, and the rendered differences."""

    def __init__(self, model: DebuggerModel) -> None:
        self.model = model
        self._syncing = False
        self.mode = W.ToggleButtons(
            options=[("frames", "frames"), ("run / fork", "runs"), ("attempts", "attempts")],
            value=model.diff_mode,
            description="compare",
            style={"button_width": "auto"},
        )
        self.mode.observe(self._changed, names="value")
        self.previous = W.Checkbox(value=True, description="with the previous frame", indent=False)
        self.previous.observe(self._changed, names="value")
        self.frame = W.BoundedIntText(
            value=0, min=0, max=max(model.last_frame, 0), description="A = frame", disabled=True
        )
        self.frame.observe(self._changed, names="value")
        self.run = W.Dropdown(options=[], description="A = run", layout=W.Layout(width="100%"))
        self.run.observe(self._changed, names="value")
        self.run_frame = W.Text(value="", placeholder="fork point / newest", description="at frame")
        self.run_frame.observe(self._changed, names="value")
        self.node = W.Dropdown(options=[], description="node")
        self.node.observe(self._node_changed, names="value")
        wide = {"description_width": "initial"}
        self.attempt_a = W.Dropdown(options=[], description="A = attempt", style=wide)
        self.attempt_b = W.Dropdown(options=[], description="B = attempt", style=wide)
        self.attempt_a.observe(self._changed, names="value")
        self.attempt_b.observe(self._changed, names="value")
        self.frames_box = W.HBox([self.previous, self.frame], layout=W.Layout(flex_flow="row wrap"))
        self.runs_box = W.VBox([self.run, self.run_frame])
        self.attempts_box = W.VBox(
            [
                self.node,
                W.HBox([self.attempt_a, self.attempt_b], layout=W.Layout(flex_flow="row wrap")),
            ]
        )
        self.output = W.HTML()
        self.output.add_class("stt-diff")
        self.widget = W.VBox(
            [
                W.HTML(wrap("<h4>Diff (B is the selected frame)</h4>")),
                self.mode,
                self.frames_box,
                self.runs_box,
                self.attempts_box,
                self.output,
            ],
            layout=W.Layout(flex="1 1 300px", min_width="0"),
        )
        self.widget.add_class("stt-diffview")
        for event in ("frame", "run", "frames", "diff", "tree"):
            model.on(event, self.update)
        self.update()

    # --- controls -> model ----------------------------------------------------------------

    def _changed(self, change: dict[str, Any] | None = None) -> None:
        if self._syncing:
            return
        m = self.model
        run_frame = self.run_frame.value.strip()
        pair = None
        if self.node.value is not None and None not in (self.attempt_a.value, self.attempt_b.value):
            node_id, iteration = self.node.value
            pair = (node_id, iteration, self.attempt_a.value, self.attempt_b.value)
        m.set_diff(
            self.mode.value,
            compare_frame=None if self.previous.value else self.frame.value,
            compare_run=self.run.value,
            compare_run_frame=int(run_frame) if run_frame.lstrip("-").isdigit() else None,
            attempt_pair=pair,
        )

    def _node_changed(self, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        self._sync_attempts(None)
        self._changed()

    # --- model -> controls --------------------------------------------------------------

    def _sync_attempts(self, pair: tuple[str, int, int, int] | None) -> None:
        nodes = {(n, i): attempts for n, i, attempts in self.model.attempts_with_history(2)}
        key = self.node.value if pair is None else (pair[0], pair[1])
        attempts = nodes.get(key, []) if key is not None else []
        options = [(f"#{a}", a) for a in attempts]
        was = self._syncing
        self._syncing = True
        try:
            self.attempt_a.options = options
            self.attempt_b.options = options
            if pair is not None and pair[2] in attempts and pair[3] in attempts:
                self.attempt_a.value, self.attempt_b.value = pair[2], pair[3]
            elif len(attempts) >= 2:
                self.attempt_a.value, self.attempt_b.value = attempts[-2], attempts[-1]
            elif attempts:
                self.attempt_a.value = self.attempt_b.value = attempts[0]
        finally:
            self._syncing = was

    def _sync_nodes(self) -> None:
        """The nodes with two attempts or more at the selected frame, and the pair shown."""
        m = self.model
        nodes = m.attempts_with_history(2)
        options = tuple((node_label(n, i), (n, i)) for n, i, _ in nodes)
        if options != tuple(self.node.options):  # a long list is sent only when it changes
            self.node.options = options
        pair = m.attempt_pair or m.default_attempt_pair()
        if pair is not None and (pair[0], pair[1]) in {(n, i) for n, i, _ in nodes}:
            self.node.value = (pair[0], pair[1])
        self._sync_attempts(pair)

    def _sync(self) -> None:
        m = self.model
        self._syncing = True
        try:
            self.mode.value = m.diff_mode
            self.previous.value = m.compare_frame is None
            self.frame.max = max(m.last_frame, 0)
            self.frame.disabled = m.compare_frame is None
            self.frame.value = (
                m.compare_frame if m.compare_frame is not None else max(m.frame_no - 1, 0)
            )
            runs = [e for e in m.tree if e.run_id != m.run_id]
            shown = self.model.short_ids()
            self.run.options = [
                (_run_label(e, shown.get(e.run_id, e.run_id)), e.run_id) for e in runs
            ]
            default = m.default_compare_run()
            chosen = m.compare_run or (default[0] if default else None)
            self.run.value = chosen if chosen in [e.run_id for e in runs] else None
            if m.diff_mode == "attempts":  # the other modes do not show (nor pay for) these
                self._sync_nodes()
            self.frames_box.layout.display = None if m.diff_mode == "frames" else "none"
            self.runs_box.layout.display = None if m.diff_mode == "runs" else "none"
            self.attempts_box.layout.display = None if m.diff_mode == "attempts" else "none"
        finally:
            self._syncing = False

    def update(self) -> None:
        """Recompute and show the differences."""
        self._sync()
        try:
            self.output.value = render_diff(self.model.diff())
        except SmithersError as error:
            self.output.value = wrap(f'<div class="stt-error">{esc(error.message)}</div>')


def _run_label(edge: Any, shown: str) -> str:
    """A run in the diff's run picker: its short id, where it forked, its status."""
    where = "root" if edge.parent_run_id is None else f"fork @ {edge.parent_frame_no}"
    return f"{shown} ({where}, {edge.shown_status})"
