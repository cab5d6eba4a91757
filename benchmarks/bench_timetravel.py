"""Rewind and fork of a run with many checkpoint refs, fork vs DBOS, snapshot storage.

Run: ``./dev bench timetravel`` (``SMITHERS_TT_BENCH_QUICK=1`` for a smoke run).

* rewind to the middle, its undo, and fork near the end of a run holding 100,000 checkpoint
  refs (155,000 frames of :func:`large_run`), on SQLite and PostgreSQL (goals: fork under 2 s
  on SQLite and 5 s on PostgreSQL, rewind under 1 s on both (issue 38), the undo at most 1.5x
  that rewind), with the number of SQL statements each took;
* a rewind of the last 5 frames and its undo at 1,000, 10,000 and 100,000 refs (goal: at
  100,000 at most 1.3x the cost at 1,000);
* fork at frame 1,995 of a 2,000-frame run vs DBOS ``fork_workflow`` at step 1,995 of a
  2,000-step workflow (each step returns a state of the size our checkpoints have), on each
  backend in one run (goal: ours at least 20x faster). DBOS's time is the
  ``DBOS.fork_workflow`` call, which returns once the copy of the earlier steps is committed;
  the forked workflow then runs its last 5 steps in the background and is awaited, untimed,
  before the next fork;
* snapshot storage: bytes of frame rows per frame vs a naive full copy of the live state
  (nodes + attempts + refs rows) at every frame (goal: < 5%).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

import smithers_tt as st
from benchmarks._common import (
    fresh_pg_database,
    pg_available,
    print_table,
    scaled,
    scratch_dir,
    sqlalchemy_url,
    verdict,
)
from smithers_tt.testing import large_run


def _count_statements(db: st.Database) -> list[int]:
    counter = [0]
    sa.event.listen(
        db.engine.sa,
        "before_cursor_execute",
        lambda *a, **k: counter.__setitem__(0, counter[0] + 1),
    )
    return counter


REFS = 100_000
"""Checkpoint refs of the large run (:func:`large_run` with :data:`LARGE_FRAMES` frames)."""

LARGE_FRAMES = 155_000
"""Frames of a :func:`large_run` holding exactly :data:`REFS` refs (about 65% of its frames
are checkpoints; the rest start, end and retry attempts and record node states)."""


UNDO_GOAL = 1.5
"""The undo of the rewind to the middle costs at most this many times that rewind."""


def _measure(label: str, url: str, frames: int, goals_s: tuple[float, float]) -> list[list[object]]:
    """Fork near the end, materialise that fork, and rewind to the middle (goals in seconds
    for the fork and the rewind)."""
    db = st.connect(url)
    started = time.perf_counter()
    run_id = large_run(db, frames, payload_bytes=120)
    build = time.perf_counter() - started
    refs = len(db.get_run(run_id).checkpoints())
    if frames == LARGE_FRAMES and refs < REFS:
        raise AssertionError(f"the large run holds {refs} refs, fewer than {REFS}")
    counter = _count_statements(db)
    rows = []
    forked: list[str] = []
    for name, action, goal_s in (
        ("fork near the end", lambda: forked.append(db.fork(run_id, frames - 5).id), goals_s[0]),
        # A fork by reference copies nothing; this is what its first resume (or a rewind of
        # its parent below its fork point) pays once: its own copy of all it inherits.
        ("materialise that fork", lambda: db.materialize(forked[0]), None),
        # The fork above has its own history now: the rewind is measured alone (force: its
        # fork point goes).
        (
            "rewind to the middle",
            lambda: db.rewind(run_id, frames // 2, confirm=True, force=True),
            goals_s[1],
        ),
        # Issue 38: the undo puts back what that rewind took away, at most UNDO_GOAL times
        # its cost (goal in seconds, from the rewind measured just before).
        ("undo that rewind", lambda: db.undo_rewind(run_id), UNDO_GOAL),
    ):
        counter[0] = 0
        t0 = time.perf_counter()
        action()
        seconds = time.perf_counter() - t0
        if name == "undo that rewind":
            goal_s = UNDO_GOAL * float(rows[-1][3])
            if len(db.get_run(run_id).checkpoints()) != refs:
                raise AssertionError("the undo did not put back every ref")
        rows.append(
            [
                label,
                name,
                refs,
                f"{seconds:.2f}",
                counter[0],
                "" if goal_s is None else f"< {goal_s:g}",
                "" if goal_s is None else verdict(seconds < goal_s),
            ]
        )
    rows.append([label, f"(built {frames} frames in {build:.1f} s)", "", "", "", "", ""])
    db.close()
    return rows


def _storage(frames: int) -> list[object]:
    """Frame rows stored vs rows a naive per-frame full copy would store (200 nodes)."""
    nodes = tuple(f"n{i:03d}" for i in range(200))
    with scratch_dir() as folder:
        db = st.connect(f"sqlite:///{folder / 's.db'}")
        run_id = large_run(db, frames, nodes=nodes, payload_bytes=60)
        frame_rows = len(db.store.frames(run_id))
        snap = db.snapshot(run_id)
        live = snap.size  # nodes + attempts + refs at the end
        # a naive snapshot copies the state visible at each frame; it grows over the run
        naive = sum(db.snapshot(run_id, n).size for n in range(0, frames, max(1, frames // 50)))
        naive = naive * max(1, frames // 50)
        db.close()
    ratio = frame_rows / max(1, naive)
    return ["200 nodes", frames, frame_rows, live, naive, f"{ratio:.4f}", verdict(ratio < 0.05)]


# --- rewind of the last frames, at three sizes --------------------------------------------

LAST_K = 5
"""Frames taken away by the small rewind (and put back by its undo)."""

SIZES = (1_550, 15_500, LARGE_FRAMES)
"""Frames of the three :func:`large_run` sizes: about 1,000, 10,000 and 100,000 refs."""

LAST_K_GOAL = 1.3
"""The last-5 rewind (and its undo) at 100,000 refs costs at most this times its cost at
1,000 refs: it changes what 5 frames touched, whatever the run's size."""

