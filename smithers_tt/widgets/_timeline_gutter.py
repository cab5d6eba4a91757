"""The timeline's breakpoint gutter: left of frame 0, each node row has two toggles, before
and after the node (a column of its own, filled red when set; every task of the run has a
row, run or not). A click turns one on or off through ``model.breakpoints``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from smithers_tt.widgets._html import esc
from smithers_tt.widgets._timeline_data import _Rows, _Trace

GUTTER = 0.09
"""The width of the breakpoint toggles' column (a fraction of the plot's width: in an 800 px
window two toggles and their captions side by side)."""

BREAK_ON = "#d62728"


@dataclass
class _Gutter(_Trace):
    toggles: list[tuple[str, str]] = field(default_factory=list)
    """(node, ``before`` / ``after``) of each point."""


def breakpoint_gutter(rows: _Rows, marks: Any, theme: dict[str, Any]) -> _Gutter:
    """Two toggles on each node row, before and after the node (filled red when set): a
    click turns the breakpoint on or off for the node (all its iterations)."""
    gutter = _Gutter("breakpoints", "marker")
    colours, symbols = [], []
    for key, row in rows.index.items():
        node_id = key[0] if isinstance(key, tuple) else key
        for x, when in enumerate(("before", "after")):
            on = marks.is_set(node_id, when)
            state = "on: click to remove it" if on else "off: click to set it"
            text = f"<b>break {when} {esc(node_id)}</b><br>{state}"
            gutter.point(x, row, text, None)
            gutter.toggles.append((node_id, when))
            colours.append(BREAK_ON if on else theme["muted"])  # an open circle's ring
            symbols.append("circle" if on else "circle-open")
    gutter.style = {
        "mode": "markers",
        "marker": {
            "symbol": symbols,
            "size": 10,
            "color": colours,
            "line": {"width": 1.5, "color": colours},
        },
    }  # fmt: skip
    return gutter


def gutter_axis(colours: dict[str, Any]) -> dict[str, Any]:
    """The toggles' own x axis: "before" and "after" columns, left of the frames."""
    return {
        **colours["xaxis"],
        "domain": [0, GUTTER],
        "range": [-0.6, 1.6],
        "tickvals": [0, 1],
        "ticktext": ["before", "after"],
        "tickangle": -90,
        "tickfont": {"size": 9},
        "automargin": True,
        "fixedrange": True,
        "showgrid": False,
        "zeroline": False,
        "title": {**colours["xaxis"]["title"], "text": ""},
    }
