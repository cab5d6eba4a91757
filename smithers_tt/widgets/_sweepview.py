"""The sweep view: a what-if sweep's branches side by side (status, score, output), a diff of
any two branches, and any branch opened in its own debugger (``sweep.view()``).

Its one state is the sweep's rows as last read (:meth:`Sweep.rows`); the table, the branch
choices and the diff are drawn from them. Everything a branch produced is escaped.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from smithers_tt.timetravel import diff
from smithers_tt.widgets._html import badge, compact, esc, run_ref, wrap


class SweepView(W.VBox):
    """A sweep's branches in a table, **Diff** of two branches' newest states (outputs and
    checkpoints, node by node), and **Open** a branch's debugger below.

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
        self.opened = W.Box()
        self.debugger: Any = None
        self.diff_button.on_click(lambda _b: self.show_diff())
        self.open_button.on_click(lambda _b: self.open_branch())
        self.refresh_button.on_click(lambda _b: self.refresh())
        super().__init__(
            [
                self.table,
                W.HBox([self.left, self.right, self.diff_button]),
                self.diff_html,
                W.HBox([self.open_choice, self.open_button, self.refresh_button]),
                self.opened,
            ]
        )
        self.add_class("stt-sweep")
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
            "<tr>"
            f"<td>{esc(row['variant'])}</td>"
            f"<td>{run_ref(row['run_id'], short[row['run_id']]) if row['run_id'] else '-'}</td>"
            f"<td>{badge(row['status'])}</td>"
            f"<td>{esc('-' if row['score'] is None else compact(row['score'], 80))}</td>"
            f"<td>{esc(_seconds(row['duration_s']))}</td>"
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
        self.diff_html.value = wrap(changes._repr_html_())  # escaped by the diff

    def open_branch(self) -> None:
        """Open the chosen branch's debugger below the table."""
        if not self.open_choice.value:
            return
        if self.debugger is not None:
            self.debugger.close()
        self.debugger = self.db.debug(self.open_choice.value, workflow=self.workflow)
        self.opened.children = (self.debugger,)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"
