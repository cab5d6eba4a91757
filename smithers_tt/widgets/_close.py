"""Closing widgets for good.

A widget's comm (and its place in ipywidgets' registry of open widgets) lives until the widget
is closed, and closing a widget closes nothing it holds: not a box's children, not its
``layout``, not a button's ``style``. A view that replaces widgets (the fork tree's buttons,
the checkpoint editor's fields, the timeline's figures) closes those it dropped, and
:meth:`~smithers_tt.widgets.Debugger.close` closes everything it still holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import ipywidgets as W


def held(widget: Any) -> Iterator[Any]:
    """The widgets ``widget`` holds in its synced state (children, layout, style...)."""
    # the traits' own values: a plotly FigureWidget's ``layout`` attribute is the figure's
    # layout, and hides the ipywidgets Layout the widget also holds
    values = getattr(widget, "_trait_values", {})
    for name in widget.keys:
        value = values.get(name)
        if isinstance(value, W.Widget):
            yield value
        elif isinstance(value, list | tuple):
            yield from (v for v in value if isinstance(v, W.Widget))


def close_all(widgets: Iterable[Any]) -> None:
    """Close each of ``widgets`` and every widget it holds, however deep (each once)."""
    seen: set[int] = set()
    stack = list(widgets)
    while stack:
        widget = stack.pop()
        if id(widget) in seen:
            continue
        seen.add(id(widget))
        stack.extend(held(widget))
        widget.close()


def show_only(box: Any, children: Iterable[Any]) -> None:
    """Show ``children`` in ``box``, closing what it showed before and shows no longer."""
    old = box.children
    box.children = tuple(children)
    kept = {id(child) for child in box.children}
    close_all(child for child in old if id(child) not in kept)
