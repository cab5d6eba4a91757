"""Rewind and fork of a run with many checkpoint refs, and snapshot storage per frame.

Run: ``./dev bench timetravel`` (``SMITHERS_TT_BENCH_QUICK=1`` for a smoke run).

* rewind to the middle and fork near the end of a run holding ~100,000 checkpoint refs, on
  SQLite and PostgreSQL (goal: under 2 s on SQLite, under 5 s on PostgreSQL), with the number
  of SQL statements each took;
* snapshot storage: bytes of frame rows per frame vs a naive full copy of the live state
  (nodes + attempts + refs rows) at every frame (goal: < 5%).
"""

from __future__ import annotations

import time

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
from smithers_tt.widgets._synthetic import large_run


def _count_statements(db: st.Database) -> list[int]:
    counter = [0]
    sa.event.listen(
        db.engine.sa,
        "before_cursor_execute",
        lambda *a, **k: counter.__setitem__(0, counter[0] + 1),
    )
    return counter


def _measure(label: str, url: str, frames: int, goal_s: float) -> list[list[object]]:
    db = st.connect(url)
    started = time.perf_counter()
    run_id = large_run(db, frames, payload_bytes=120)
    build = time.perf_counter() - started
    refs = len(db.get_run(run_id).checkpoints())
    counter = _count_statements(db)
    rows = []
    for name, action in (
        ("fork near the end", lambda: db.fork(run_id, frames - 5)),
        ("rewind to the middle", lambda: db.rewind(run_id, frames // 2, confirm=True)),
    ):
        counter[0] = 0
        t0 = time.perf_counter()
        action()
        seconds = time.perf_counter() - t0
        rows.append(
            [
                label,
                name,
                refs,
                f"{seconds:.2f}",
                counter[0],
                f"< {goal_s:g}",
                verdict(seconds < goal_s),
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


def main() -> None:
    frames = scaled(130_000, 8_000)
    rows = []
    with scratch_dir() as folder:
        rows += _measure("SQLite", f"sqlite:///{folder / 'tt.db'}", frames, 2.0)
    if pg_available() is None:
        with fresh_pg_database("timetravel") as url:
            rows += _measure("PostgreSQL", sqlalchemy_url(url), frames, 5.0)
    print_table(
        "Rewind and fork of a large run",
        ["backend", "operation", "refs", "seconds", "statements", "goal", "result"],
        rows,
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
