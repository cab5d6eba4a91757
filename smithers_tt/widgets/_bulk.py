"""Bulk work without the cyclic garbage collector in the way.

Opening a 100,000-frame run makes about half a million objects (frames, rows of snapshots,
the timeline's points) in one go. Each time the collector's youngest generation fills, it
runs, and every so often a full pass walks every object of the process: while the run is
read and folded, those passes cost more than the reading and folding themselves (measured:
reading the frames of a 100,000-frame run, 1.2 s of CPU with the collector, 0.5 s without).
The work done here makes no reference cycles, so pausing the collector for its length frees
nothing later than it would have been freed anyway.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block, if it runs (nested and concurrent
    blocks leave it as they found it: only the block that paused it starts it again)."""
    running = gc.isenabled()
    if running:
        gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()


@contextmanager
def one_read(db: Any) -> Iterator[None]:
    """Let the block's reads of ``db`` share one transaction (the store's
    ``Engine.reading``): a part that opens reads many small things, each of which would
    otherwise be a transaction of its own (a round trip or three each on PostgreSQL)."""
    engine = getattr(getattr(db, "store", None), "engine", None)
    reading = getattr(engine, "reading", None)
    if reading is None:  # not a smithers_tt database (a test's stand-in)
        yield
        return
    with reading():
        yield
