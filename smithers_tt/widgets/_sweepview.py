"""The sweep view: a what-if sweep's branches side by side (status, score, output), a diff of
any two branches, any branch opened in its own debugger, and one branch promoted (the fork to
keep; the others left, or deleted after a confirmation) (``sweep.view()``).

Its one state is the sweep's rows as last read (:meth:`Sweep.rows`); the table, the branch
choices and the diff are drawn from them. Everything a branch produced is escaped.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from smithers_tt.errors import SmithersError
from smithers_tt.timetravel import diff
from smithers_tt.widgets._html import CSS, badge, compact, esc, read_only_note, run_ref, wrap
from smithers_tt.widgets._state import read_only_reason


class SweepView(W.VBox):
    """A sweep's branches in a table, **Diff** of two branches' newest states (outputs and
    checkpoints, node by node), **Open** a branch's debugger below, and **Promote** a branch
    (asked first; with "delete the others" its other ended branches are deleted).

    Args:
        db: the database.
        sweep_id: the sweep (``db.get_sweep``).
        workflow: handed to an opened branch's debugger (its graph, its actions).
    """

    def __init__(self, db: Any, sweep_id: str, *, workflow: Any = None) -> None:
        self.db, self.workflow = db, workflow
        self.sweep = db.get_sweep(sweep_id)
        self.rows: list[dict[str, Any]] = []
        self.table = W.HTML()
        self.left = W.Dropdown(description="Branch A")
        self.right = W.Dropdown(description="Branch B")
        self.diff_button = W.Button(description="Diff", tooltip="Diff the two branches")
        self.open_choice = W.Dropdown(description="Open")
        self.open_button = W.Button(description="Open debugger")
        self.refresh_button = W.Button(description="Refresh")
        self.diff_html = W.HTML()
        self.diffed: tuple[str, ...] = ()
        """The two branches the diff shows (none before a diff)."""
        self.opened = W.Box()
        self.debugger: Any = None
        self.promote_choice = W.Dropdown(description="Keep")
        self.delete_others = W.Checkbox(description="delete the others", indent=False)
        self.promote_button = W.Button(description="Promote…", tooltip="Promote this branch")
        self.confirm_text = W.HTML()
        self.confirm_button = W.Button(description="Promote", button_style="primary")
        self.cancel_button = W.Button(description="Cancel")
        self.confirm_box = W.VBox(
            [self.confirm_text, W.HBox([self.confirm_button, self.cancel_button])],
            layout=W.Layout(display="none"),
        )
        self.report = W.HTML()
        self.pending: tuple[str, bool] | None = None
        self.read_only = read_only_reason(db)
        for button in (self.promote_button, self.confirm_button):
            button.add_class("stt-promote")
        self.confirm_button.add_class("stt-confirm")
        self.diff_button.on_click(lambda _b: self.show_diff())
        self.open_button.on_click(lambda _b: self.open_branch())
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.promote_button.on_click(lambda _b: self.ask_promote())
        self.confirm_button.on_click(lambda _b: self.promote())
        self.cancel_button.on_click(lambda _b: self.ask_promote(cancel=True))
        super().__init__(
            [
                W.HTML(CSS),  # styled as the other views, even shown alone in a notebook
                self.table,
                W.HBox([self.left, self.right, self.diff_button]),
                self.diff_html,
                W.HBox([self.open_choice, self.open_button, self.refresh_button]),
                W.HBox([self.promote_choice, self.delete_others, self.promote_button]),
                self.confirm_box,
                self.report,
                self.opened,
            ]
        )
        self.add_class("stt-sweep")
        if self.read_only:
            self.promote_button.disabled = True
            self.report.value = read_only_note(self.read_only)
        self.refresh()

    def refresh(self) -> None:
        """Read the sweep again and redraw the table and the branch choices."""
        self.rows = self.sweep.rows()
        made = [(row["variant"], row["run_id"]) for row in self.rows if row["run_id"]]
        for choice in (self.left, self.right, self.open_choice):
            keep = choice.value
            choice.options = made
            ids = [run_id for _, run_id in made]
            choice.value = keep if keep in ids else (ids[0] if ids else None)
        if len(made) > 1 and self.left.value == self.right.value:
            self.right.value = made[1][1]
        keep = self.promote_choice.value
        variants = [variant for variant, _ in made]
        self.promote_choice.options = variants
        self.promote_choice.value = keep if keep in variants else (self.sweep.promoted or None)
        self.table.value = wrap(self._table())

    def _table(self) -> str:
        short = self.db.store.short_run_ids(
            sorted({self.sweep.run_id, *(r["run_id"] for r in self.rows if r["run_id"])})
        )
        head = (
            f"<p>sweep <code>{esc(self.sweep.id)}</code> of run "
            f"{run_ref(self.sweep.run_id, short[self.sweep.run_id])} at frame "
            f"{self.sweep.frame_no}{' (cancelled)' if self.sweep.cancelled else ''}</p>"
        )
        cells = "".join(
            f"<tr{_PROMOTED_ROW if row['promoted'] else ''}>"
            f"<td>{esc(row['variant'])}{_PROMOTED if row['promoted'] else ''}</td>"
            f"<td>{run_ref(row['run_id'], short[row['run_id']]) if row['run_id'] else '-'}</td>"
            f"<td>{badge(row['status'])}</td>"
            f"<td>{esc('-' if row['score'] is None else compact(row['score'], 80))}</td>"
            f"<td class='stt-nowrap'>{esc(_seconds(row['duration_s']))}</td>"
            f"<td>{esc(compact(row['output'], 160) if row['output'] else row['error'] or '-')}</td>"
            "</tr>"
            for row in self.rows
        )
        header = "".join(
            f"<th>{h}</th>" for h in ("variant", "branch", "status", "score", "time", "output")
        )
        return f"{head}<table><tr>{header}</tr>{cells}</table>"

    def show_diff(self) -> None:
        """Diff the newest states of branches A and B (their outputs and checkpoints)."""
        a, b = self.left.value, self.right.value
        if not a or not b:
            self.diff_html.value = wrap("<p>choose two branches</p>")
            return
        changes = diff(self.db.snapshot(a), self.db.snapshot(b), self.db.store.load)
        self.diffed = (a, b)
        self.diff_html.value = wrap(changes._repr_html_())  # escaped by the diff

    def open_branch(self) -> None:
        """Open the chosen branch's debugger below the table."""
        if not self.open_choice.value:
            return
        if self.debugger is not None:
            self.debugger.close()
        self.debugger = self.db.debug(self.open_choice.value, workflow=self.workflow)
        self.opened.children = (self.debugger,)

    def ask_promote(self, *, cancel: bool = False) -> None:
        """Ask before promoting the chosen branch (and deleting the others, if ticked);
        ``cancel`` forgets the question."""
        variant = self.promote_choice.value
        if cancel or variant is None or self.read_only:
            self.pending = None
            self.confirm_box.layout.display = "none"
            return
        others = [r["variant"] for r in self.rows if r["run_id"] and r["variant"] != variant]
        delete = bool(self.delete_others.value)
        question = f"Promote {variant!r}: keep its branch as the sweep's choice"
        if delete and others:
            question += f", and delete the {len(others)} other branch(es) ({', '.join(others)})?"
        else:
            question += "; the other branches stay as they are?"
        self.pending = (variant, delete)
        self.confirm_text.value = wrap(f"<div>{esc(question)}</div>")
        self.confirm_button.description = "Promote and delete" if delete else "Promote"
        self.confirm_button.button_style = "danger" if delete else "primary"
        self.confirm_box.layout.display = None

    def promote(self) -> None:
        """Promote the branch asked about, report what was done, and redraw the table."""
        if self.pending is None:
            return
        variant, delete = self.pending
        self.ask_promote(cancel=True)
        shown = self.db.store.short_run_ids([r["run_id"] for r in self.rows if r["run_id"]])
        try:
            done = self.sweep.promote(variant, delete_others=delete)
        except SmithersError as error:
            self.report.value = wrap(f'<div class="stt-error">{esc(error.message)}</div>')
            return
        lines = [f"promoted {esc(variant)}: branch {run_ref(done.run_id, shown[done.run_id])}"]
        lines += [f"deleted branch {esc(shown.get(r, r))}" for r in done.deleted]
        lines += [
            f'<span class="stt-muted">kept branch {esc(shown.get(r, r))}: {esc(why)}</span>'
            for r, why in done.kept.items()
        ]
        self.report.value = wrap("".join(f'<div class="stt-ok">{line}</div>' for line in lines))
        if self.debugger is not None and self.debugger.model.run_id in done.deleted:
            self.debugger.close()  # its run is gone
            self.debugger, self.opened.children = None, ()
        if set(self.diffed) & set(done.deleted):
            self.diffed, self.diff_html.value = (), ""  # so is one of the two diffed
        self.refresh()


_PROMOTED_ROW = ' class="stt-promoted"'
_PROMOTED = (
    ' <span class="stt-badge stt-promoted-mark" '
    'style="background:var(--jp-brand-color1, #1976d2)">promoted</span>'
)
"""The mark of the promoted branch's row (a badge in the theme's brand colour)."""


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"
