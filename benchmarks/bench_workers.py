"""Worker processes sharing runs on PostgreSQL: throughput with 1, 2 and 4 processes, and
how long a submitted run waits before a worker claims it.

Run with ``./dev bench workers`` (or ``python -m benchmarks workers``);
``SMITHERS_TT_BENCH_QUICK=1`` shrinks the counts. PostgreSQL is ``$SMITHERS_TT_BENCH_PG``
(default ``postgresql://postgres@127.0.0.1:5432/test``); every measurement gets a brand-new
database that is dropped afterwards.

For each number of worker processes (1, 2, 4), in a fresh database:

1. start the processes (``python -m smithers_tt.cli worker --workflows
   smithers_tt.demo:demo_workflow --concurrency C``) and wait until all are registered and
   heartbeating (so interpreter start-up is not measured);
2. **throughput**: submit R runs of the demo workflow (research -> write -> review,
   ``step_delay=0``: no agent waits, so the engine and the database are all there is) as fast
   as one client can, and time from the first ``run_created`` frame to the last
   ``run_finished`` frame. Runs per second = R / that time. Queue wait (``run_created`` to
   ``run_claimed``, median and p95) is reported too: under saturation it is queueing;
3. **claim latency when idle**: with the workers idle, submit L runs one at a time (each
   after the previous one finished, plus a random 0.1 to 0.4 s), and measure
   ``run_claimed.created_at_ms - run_created.created_at_ms`` (median, p95). Each idle worker
   polls every 0.2 s, so with one worker the expected median is about 0.1 s plus one claim
   transaction, and less with more workers.

The figures come from the frames the workers committed (wall-clock milliseconds stamped by
the processes of one machine), not from the benchmark's own clock. The table also shows the
worker processes' CPU time per run and how busy the machine's CPUs were during the
throughput phase (``/proc``), which says whether more processes could have helped.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.store.backend import _schema as S

from ._common import (
    QUICK,
    exit_cleanly_on_sigterm,
    fresh_pg_database,
    note,
    pg_available,
    print_table,
    scaled,
    sqlalchemy_url,
)

ROOT = Path(__file__).resolve().parents[1]
PROCESSES = (1, 2, 4)
CONCURRENCY = int(os.environ.get("SMITHERS_TT_BENCH_WORKER_CONCURRENCY", "4"))
RUNS = scaled(200, 40)
IDLE_RUNS = scaled(30, 10)
TIMEOUT = 600.0


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


@contextmanager
def _workers(url: str, count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "smithers_tt.cli",
                "--db",
                url,
                "worker",
                "--workflows",
                "smithers_tt.demo:demo_workflow",
                "--concurrency",
                str(CONCURRENCY),
                "--id",
                f"bench-{i}",
                "--drain-timeout",
                "30",
                "-q",
            ],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i in range(count)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if proc.returncode != 0:
                print(err.decode(errors="replace")[-2000:], file=sys.stderr)


def _wait(check: Any, what: str, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"a worker exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _frames(db: st.Database, run_ids: list[str]) -> dict[str, dict[str, int]]:
    """created_at_ms of each run's first run_created, run_claimed and run_finished frame."""
    f = S.frames
    rows = db.engine.transaction(
        lambda conn: conn.execute(
            sa.select(f.c.run_id, f.c.kind, sa.func.min(f.c.created_at_ms))
            .where(f.c.kind.in_(("run_created", "run_claimed", "run_finished")))
            .group_by(f.c.run_id, f.c.kind)
        ).all(),
        write=False,
    )
    wanted = set(run_ids)
    out: dict[str, dict[str, int]] = {}
    for run_id, kind, at in rows:
        if run_id in wanted:
            out.setdefault(run_id, {})[kind] = int(at)
    return out


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time a process used so far (Linux ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs so far (Linux ``/proc/stat``)."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0, 0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values) - idle, sum(values)


def _finished(db: st.Database) -> int:
    r = S.runs
    return db.engine.transaction(
        lambda conn: conn.execute(
            sa.select(sa.func.count()).select_from(r).where(r.c.status == "finished")
        ).scalar_one(),
        write=False,
    )


def measure(count: int) -> dict[str, Any]:
    """Throughput and claim latencies with ``count`` worker processes, in a fresh database."""
    with fresh_pg_database(f"workers{count}") as libpq:
        url = sqlalchemy_url(libpq)
        db = st.connect(url)
        try:
            wf, _ = demo_workflow()
            with _workers(url, count) as procs:
                _wait(
                    lambda: sum(w.state == "running" for w in db.workers()) == count,
                    "the workers to register",
                    procs,
                )
                # --- throughput --------------------------------------------------------
                cpu_before = sum(_cpu_seconds(p.pid) for p in procs)
                machine_before = _machine_busy()
                busy = [db.submit(wf, {"topic": f"topic-{i}"}).id for i in range(RUNS)]
                _wait(lambda: _finished(db) >= RUNS, f"{RUNS} finished runs", procs)
                worker_cpu = sum(_cpu_seconds(p.pid) for p in procs) - cpu_before
                machine_after = _machine_busy()
                spent = machine_after[1] - machine_before[1]
                machine = (machine_after[0] - machine_before[0]) / spent if spent else 0.0
                stamps = _frames(db, busy)
                began = min(s["run_created"] for s in stamps.values())
                ended = max(s["run_finished"] for s in stamps.values())
                waits = [(s["run_claimed"] - s["run_created"]) / 1000 for s in stamps.values()]
                # --- claim latency when idle ------------------------------------------
                time.sleep(1.0)
                idle, spacing = [], random.Random(count)
                for i in range(IDLE_RUNS):
                    idle.append(db.submit(wf, {"topic": f"idle-{i}"}).id)
                    _wait(lambda n=i: _finished(db) >= RUNS + n + 1, "an idle-time run", procs)
                    time.sleep(spacing.uniform(0.1, 0.4))  # not in step with the polls
                idle_stamps = _frames(db, idle)
                latency = [
                    (s["run_claimed"] - s["run_created"]) / 1000 for s in idle_stamps.values()
                ]
                statuses = {r.status for r in db.runs(limit=1000)}
        finally:
            db.close()
    seconds = (ended - began) / 1000
    return {
        "processes": count,
        "runs": RUNS,
        "seconds": seconds,
        "runs_per_s": RUNS / seconds,
        "wait_median": statistics.median(waits),
        "wait_p95": _percentile(waits, 0.95),
        "claim_median": statistics.median(latency),
        "claim_p95": _percentile(latency, 0.95),
        "worker_cpu_ms": worker_cpu * 1000 / RUNS,
        "machine_busy": machine * 100,
        "all_finished": statuses == {"finished"},
    }


def main() -> None:
    exit_cleanly_on_sigterm()
    reason = pg_available()
    if reason:
        print(f"skipped: {reason}")
        return
    print(
        f"{RUNS} demo runs (step_delay=0) per measurement, {CONCURRENCY} runs at a time per "
        f"worker process; {os.cpu_count()} CPU(s); load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}" + (" (QUICK)" if QUICK else ""),
        flush=True,
    )
    results = []
    for count in PROCESSES:
        print(f"  measuring {count} worker process(es) ...", flush=True)
        results.append(measure(count))
    base = results[0]["runs_per_s"]
    print_table(
        "Worker processes on PostgreSQL (demo workflow, step_delay=0)",
        [
            "processes",
            "runs",
            "seconds",
            "runs/s",
            "speed-up",
            "queue wait median s",
            "queue wait p95 s",
            "idle claim median s",
            "idle claim p95 s",
            "worker CPU ms/run",
            "CPUs busy %",
            "all finished",
        ],
        [
            [
                r["processes"],
                r["runs"],
                r["seconds"],
                r["runs_per_s"],
                r["runs_per_s"] / base,
                r["wait_median"],
                r["wait_p95"],
                r["claim_median"],
                r["claim_p95"],
                r["worker_cpu_ms"],
                r["machine_busy"],
                r["all_finished"],
            ]
            for r in results
        ],
    )
    best = max(results, key=lambda r: r["runs_per_s"])
    note(
        f"scaling: 2 processes give {results[1]['runs_per_s'] / base:.2f}x and 4 give "
        f"{results[2]['runs_per_s'] / base:.2f}x the runs/s of one; best "
        f"{best['runs_per_s']:.1f} runs/s with {best['processes']}"
    )
    note(
        "worker CPU ms/run: CPU time of the worker processes during the throughput phase per "
        "run; CPUs busy %: share of all CPUs busy meanwhile (everything on the machine, other "
        "jobs and PostgreSQL included): near 100% means the machine, not the claiming, is the "
        "limit"
    )
    note(f"load average after the run: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
