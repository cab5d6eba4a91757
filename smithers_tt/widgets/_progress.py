"""A progress bar for long work in a notebook: an ipywidgets bar and a line of text.

Pass it wherever the library takes ``progress=`` (``db.verify``, ``db.gc``,
``lin.export_parquet``, ``db.lineage(snapshot=True)``)::

    with notebook_progress("verifying", unit="contents") as bar:
        db.verify(progress=bar)

``smithers_tt.cli._progress`` is the same for terminals.
"""

from __future__ import annotations

import time

import ipywidgets as W


class ProgressBar(W.HBox):
    """A bar (when the total is known) and ``label: done/total unit, seconds``; call it with
    the number of items just done, as the library's ``progress`` callbacks do. With no total
    and ``unit=""`` (work of one step, such as a rewind) it shows ``label, seconds``."""

    def __init__(self, label: str, *, total: int | None = None, unit: str = "rows") -> None:
        self.label, self.total, self.unit = label, total, unit
        self.done = 0
        self._started = time.monotonic()
        # The bar gives way to the text (ipywidgets draws it 300 px wide whatever the room: in
        # a narrow column it hid the end of the text, "undoing the rewind, 0.2 s do"), and
        # the text goes under the bar where even that leaves it too little room.
        self.bar = W.IntProgress(
            value=0,
            min=0,
            max=max(total or 0, 1),
            bar_style="info",
            layout=W.Layout(flex="1 1 120px", min_width="60px", max_width="300px", width="auto"),
        )
        self.bar.layout.visibility = "visible" if total is not None else "hidden"
        self.text = W.Label(layout=W.Layout(flex="0 0 auto", width="auto", max_width="100%"))
        super().__init__(
            [self.bar, self.text],
            layout=W.Layout(flex_flow="row wrap", align_items="center", width="100%"),
        )
        self.add_class("stt-progress")
        self._show()

    def __call__(self, n: int) -> None:
        """``n`` more items are done."""
        self.done += n
        if self.total is not None:
            self.bar.value = min(self.done, self.total)
        self._show()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def finish(self) -> None:
        """Mark the work as over: the bar fills and turns green."""
        self.bar.max = max(self.done, self.total or 0, 1)
        self.bar.value = self.bar.max
        self.bar.bar_style = "success"
        self.bar.layout.visibility = "visible"
        self._show(" done")

    def _show(self, suffix: str = "") -> None:
        seconds = time.monotonic() - self._started
        if self.total is None and not self.unit:  # one step: only that it is going on
            self.text.value = f"{self.label}, {seconds:.1f} s{suffix}"
            return
        of = "" if self.total is None else f"/{self.total}"
        self.text.value = f"{self.label}: {self.done}{of} {self.unit}, {seconds:.1f} s{suffix}"


def notebook_progress(label: str, *, total: int | None = None, unit: str = "rows") -> ProgressBar:
    """A :class:`ProgressBar`, displayed in the current cell's output, ready to pass as
    ``progress=``; use it as a context manager to show it full when the work is over."""
    from IPython.display import display

    bar = ProgressBar(label, total=total, unit=unit)
    display(bar)
    return bar
