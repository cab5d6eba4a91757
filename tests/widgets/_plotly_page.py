"""A page that shows a timeline's figures as JupyterLab 4, ipywidgets 8, anywidget 0.11 and
plotly 7's widget bundle do, fed with the kernel's real comm messages (no test in here).

What it keeps of theirs (read from their bundled JavaScript):

- The page handles the kernel's messages one at a time, in order (JupyterLab awaits each
  comm's handler before the next message).
- A figure's page model whose module took more than 2 s to load (to import and initialize:
  the timeline's loader awaits plotly's bundle, compiled by a page's first figure) drops every
  message after the one that opened its comm (anywidget's ``_handle_comm_msg`` awaits
  ``Runtime.ready``, which its 2 s timeout rejected for good); its view still plots, from that
  opening state.
- A view is created when the box that holds the timeline names its figure, and plots later
  (its module loads first): it plots the model's ``_widget_layout`` as it is then, and reports
  the draw with the model's ``_last_layout_edit_id`` as it was then. From then on it applies
  each layout edit its model hears (``_py2js_relayout``, and ``_py2js_update``, which an
  ``update()`` of a shape sends) and reports that edit's id. A view removed from the box
  plots and reports nothing more.
- plotly's model-level handler of an edit changes a copy of ``_widget_layout`` (its ``get``
  deserialises anew): only a whole ``_widget_layout`` sent by the kernel changes it.
- The page's reports reach the kernel in order, as the bundle sends them (``set_state`` of
  the key it sets).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

import comm
from ipywidgets.widgets.widget import _instances

from ._support import plotly_drawn_key

EDITS = {"_py2js_relayout": "relayout_data", "_py2js_update": "layout_data"}
"""The kernel's layout edits a view applies, and where each holds its paths and values."""
SHAPE_PATH = re.compile(r"shapes(?:\[(\d+)\]|\.(\d+))\.(\w+)")
"""A shape's property as edits name it: ``shapes[0].x0`` or ``shapes.0.x0``."""


@dataclass
class Model:
    """The page's copy of one widget's state."""

    state: dict[str, Any]
    hears: bool = True


@dataclass
class View:
    """A plotly view in the page: ``layout`` is what it drew (None until it plots)."""

    model_id: str
    layout: dict[str, Any] | None = None


@dataclass
class Page:
    """The page; ``deaf(n)`` says whether the n-th figure opened (from 0) is one whose module
    took more than 2 s to load."""

    box_id: str = ""
    deaf: Any = lambda n: False
    inbox: list[tuple[str, str, Any]] = field(default_factory=list)
    reports: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    models: dict[str, Model] = field(default_factory=dict)
    views: list[View] = field(default_factory=list)
    figures: int = 0

    def comm(self, **kwargs: Any) -> Any:
        """What ``comm.create_comm`` makes while the page is on: a comm that posts here."""
        page = self

        class PageComm(comm.base_comm.BaseComm):
            def publish_msg(self, msg_type: str, data: Any = None, *args: Any, **kw: Any) -> None:
                page.inbox.append((self.comm_id, msg_type, data))

        return PageComm(**kwargs)

    def handle(self, count: int | None = None) -> None:
        """Handle the next ``count`` messages from the kernel (all when None)."""
        while self.inbox and (count is None or count > 0):
            count = None if count is None else count - 1
            model_id, kind, data = self.inbox.pop(0)
            if kind == "comm_open":
                self._opened(model_id, dict(data["state"]))
            elif kind == "comm_close":
                self.models.pop(model_id, None)
            elif data.get("method") == "update" and self.models[model_id].hears:
                self._updated(model_id, data["state"])

    def _opened(self, model_id: str, state: dict[str, Any]) -> None:
        hears = True
        if "_widget_layout" in state:  # a figure
            hears = not self.deaf(self.figures)
            self.figures += 1
        self.models[model_id] = Model(state, hears)
        if model_id == self.box_id:
            self._laid_out(state.get("children") or [])

    def _updated(self, model_id: str, state: dict[str, Any]) -> None:
        model = self.models[model_id]
        model.state.update(state)
        if model_id == self.box_id and "children" in state:
            self._laid_out(state["children"])
        for key, paths in EDITS.items():
            edit = state.get(key)
            for view in self.views:
                if edit and view.model_id == model_id and view.layout is not None:
                    for path, value in (edit.get(paths) or {}).items():
                        found = SHAPE_PATH.fullmatch(path)
                        assert found, f"an edit of the page's view the test does not model: {path}"
                        index, key_of = int(found[1] or found[2]), found[3]
                        view.layout["shapes"][index][key_of] = value
                    self.reports.append((model_id, edit["layout_edit_id"]))

    def _laid_out(self, children: list[str]) -> None:
        ids = [child.removeprefix("IPY_MODEL_") for child in children]
        self.views = [v for v in self.views if v.model_id in ids]
        shown = {v.model_id for v in self.views}
        self.views += [View(model_id) for model_id in ids if model_id not in shown]

    def plot(self) -> None:
        """Every view not yet plotted plots now (its module loaded)."""
        for view in self.views:
            if view.layout is None:
                state = self.models[view.model_id].state
                view.layout = copy.deepcopy(state["_widget_layout"])
                self.reports.append((view.model_id, state["_last_layout_edit_id"]))

    def report(self, count: int | None = None) -> None:
        """Deliver the next ``count`` reports of a draw to the kernel (all when None)."""
        while self.reports and (count is None or count > 0):
            count = None if count is None else count - 1
            model_id, edit = self.reports.pop(0)
            figure = _instances.get(model_id)
            if figure is not None:  # not closed meanwhile
                figure.set_state({plotly_drawn_key(): {"layout_delta": {}, "layout_edit_id": edit}})

    def settle(self) -> None:
        """Until nothing is left to do: handle every message, plot, deliver every report."""
        while self.inbox or self.reports or any(v.layout is None for v in self.views):
            self.handle()
            self.plot()
            self.report()

    def line(self) -> Any:
        """The selected-frame line the page shows (None when it shows no plotted figure)."""
        plotted = [v for v in self.views if v.layout is not None]
        assert len(plotted) <= 1, "the timeline's box shows more than one figure"
        return plotted[0].layout["shapes"][0]["x0"] if plotted else None

    def shown(self) -> str | None:
        """The model id of the figure the page's timeline box shows."""
        return self.views[0].model_id if self.views else None
