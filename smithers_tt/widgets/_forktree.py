"""The fork tree: every run descending from the root, with its fork frame; click to switch."""

from __future__ import annotations

import ipywidgets as W

from smithers_tt.errors import SmithersError
from smithers_tt.timetravel import ForkEdge
from smithers_tt.widgets._close import show_only
from smithers_tt.widgets._html import esc, wrap
from smithers_tt.widgets._model import DebuggerModel

MAX_SHOWN = 200
"""Runs listed; a larger tree says how many more there are."""


def _depths(tree: list[ForkEdge]) -> dict[str, int]:
    depth: dict[str, int] = {}
    for edge in tree:  # parents come before children
        depth[edge.run_id] = depth.get(edge.parent_run_id or "", -1) + 1
    return depth


class ForkTree:
    """One button per run (text, never HTML), indented by depth; the shown run is highlighted."""

    def __init__(self, model: DebuggerModel) -> None:
        self.model = model
        self.title = W.HTML(wrap("<h4>Fork tree</h4>"))
        self.list = W.VBox()
        self.note = W.HTML()
        self.buttons: dict[str, W.Button] = {}
        self.widget = W.VBox(
            [self.title, self.list, self.note],
            layout=W.Layout(flex="2 1 240px", min_width="0", overflow="auto", max_height="360px"),
        )
        model.on("tree", self.update)
        model.on("run", self.update)
        self.update()

    def update(self) -> None:
        """Redraw the tree (a run's button is kept from one redraw to the next: only what
        changed is sent, and a click on a button the page shows is never lost)."""
        m = self.model
        depth = _depths(m.tree)
        shown = m.short_ids()
        buttons: dict[str, W.Button] = {}
        for edge in m.tree[:MAX_SHOWN]:
            where = "root" if edge.parent_run_id is None else f"fork @ frame {edge.parent_frame_no}"
            gap = m.fork_gap(edge.run_id) if edge.parent_run_id is not None else None
            if gap is not None:
                where += f" (parent now ends at frame {gap[1]})"
            elif edge.fork_point_rewound:
                where += " (that frame was rewound away)"
            button = self.buttons.get(edge.run_id) or self._button(edge.run_id)
            short = shown.get(edge.run_id, edge.run_id)
            button.description = f"{short} · {edge.shown_status} · {where}"
            button.button_style = "info" if edge.run_id == m.run_id else ""
            button.layout.margin = f"1px 0 1px {16 * min(depth[edge.run_id], 12)}px"
            buttons[edge.run_id] = button
        self.buttons = buttons
        show_only(self.list, buttons.values())
        more = len(m.tree) - MAX_SHOWN
        note = f'<div class="stt-muted">… {more} more runs</div>' if more > 0 else ""
        self.note.value = wrap(note) if note else ""

    def _button(self, run_id: str) -> W.Button:
        button = W.Button(
            tooltip=f"show run {run_id}",
            layout=W.Layout(width="auto", max_width="100%", height="auto"),
        )
        button.add_class("stt-run")
        button.on_click(lambda _: self.open(run_id))
        return button

    def open(self, run_id: str) -> None:
        """Show another run in the debugger."""
        try:
            self.model.switch_run(run_id)
        except SmithersError as error:
            self.note.value = wrap(f'<div class="stt-error">{esc(error.message)}</div>')