REPEATS = 5


def _last_k(label: str, connect: Callable[[], Iterator[str]], sizes: tuple[int, ...]) -> list:
    """Median seconds of a fork :data:`LAST_K` frames before the end, of a rewind of the last
    :data:`LAST_K` frames and of its undo, at each size (one run of each size, forked,
    rewound and undone :data:`REPEATS` times)."""
    found = []
    for frames in sizes:
        with connect() as url:
            db = st.connect(url)
            run_id = large_run(db, frames, payload_bytes=120)
            refs = len(db.get_run(run_id).checkpoints())
            db.fork(run_id, frames - LAST_K)  # untimed: the bulk write's WAL settles first
            forks, rewinds, undos = [], [], []
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                db.fork(run_id, frames - LAST_K)
                t1 = time.perf_counter()
                db.rewind(run_id, frames - LAST_K, confirm=True)
                t2 = time.perf_counter()
                db.undo_rewind(run_id)
                forks.append(t1 - t0)
                rewinds.append(t2 - t1)
                undos.append(time.perf_counter() - t2)
            db.close()
        times = (statistics.median(forks), statistics.median(rewinds), statistics.median(undos))
        found.append((frames, refs, times))
    rows = []
    base = found[0][2]
    for frames, refs, times in found:
        ratios = [t / b for t, b in zip(times, base, strict=True)]
        last = frames == found[-1][0] and len(found) > 1
        rows.append(
            [
                label,
                frames,
                refs,
                *(f"{t * 1000:.1f}" for t in times),
                " / ".join(f"{r:.2f}x" for r in ratios),
                f"<= {LAST_K_GOAL:g}x" if last else "",
                " / ".join(verdict(r <= LAST_K_GOAL) for r in ratios) if last else "",
            ]
        )
    return rows


@contextmanager
def _sqlite_url() -> Iterator[str]:
    with scratch_dir() as folder:
        yield f"sqlite:///{folder / 'last.db'}"


@contextmanager
def _pg_url() -> Iterator[str]:
    with fresh_pg_database("ttlast") as url:
        yield sqlalchemy_url(url)


# --- fork vs DBOS fork_workflow ------------------------------------------------------------

DBOS_GOAL = 20.0
"""Ours must fork at least this many times faster than DBOS's ``fork_workflow``."""

FORKS = 15
"""Forks timed per side (the median is reported)."""

WARM_UP = 3
"""Untimed forks before the timed ones, on each side (the first commits after writing a run
in bulk also flush that write: SQLite checkpoints its WAL, PostgreSQL writes it out)."""

_DBOS_WORKFLOW: Callable[[int], Any] | None = None


def _dbos_workflow() -> Callable[[int], Any]:
    """A workflow of ``n`` steps, each returning a state like our synthetic checkpoints;
    registered once per process (DBOS keeps a global registry)."""
    global _DBOS_WORKFLOW
    if _DBOS_WORKFLOW is None:
        from dbos import DBOS

        @DBOS.step()
        def bench_tt_step(step: int) -> dict[str, Any]:
            digest = f"{step:08d}" * 8
            return {"node": "research", "step": step, "scratch": (digest * 2)[:120]}

        @DBOS.workflow()
        def bench_tt_workflow(n: int) -> int:
            for step in range(n):
                bench_tt_step(step)
            return n

        _DBOS_WORKFLOW = bench_tt_workflow
    return _DBOS_WORKFLOW


