"""The run browser at scale: a page of runs on stores of 1,000 and 100,000 runs.

For each size, on a scratch SQLite file and on PostgreSQL when it is reachable: the time of
the first page (newest 25 runs), of a page deep in the list (after a cursor), of the first
page filtered by status (4% of runs failed), by workflow (1 of 5), by text in inputs and
errors (a scan: the one filter no index serves), and of building the whole
``RunBrowser`` widget. The goal: the browser opens in under 1 s at 100,000 runs, and an
unfiltered page costs about what it costs at 1,000 runs (ratio 100k / 1k near 1: the page
is read from the primary key, never counted or sorted).

Runs are inserted in bulk with plain SQL into a migrated store (only ``tt_runs`` rows: the
browser reads nothing else). ``python -m benchmarks browse`` (``SMITHERS_TT_BENCH_QUICK=1``
for a smoke run).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa

import smithers_tt
from benchmarks._common import (
    QUICK,
    fresh_pg_database,
    median_ms,
    note,
    pg_analyze,
    pg_available,
    print_table,
    scratch_dir,
    sqlalchemy_url,
    time_each,
    verdict,
)
from smithers_tt.store.for_widgets import RunFilter, run_listing

SIZES = (1_000, 10_000) if QUICK else (1_000, 100_000)
WORKFLOWS = ("support-triage", "code-review", "research-report", "data-cleanup", "demo-report")
GOAL_S = 1.0
REPEAT = 3 if QUICK else 7


def _fill(db: smithers_tt.Database, n: int) -> None:
    rng = random.Random(7)
    base = 1_790_000_000_000
    rows = []
    for i in range(n):
        now = base + i * 1_000
        failed = rng.random() < 0.04
        rows.append(
            {
                "run_id": f"{now:011x}{i:010x}",
                "workflow": WORKFLOWS[i % len(WORKFLOWS)],
                "status": "failed" if failed else "finished",
                "input_json": f'{{"topic": "case {i}"}}',
                "output_json": None if failed else '{"ok": true}',
                "error": "TimeoutError: no answer in 60 s" if failed else None,
                "owner_epoch": 1,
                "cancel_requested": False,
                "clock": 12,
                "created_at_ms": now,
                "updated_at_ms": now + 4_000,
            }
        )
    meta = sa.MetaData()
    runs = sa.Table("tt_runs", meta, autoload_with=db.engine.sa)
    with db.engine.sa.begin() as conn:
        for start in range(0, n, 10_000):
            conn.execute(runs.insert(), rows[start : start + 10_000])


def _cases(db: smithers_tt.Database) -> dict[str, Callable[[], object]]:
    deep = run_listing(db.engine, RunFilter(), limit=25)
    for _ in range(20):  # twenty pages in
        deep = run_listing(db.engine, RunFilter(), before=deep.older, limit=25)
    cursor = deep.older

    def browser() -> object:
        from smithers_tt.widgets import RunBrowser

        return RunBrowser(db).close()

    return {
        "first page": lambda: run_listing(db.engine, RunFilter(), limit=25),
        "page 21": lambda: run_listing(db.engine, RunFilter(), before=cursor, limit=25),
        "status=failed": lambda: run_listing(db.engine, RunFilter(statuses=("failed",)), limit=25),
        "workflow": lambda: run_listing(db.engine, RunFilter(workflow="code-review"), limit=25),
        "text (scan)": lambda: run_listing(db.engine, RunFilter(text="no such text"), limit=25),
        "RunBrowser(db)": browser,
    }


@contextmanager
def _stores(backend: str) -> Iterator[Callable[[int], tuple[smithers_tt.Database, str | None]]]:
    """Makes a new empty store per size: (the database, its libpq URL on PostgreSQL)."""
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            folder = stack.enter_context(scratch_dir())
            yield lambda n: (smithers_tt.connect(f"sqlite:///{folder}/runs-{n}.db"), None)
            return

        def make(n: int) -> tuple[smithers_tt.Database, str | None]:
            url = stack.enter_context(fresh_pg_database(f"browse{n}"))
            return smithers_tt.connect(sqlalchemy_url(url)), url

        yield make


def main() -> None:
    unreachable = pg_available()
    backends = ["sqlite"] + ([] if unreachable else ["postgresql"])
    if unreachable:
        note(f"PostgreSQL skipped: {unreachable}")
    for backend in backends:
        timings: dict[int, dict[str, float]] = {}
        with _stores(backend) as make:
            for n in SIZES:
                db, libpq_url = make(n)
                t0 = time.perf_counter()
                _fill(db, n)
                note(f"{backend}: {n:,} runs written in {time.perf_counter() - t0:.1f} s")
                if libpq_url is not None:
                    pg_analyze(libpq_url)
                cases = _cases(db)
                for fn in cases.values():
                    fn()  # warm-up
                timings[n] = {name: median_ms(time_each(fn, REPEAT)) for name, fn in cases.items()}
                db.close()
        small, large = SIZES
        rows = []
        for name in timings[large]:
            a, b = timings[small][name], timings[large][name]
            goal = verdict(b / 1000 < GOAL_S) if name == "RunBrowser(db)" else ""
            rows.append([name, f"{a:.1f}", f"{b:.1f}", f"{b / a:.2f}x", goal])
        print_table(
            f"Run browser, {backend} (median of {REPEAT}, ms)",
            ["read", f"{small:,} runs", f"{large:,} runs", "ratio", f"< {GOAL_S:.0f} s"],
            rows,
        )
