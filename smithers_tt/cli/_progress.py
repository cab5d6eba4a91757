"""Progress bars for long work in a terminal (rich), on standard error.

The library reports progress through a callback, ``progress(n)``: ``n`` more items (rows,
contents, tables, runs) are done (see :data:`smithers_tt.store._maintenance.Progress`). This
module turns that callback into a bar; ``smithers_tt.widgets.notebook_progress`` is the same
for notebooks. Nothing is drawn when standard error is not a terminal (scripts, pipes, CI), so
``--json`` output and logs stay clean, even with ``FORCE_COLOR`` set.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

Advance = Callable[[int], None]
"""``advance(n)``: ``n`` more items are done."""


def _console() -> Console:
    return Console(stderr=True)


@contextmanager
def progress_bar(label: str, *, total: int | None = None, unit: str = "rows") -> Iterator[Advance]:
    """A bar on standard error while the block runs; yields the callback that advances it.

    Args:
        label: what is being done ("verifying").
        total: how many items there are, when known; otherwise the bar pulses and counts.
        unit: what an item is, shown after the count when the total is unknown ("" for work
            that is one step, such as a rewind: the bar then only shows it is going on).
    """
    console = _console()
    # A real terminal only: FORCE_COLOR (CI logs) colours output, it does not ask for a bar.
    if not (sys.stderr.isatty() and console.is_terminal):
        yield lambda _n: None
        return
    columns: list[ProgressColumn] = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn()]
    if total is not None:
        columns.append(MofNCompleteColumn())
    elif unit:
        columns.append(TextColumn(f"{{task.completed}} {unit}"))
    with Progress(*columns, TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)
        if total is None:  # the work is over: show the bar full
            done = bar.tasks[0].completed
            bar.update(task, total=done or 1, completed=done or 1)