@contextmanager
def _dbos(url: str) -> Iterator[Any]:
    """DBOS launched on ``url`` (a process-wide singleton: one backend at a time); JSON
    serialisation (DBOS's portable serializer), no pickle."""
    from dbos import DBOS
    from dbos._serialization import DBOSPortableJSON

    _dbos_workflow()
    DBOS(
        config={
            "name": "smithers-tt-bench-timetravel",
            "system_database_url": url,
            "log_level": "WARNING",
            "serializer": DBOSPortableJSON,
        }
    )
    try:
        DBOS.launch()
        yield DBOS
    finally:
        DBOS.destroy()


def _median_s(action: Callable[[], Callable[[], None]]) -> float:
    """Median seconds of :data:`FORKS` calls of ``action``, after :data:`WARM_UP` untimed
    ones; each call returns a function that waits (untimed) for whatever it left running."""
    times = []
    for turn in range(WARM_UP + FORKS):
        t0 = time.perf_counter()
        settle = action()
        if turn >= WARM_UP:
            times.append(time.perf_counter() - t0)
        settle()
    return statistics.median(times)


def _fork_vs_dbos(label: str, ours_url: str, dbos_url: str, steps: int) -> list[object]:
    """Each side forks alone: DBOS, launched, keeps committing in the background, which on a
    shared PostgreSQL server makes every other commit wait (ours took 3 to 6 ms instead of
    0.2 for its COMMIT while DBOS was launched and idle). So both histories are written
    first; DBOS forks, is shut down, and then ours forks."""
    at = steps - 5
    db = st.connect(ours_url)
    try:
        run_id = large_run(db, steps, payload_bytes=120)
        refs = len(db.get_run(run_id).checkpoints())
        with _dbos(dbos_url) as dbos:
            handle = dbos.start_workflow(_dbos_workflow(), steps)
            if handle.get_result() != steps:
                raise AssertionError("the DBOS workflow did not finish")
            workflow_id = handle.get_workflow_id()
            recorded = len(dbos.list_workflow_steps(workflow_id))

            def dbos_fork() -> Callable[[], None]:
                fork = dbos.fork_workflow(workflow_id, at)
                return lambda: fork.get_result()

            theirs = _median_s(dbos_fork)
        ours = _median_s(lambda: (db.fork(run_id, at), lambda: None)[1])
    finally:
        db.close()
    ratio = theirs / ours
    return [
        label,
        f"frame {at:,} of {steps:,} ({refs:,} refs)",
        f"step {at:,} of {recorded:,}",
        f"{ours * 1000:.1f}",
        f"{theirs * 1000:.1f}",
        f"{ratio:.1f}x",
        f">= {DBOS_GOAL:g}x",
        verdict(ratio >= DBOS_GOAL),
    ]


def main() -> None:
    frames = scaled(LARGE_FRAMES, 8_000)
    rows = []
    with scratch_dir() as folder:
        rows += _measure("SQLite", f"sqlite:///{folder / 'tt.db'}", frames, (2.0, 1.0))
    if pg_available() is None:
        with fresh_pg_database("timetravel") as url:
            rows += _measure("PostgreSQL", sqlalchemy_url(url), frames, (5.0, 1.0))
    print_table(
        "Rewind and fork of a large run",
        ["backend", "operation", "refs", "seconds", "statements", "goal", "result"],
        rows,
    )

    sizes = tuple(scaled(n, n // 10) for n in SIZES)
    last = _last_k("SQLite", _sqlite_url, sizes)
    if pg_available() is None:
        last += _last_k("PostgreSQL", _pg_url, sizes)
    print_table(
        f"Fork {LAST_K} frames before the end, rewind of the last {LAST_K} frames and its undo"
        f" (median of {REPEATS}), by run size",
        [
            "backend",
            "frames",
            "refs",
            "fork ms",
            "rewind ms",
            "undo ms",
            "vs smallest",
            "goal",
            "result",
        ],
        last,
    )

    steps = scaled(2_000, 400)
    forks = []
    with scratch_dir() as folder:
        forks.append(
            _fork_vs_dbos(
                "SQLite",
                f"sqlite:///{folder / 'ours.db'}",
                f"sqlite:///{folder / 'dbos.db'}",
                steps,
            )
        )
    if pg_available() is None:
        with fresh_pg_database("ttours") as ours, fresh_pg_database("ttdbos") as theirs:
            forks.append(_fork_vs_dbos("PostgreSQL", sqlalchemy_url(ours), theirs, steps))
    print_table(
        f"Fork near the end: ours vs DBOS fork_workflow (median of {FORKS})",
        ["backend", "ours", "DBOS", "ours ms", "DBOS ms", "DBOS / ours", "goal", "result"],
        forks,
    )
    print_table(
        "Snapshot storage (rows)",
        [
            "run",
            "frames",
            "frame rows",
            "live rows at end",
            "naive copy rows",
            "ratio",
            "goal < 5%",
        ],
        [_storage(scaled(2_000, 500))],
    )


if __name__ == "__main__":
    main()
