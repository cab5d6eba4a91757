"""Rows of a list with a button or two beside each: a header and rows whose columns line up.

The run browser and the triage view draw each row as ``[before] cells [after]``: fixed-width
widgets (a tick box, buttons) around one HTML table row of fixed-width columns and one
flexible column. The header is drawn the same way with empty boxes of the same widths, so
its columns stand over the rows' whatever the cell's width; a cell too long for its column
ends with an ellipsis (its whole text is on hover where a caller gives a title).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import ipywidgets as W

from smithers_tt.widgets._html import esc, wrap


def cells(values: Sequence[str], widths: Sequence[str], *, header: bool = False) -> str:
    """One table row of already-escaped HTML ``values`` in columns of ``widths`` (``auto``:
    the flexible one)."""
    tag = "th" if header else "td"
    body = "".join(
        f'<{tag} style="width:{w};text-align:left;padding:0 4px;overflow:hidden;'
        f'text-overflow:ellipsis;white-space:nowrap">{v}</{tag}>'
        for v, w in zip(values, widths, strict=True)
    )
    return wrap(f'<table style="table-layout:fixed;width:100%"><tr>{body}</tr></table>')


def titled(text: str) -> str:
    """``text`` escaped, with itself as its hover title (for a column that may cut it)."""
    return f'<span title="{esc(text)}">{esc(text)}</span>'


def stamp(ms: int) -> str:
    """A time for a narrow column: month, day, hour and minute in UTC, the whole time (year
    and seconds) on hover."""
    when = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return f'<span title="{when:%Y-%m-%d %H:%M:%S} UTC">{when:%m-%d %H:%M}</span>'


def line(
    before: Sequence[W.Widget], html: str, after: Sequence[W.Widget], css_class: str = ""
) -> W.HBox:
    """``before``, the cells, ``after`` on one line; the cells take what the others leave."""
    middle = W.HTML(html, layout=W.Layout(flex="1 1 0%", min_width="0", overflow="hidden"))
    for widget in (*before, *after):
        widget.layout.flex = "0 0 auto"
    row = W.HBox([*before, middle, *after], layout=W.Layout(align_items="center", width="100%"))
    if css_class:
        row.add_class(css_class)
    return row


def header(widths_before: Sequence[str], html: str, widths_after: Sequence[str]) -> W.HBox:
    """A header line whose columns stand over :func:`line`'s (empty boxes of the widths of
    the widgets beside the cells)."""

    def boxes(widths: Sequence[str]) -> list[W.Box]:
        return [W.Box(layout=W.Layout(width=w, margin="2px")) for w in widths]

    return line(boxes(widths_before), html, boxes(widths_after))
