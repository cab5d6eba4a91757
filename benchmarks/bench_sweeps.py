"""A 16-variant what-if sweep at the end of a 10,000-frame run.

Run: ``./dev bench sweeps`` (``SMITHERS_TT_BENCH_QUICK=1`` for a smoke run).

The run is real (executed by the engine): ``history`` publishes 10,000 checkpoints, then
``answer`` (an I/O-bound agent: it waits :data:`AGENT_SECONDS`, as a model call does, and
answers from the run input). The sweep forks the frame where ``history`` finished, once per
variant (each with another ``model`` in its input), and runs the 16 ``answer`` branches.

* create: the time to make the 16 forks (labelled, through the sweep) vs one plain
  ``db.fork`` at the same frame (goal: under 2x one fork per variant);
* wall time: the sweep running its 16 branches (``concurrency=16``, in this process) vs 16
  such branches resumed one after another (goal: at least 1.6x faster on 2 cores).

On SQLite, and on PostgreSQL when it is reachable. The machine is shared: the load average
is printed with the figures.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from typing import Any

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
from smithers_tt.sweeps import Sweep, check_variants

FRAMES = scaled(10_000, 500)
VARIANTS = 16
AGENT_SECONDS = 0.25
CODEC = "bench.history"


class History:
    id = "history"
    checkpoint_formats = [st.CheckpointFormat(CODEC, [1])]
    checkpoint_capabilities = [st.CheckpointCapability(CODEC, [1], ["resume"])]

    async def generate(self, request: st.GenerateRequest) -> Any:
        cp = request.resume_checkpoint
        n = cp.payload["n"] if cp is not None else 0
        while n < FRAMES:
            n += 1
            await request.on_checkpoint(st.AgentCheckpoint(CODEC, 1, {"n": n}))
        return {"n": n}


async def answer(request: st.GenerateRequest) -> Any:
    await asyncio.sleep(AGENT_SECONDS)  # a model call: waiting, not computing
    return {"model": request.input["model"], "n": request.needs["history"]["n"]}


def workflow() -> st.Workflow:
    wf = st.Workflow("sweep-bench")
    wf.task("history", agent=History(), prompt="history")
    wf.task("answer", agent=answer, needs=["history"], prompt="answer")
    return wf


def _measure(label: str, url: str) -> list[list[object]]:
    db = st.connect(url)
    wf = workflow()
    run = db.run(wf, {"model": "m0"})
    frame = next(
        f.frame_no
        for f in run.frames()
        if f.kind == "node_state" and f.node_id == "history" and f.state == "finished"
    )
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        db.fork(run.id, frame)
        times.append(time.perf_counter() - t0)
    one_fork = statistics.median(times)
    variants = {f"model-{i}": {"input": {"model": f"m{i}"}} for i in range(VARIANTS)}
    checked = check_variants(variants)
    record = db.store.sweeps.create("bench-sweep", run.id, frame, wf.name, checked)
    sweep = Sweep(db, record)
    t0 = time.perf_counter()
    branches = sweep._make_forks()
    create = time.perf_counter() - t0
    assert len(branches) == VARIANTS
    t0 = time.perf_counter()
    sweep.run(wf, concurrency=VARIANTS)
    swept = time.perf_counter() - t0
    assert set(sweep.status().values()) == {"finished"}
    serial = [db.fork(run.id, frame, input={"model": f"s{i}"}) for i in range(VARIANTS)]
    t0 = time.perf_counter()
    for child in serial:
        assert db.resume(child.id, wf).status == "finished"
    one_by_one = time.perf_counter() - t0
    db.close()
    per_variant = create / VARIANTS
    speedup = one_by_one / swept
    return [
        [label, "one fork at the end", f"{one_fork * 1000:.1f} ms", "", ""],
        [
            label,
            f"{VARIANTS} sweep forks",
            f"{create * 1000:.1f} ms ({per_variant * 1000:.1f} ms each)",
            f"{per_variant / one_fork:.2f}x one fork each",
            verdict(per_variant < 2 * one_fork),
        ],
        [label, f"{VARIANTS} branches one after another", f"{one_by_one:.2f} s", "", ""],
        [
            label,
            f"sweep of {VARIANTS} (concurrency {VARIANTS})",
            f"{swept:.2f} s",
            f"{speedup:.1f}x faster",
            verdict(speedup >= 1.6),
        ],
    ]


def main() -> None:
    load = os.getloadavg()
    rows: list[list[object]] = []
    with scratch_dir() as tmp:
        rows += _measure("SQLite", f"sqlite:///{tmp / 'sweep.db'}")
    reason = pg_available()
    if reason is None:
        with fresh_pg_database("sweeps") as url:
            rows += _measure("PostgreSQL", sqlalchemy_url(url))
    print_table(
        f"What-if sweep at the end of a {FRAMES:,}-frame run ({AGENT_SECONDS} s I/O-bound "
        f"agent; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on "
        f"{os.cpu_count()} cores, shared)",
        ["backend", "what", "time", "ratio", "goal"],
        rows,
    )
    if reason is not None:
        print(f"  - PostgreSQL skipped: {reason}")
