"""A list that opens a run's debugger in its own place, with a Back button to the list.

The run browser and the triage view both show a list; opening one of its runs hides the list
(with its filters and page as they were) and shows that run's debugger, and Back closes the
debugger and shows the list again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as W


class InPlace:
    """``widget`` shows ``list_box`` or, while a run is open, Back and that run's debugger
    (which prices model calls by ``prices``, as ``db.debug(run, prices=...)`` does)."""

    def __init__(
        self,
        db: Any,
        list_box: W.Widget,
        back_to: str,
        on_back: Callable[[], None],
        prices: Any = None,
    ) -> None:
        self.db = db
        self.prices = prices
        self.list_box = list_box
        self.debugger: Any = None
        self.back_button = W.Button(description=f"← Back to {back_to}")
        self.back_button.add_class("stt-back")
        self.back_button.on_click(lambda _: self.back())
        self.debug_box = W.VBox([self.back_button], layout=W.Layout(display="none"))
        self.widget = W.VBox([list_box, self.debug_box], layout=W.Layout(width="100%"))
        self._on_back = on_back

    def open(self, run_id: str, workflow: Any = None, frame_no: int | None = None) -> Any:
        """Show ``run_id``'s debugger (at ``frame_no``, if given) instead of the list."""
        from smithers_tt.widgets._debugger import Debugger

        self.close()
        self.debugger = Debugger(self.db, run_id, workflow, live=False, prices=self.prices)
        if frame_no is not None:
            self.debugger.select_frame(frame_no)
        self.debug_box.children = [self.back_button, self.debugger]
        self.list_box.layout.display = "none"
        self.debug_box.layout.display = None
        return self.debugger

    def back(self) -> None:
        """Close the debugger and show the list again."""
        self.close()
        self.debug_box.layout.display = "none"
        self.list_box.layout.display = None
        self._on_back()

    def close(self) -> None:
        """Close the open debugger, if any."""
        if self.debugger is not None:
            self.debugger.close()
            self.debugger = None
        self.debug_box.children = [self.back_button]
