"""The fork tree: every run descending from the root, with its fork frame; click to switch. A
what-if sweep's branches are one group under a node naming the sweep."""

from __future__ import annotations

import ipywidgets as W

from smithers_tt.errors import SmithersError
from smithers_tt.timetravel import ForkEdge
from smithers_tt.widgets._close import show_only
from smithers_tt.widgets._html import esc, wrap
from smithers_tt.widgets._model import DebuggerModel

MAX_SHOWN = 200
"""Runs listed; a larger tree says how many more there are."""

MAX_VARIANTS_NAMED = 8
"""Variants a sweep's node names; more are counted."""


def _depths(tree: list[ForkEdge], grouped: set[str]) -> dict[str, int]:
    """Each run's depth in the tree drawn: a sweep's branch (in ``grouped``) one level deeper,
    under its sweep's node, and so the runs forked from it."""
    depth: dict[str, int] = {}
    for edge in tree:  # parents come before children
        step = 2 if edge.run_id in grouped else 1
        depth[edge.run_id] = depth.get(edge.parent_run_id or "", -1) + step
    return depth


class ForkTree:
    """One button per run (text, never HTML), indented by depth; the shown run is highlighted.
    The branches of a what-if sweep are drawn as one group: a node naming the sweep, its fork
    frame and its variants (a click folds or unfolds it), with the branches under it."""

    def __init__(self, model: DebuggerModel) -> None:
        self.model = model
        self.title = W.HTML(wrap("<h4>Fork tree</h4>"))
        self.list = W.VBox()
        self.note = W.HTML()
        self.buttons: dict[str, W.Button] = {}
        self.groups: dict[str, W.Button] = {}
        """Sweep id -> the node its branches are drawn under."""
        self.folded: set[str] = set()
        """Sweeps whose branches are hidden under their node."""
        self._sweep_of: dict[str, tuple[str, str] | None] = {}
        """Run id -> (sweep id, variant) or None: a run's labels never change, so each run's
        are read once."""
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
        shown = m.short_ids()
        edges = m.tree[:MAX_SHOWN]
        promoted = self._read_sweeps(edges)
        depth = _depths(m.tree, {run_id for run_id, found in self._sweep_of.items() if found})
        members: dict[str, list[ForkEdge]] = {}
        for edge in edges:
            found = self._sweep_of.get(edge.run_id)
            if found is not None:
                members.setdefault(found[0], []).append(edge)
        buttons: dict[str, W.Button] = {}
        groups: dict[str, W.Button] = {}
        rows: list[W.Button] = []
        for edge in edges:
            found = self._sweep_of.get(edge.run_id)
            if found is None:
                rows.append(self._draw(edge, depth[edge.run_id], shown, buttons))
                continue
            sweep_id = found[0]
            if sweep_id in groups:
                continue  # drawn with the first branch of its sweep
            branches = members[sweep_id]
            group = self._group(sweep_id, branches, promoted.get(sweep_id))
            group.layout.margin = f"1px 0 1px {16 * min(depth[edge.run_id] - 1, 12)}px"
            groups[sweep_id] = group
            rows.append(group)
            for branch in branches:
                button = self._draw(branch, depth[branch.run_id], shown, buttons)
                if sweep_id not in self.folded:
                    rows.append(button)
        self.buttons, self.groups = buttons, groups
        show_only(self.list, rows)
        more = len(m.tree) - MAX_SHOWN
        note = f'<div class="stt-muted">… {more} more runs</div>' if more > 0 else ""
        self.note.value = wrap(note) if note else ""

    def _read_sweeps(self, edges: list[ForkEdge]) -> dict[str, str | None]:
        """Learn which runs not seen yet are sweep branches (forked from the sweep's run: a
        fork of a branch inherits its labels, not its place); return each sweep's promoted
        variant (read afresh: a person may have promoted one since)."""
        new = [e for e in edges if e.run_id not in self._sweep_of]
        branches = [e.run_id for e in edges if self._sweep_of.get(e.run_id)]
        if not new and not branches:
            return {}
        found, sweeps = self.model.db.store.sweeps.branches_among(
            [e.run_id for e in new] + branches
        )
        for edge in new:
            label = found.get(edge.run_id)
            forked = label is not None and sweeps[label[0]][0] == edge.parent_run_id
            self._sweep_of[edge.run_id] = label if forked else None
        return {sweep_id: promoted for sweep_id, (_, promoted) in sweeps.items()}

    def _draw(
        self, edge: ForkEdge, depth: int, shown: dict[str, str], buttons: dict[str, W.Button]
    ) -> W.Button:
        m = self.model
        where = "root" if edge.parent_run_id is None else f"fork @ frame {edge.parent_frame_no}"
        gap = m.fork_gap(edge.run_id) if edge.parent_run_id is not None else None
        if gap is not None:
            where += f" (parent now ends at frame {gap[1]})"
        elif edge.fork_point_rewound:
            where += " (that frame was rewound away)"
        button = self.buttons.get(edge.run_id) or self._button(edge.run_id)
        found = self._sweep_of.get(edge.run_id)
        variant = "" if found is None else f"{found[1]} · "
        short = shown.get(edge.run_id, edge.run_id)
        button.description = f"{variant}{short} · {edge.shown_status} · {where}"
        button.button_style = "info" if edge.run_id == m.run_id else ""
        button.layout.margin = f"1px 0 1px {16 * min(depth, 12)}px"
        buttons[edge.run_id] = button
        return button

    def _group(self, sweep_id: str, branches: list[ForkEdge], promoted: str | None) -> W.Button:
        """The node a sweep's branches are drawn under: the sweep, its fork frame, its
        variants (the promoted one marked)."""
        group = self.groups.get(sweep_id)
        if group is None:
            group = W.Button(
                layout=W.Layout(width="auto", max_width="100%", height="auto"),
            )
            group.add_class("stt-sweep-group")
            group.on_click(lambda _: self.fold(sweep_id))
        names = [
            f"{name} (promoted)" if name == promoted else name
            for name in (self._sweep_of[e.run_id][1] for e in branches)  # type: ignore[index]
        ]
        listed = ", ".join(names[:MAX_VARIANTS_NAMED])
        if len(names) > MAX_VARIANTS_NAMED:
            listed += f" … {len(names) - MAX_VARIANTS_NAMED} more"
        arrow = "▸" if sweep_id in self.folded else "▾"
        frame = branches[0].parent_frame_no
        group.description = (
            f"{arrow} sweep {sweep_id} · fork @ frame {frame} · {len(names)} branches: {listed}"
        )
        group.tooltip = f"{group.description[2:]} (a click folds or unfolds them)"
        inside = any(e.run_id == self.model.run_id for e in branches)
        group.button_style = "info" if inside and sweep_id in self.folded else ""
        return group

    def fold(self, sweep_id: str) -> None:
        """Fold (or unfold) a sweep's branches under its node."""
        self.folded.symmetric_difference_update({sweep_id})
        self.update()

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
