"""The notebook debugger at scale: ``Debugger(db, run_id)`` on runs of 100 to 100,000 frames.

For each size: the time from ``Debugger(db, run_id)`` to a built widget (median of a few
builds after a warm-up, wall clock and this process's CPU time, which moves less with the
machine's load), the time to select another frame (what the slider and a click cost), and
the size of the figure sent to the browser (plotly JSON of the timeline). Goals: a 10,000-
and a 100,000-frame run open in under 1 s, and a frame is selected in under 50 ms.

Runs are written with :func:`smithers_tt.testing.large_run` (the same history a finished run
has, in bulk) on a scratch SQLite file, and on PostgreSQL when it is reachable.

``python -m benchmarks widgets`` (``SMITHERS_TT_BENCH_QUICK=1`` for a smoke run).
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from benchmarks._common import (
    QUICK,
    fresh_pg_database,
    note,
    pg_analyze,
    pg_available,
    print_table,
    scaled,
    scratch_dir,
    sqlalchemy_url,
    verdict,
)

SIZES = (100, 1_000, 10_000) if QUICK else (100, 1_000, 10_000, 100_000)
GOAL_SIZES = (10_000, 100_000)
"""Sizes with goals: 10,000 frames (the debugger's own issue), 100,000 (time travel at scale)."""
GOAL_S = 1.0
SELECT_GOAL_MS = 50.0


@contextmanager
def _databases() -> Iterator[list[tuple[str, str, str | None]]]:
    with scratch_dir() as tmp:
        urls = [("sqlite", f"sqlite:///{tmp / 'widgets.db'}", None)]
        reason = pg_available()
        if reason is None and not QUICK:
            with fresh_pg_database("widgets") as url:
                urls.append(("postgres", sqlalchemy_url(url), url))
                yield urls
            return
        if reason:
            note(f"PostgreSQL skipped: {reason}")
        yield urls


_BEGINS: dict[int, int] = {}
"""Transactions begun per SQLAlchemy engine (by id) since its counter was hooked."""


def _count_begin(conn) -> None:  # type: ignore[no-untyped-def]
    _BEGINS[id(conn.engine)] = _BEGINS.get(id(conn.engine), 0) + 1


@contextmanager
def _transactions(db) -> Iterator[Callable[[], int]]:  # type: ignore[no-untyped-def]
    """How many transactions this process begins on the database inside the block (on
    PostgreSQL each costs round trips of its own besides its statements): the function it
    gives returns the count so far.

    The listener is added once and never removed: removing it while the history read behind
    the newest frame began a transaction in its thread raced SQLAlchemy's walk over its
    listeners ('deque mutated during iteration'), which failed that read about every other
    build, and the first step back then read the whole history again (seconds)."""
    import sqlalchemy as sa

    engine = db.store.engine.sa
    if not sa.event.contains(engine, "begin", _count_begin):
        sa.event.listen(engine, "begin", _count_begin)
    start = _BEGINS.get(id(engine), 0)
    yield lambda: _BEGINS.get(id(engine), 0) - start


def _build(db, run_id: str):  # type: ignore[no-untyped-def]
    """A debugger, its build's wall and CPU seconds, how long after the build its history
    read behind the newest frame took (0 when none was needed: it is waited for, so that the
    next build does not share the CPU with it), and the transactions the build began."""
    from smithers_tt.widgets import Debugger

    with _transactions(db) as begun:
        wall, cpu = time.perf_counter(), time.process_time()
        dbg = Debugger(db, run_id, live=False)
        built = time.perf_counter()
        wall, cpu = built - wall, time.process_time() - cpu
        transactions = begun()
    dbg.model.history_ready()
    return dbg, wall, cpu, time.perf_counter() - built, transactions


def _first_select(db, run_id: str, frame: int) -> float:  # type: ignore[no-untyped-def]
    """Seconds to select ``frame`` right after a build, while a long run's history is still
    read behind its newest frame (a person who clicks at once); the read is then waited for."""
    from smithers_tt.widgets import Debugger

    dbg = Debugger(db, run_id, live=False)
    try:
        started = time.perf_counter()
        dbg.select_frame(frame)
        return time.perf_counter() - started
    finally:
        dbg.model.history_ready()
        dbg.close()


def _search(dbg) -> list[float]:  # type: ignore[no-untyped-def]
    """Milliseconds of a kind filter, a text search, and a payload search (cold, then warm)."""
    search = dbg.frame_table.search
    out = []
    for query in (
        {"kind": "checkpoint"},
        {"text": "attempt #2"},
        {"text": "nothing-matches", "payloads": True},
        {"text": "nothing-matches", "payloads": True},
        {"text": "nothing-matches", "payloads": True},
    ):
        started = time.perf_counter()
        search.find(**query)
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    import plotly.io as pio

    import smithers_tt as st
    from smithers_tt.testing import large_run

    rounds = scaled(5, 2)
    rows = []
    searches: list[list[object]] = []
    with _databases() as urls:
        for backend, url, libpq in urls:
            db = st.connect(url)
            try:
                runs = {n: large_run(db, n) for n in SIZES}
                if libpq is not None:
                    pg_analyze(libpq)
                cold = _build(db, runs[SIZES[0]])[1]  # imports plotly, anywidget, ipywidgets
                note(f"{backend}: first Debugger in this process (imports included) {cold:.2f} s")
                for n in SIZES:
                    walls, cpus, behind = [], [], []
                    for _ in range(rounds):
                        dbg, wall, cpu, read, transactions = _build(db, runs[n])
                        walls.append(wall)
                        cpus.append(cpu)
                        behind.append(read)
                    first_old = _first_select(db, runs[n], n // 100)
                    first_middle = _first_select(db, runs[n], n // 2)
                    figure_bytes = len(pio.to_json(dbg.timeline.figure, validate=False))
                    points = sum(len(t.x) for t in dbg.timeline.figure.data)
                    # the first step back from the newest frame: after the history read
                    # behind it (long runs), or reading it now (short ones)
                    started = time.perf_counter()
                    dbg.select_frame(max(n - 2, 0))
                    first_step = time.perf_counter() - started
                    picks = random.Random(n).sample(range(n), min(20, n))
                    steps, step_cpus = [], []
                    with _transactions(db) as begun:
                        for frame in picks:
                            started, cpu = time.perf_counter(), time.process_time()
                            dbg.select_frame(frame)
                            steps.append(time.perf_counter() - started)
                            step_cpus.append(time.process_time() - cpu)
                    select_transactions = begun() / len(picks)
                    median = statistics.median(walls)
                    search = _search(dbg)
                    searches.append([backend, n, *search])
                    rows.append(
                        [
                            backend,
                            n,
                            median,
                            statistics.median(cpus),
                            statistics.median(behind),
                            first_step,
                            first_old * 1000,
                            first_middle * 1000,
                            statistics.median(steps) * 1000,
                            max(steps) * 1000,
                            max(step_cpus) * 1000,
                            transactions,
                            select_transactions,
                            figure_bytes / 1024,
                            points,
                            "yes" if dbg.timeline.data.aggregated else "no",
                            verdict(median < GOAL_S) if n in GOAL_SIZES else "",
                            verdict(statistics.median(steps) * 1000 < SELECT_GOAL_MS)
                            if n in GOAL_SIZES
                            else "",
                            os.getloadavg()[0],
                        ]
                    )
                    dbg.close()
            finally:
                db.close()
    print_table(
        f"Debugger(db, run_id) to a built widget (median of {rounds} builds after a warm-up)",
        [
            "backend",
            "frames",
            "build s",
            "build CPU s",
            "read behind s",
            "first step back s",
            "first select 1% ms",
            "first select 50% ms",
            "select frame ms",
            "select max ms",
            "select max CPU ms",
            "build txns",
            "select txns",
            "figure KiB",
            "points",
            "binned",
            f"goal < {GOAL_S:.0f} s",
            f"select median < {SELECT_GOAL_MS:.0f} ms",
            "load avg",
        ],
        rows,
    )
    print_table(
        "Frame table: filter and search (ms)",
        ["backend", "frames", "kind filter", "text search", "payload search", "again", "again"],
        searches,
    )
    note("PostgreSQL: ANALYZEd after the runs are written, as autovacuum would do within a")
    note("  minute (without statistics its plans sort on disk: 0.3-0.5 s more per build)")
    note("read behind: a long run (>= PRELOAD_AT frames) opens on its newest frame without")
    note("  its history, then reads and folds it in a thread; seconds from the build to its end")
    note("first step back: selecting the frame before the newest once that read is done (a")
    note("  shorter run read its history for its timeline while it was built)")
    note("first select 1% / 50%: frame n/100 / n/2 selected right after a build (a long run's")
    note("  history still read behind; the selection waits for the frames up to it only)")
    note("select frame: median (and max) over 20 random frames (inspector, diff, timeline")
    note("  line, slider, frame table row); goal: every selection under 50 ms at 10,000 frames")
    note("payload search reads each checkpoint's content once (then it is cached as text),")
    note("  at most 0.3 s of reading per search; the table says how many were searched")
    note("select max CPU ms: this process's CPU time, which the machine's load moves less")
    note("build / select txns: transactions begun by a build / per selection (the parts'")
    note("  reads share one: Engine.reading); on PostgreSQL each costs its own round trips")
    note("figure KiB: plotly JSON of the timeline (data + layout) sent to the browser")
