"""Engine overhead per task step, one ~4 KiB checkpoint per step: ours, LangGraph, DBOS.

Run with ``./dev bench engine`` (or ``python -m benchmarks engine``);
``SMITHERS_TT_BENCH_QUICK=1`` shrinks the counts. ``SMITHERS_TT_BENCH_ENGINE_STEPS`` (default
300) sets the steps of the step-shaped runs, ``SMITHERS_TT_BENCH_ENGINE_TASKS`` (default 60)
the length of our chain of tasks, ``SMITHERS_TT_BENCH_ENGINE_ROUNDS`` (default 5) the measured
rounds. PostgreSQL is ``$SMITHERS_TT_BENCH_PG`` (default
``postgresql://postgres@127.0.0.1:5432/test``); every system gets a brand-new database there
(dropped afterwards) and its own SQLite file in a temporary directory.

**The work** of one step is the same everywhere: :func:`work` takes the state (a step counter
and 4,096 characters of text) and returns a new one whose text is the old text rotated by 131
characters (so every step's state is new, about 4.1 KiB as canonical JSON, and nothing is
deduplicated), computed from the state the system handed over. A final check compares the last
state of every run with the expected one.

**Systems**, each at its own defaults for durability (every step is committed before the next
one starts):

* LangGraph: a graph whose one node runs the work and loops back to itself, compiled with
  ``SqliteSaver`` (WAL, ``synchronous=FULL``) or ``PostgresSaver``, invoked with
  ``durability="sync"`` (one ``put_writes`` and one ``put`` per step, awaited). For reference
  only (no goal), the same graph without a checkpointer: what LangGraph's own loop costs.
* DBOS: ``@DBOS.workflow()`` calling a ``@DBOS.step()`` N times, each step returning the new
  state (DBOS records every step's output before returning it); system database on an SQLite
  file (DBOS's default rollback journal, ``synchronous=FULL``) or PostgreSQL; DBOS's portable
  JSON serializer instead of its default pickle.
* ours, shape **steps**: one task whose agent runs the work N times and after each step awaits
  ``request.on_checkpoint(AgentCheckpoint(...))`` (a step = one durable progress checkpoint).
* ours, shape **tasks**: a chain of N tasks, each needing the previous one; each agent runs the
  work on the previous task's output and returns it as its output with the same state as its
  checkpoint (a step = a whole task: node start, attempt start, resume lookup, agent call,
  checkpoint, attempt end, node end with the output).

For reference (no goal), the floor under any durable engine on the same file or server: per
step, the work, one ``INSERT`` of the state as JSON text and a commit, with the bare driver
(``sqlite3`` in WAL with ``synchronous=FULL``; ``psycopg`` with the server's defaults).

**Measured**: every call of :func:`work` records ``perf_counter()``; **ms/step** is (last - first)
/ (N - 1), the steady-state time from one step's start to the next step's start (start-up and
tear-down of a run excluded); **overhead** is ms/step minus the bare work (the same N calls of
:func:`work` alone, a few microseconds); **run ms/step** is the whole call (``invoke``, the DBOS
workflow, ``db.run``) over N, start-up included. One warm-up run per system, then ROUNDS rounds
alternating the systems of a backend; medians over rounds. **bytes/step** is the growth of
everything the database stores during the first measured run over N (SQLite ``dbstat`` pages
with the WAL; PostgreSQL ``pg_total_relation_size`` of the system's tables).

**Goals** (issue 15 item 7, per-step overhead, ours / peer, on both backends): a checkpoint
step at most 0.5x a LangGraph step and 1.5x the floor; a publish through ``on_checkpoint`` (the
steps shape) at most 1.0x the saver's ``put`` alone (**LangGraph saver.put**: per step the
work and one ``put`` of a v4 checkpoint, no Pregel loop, no ``put_writes``); a task at most
1.0x a LangGraph step. Issue 4's "at most a tenth of DBOS" stays in the table.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from ._common import (
    QUICK,
    exit_cleanly_on_sigterm,
    fresh_pg_database,
    note,
    pg_available,
    pg_bytes,
    print_table,
    prose,
    scaled,
    scratch_dir,
    sqlalchemy_url,
    sqlite_bytes,
    verdict,
)


def _env_int(name: str, full: int, quick: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else scaled(full, quick)


STEPS = _env_int("SMITHERS_TT_BENCH_ENGINE_STEPS", 300, 40)
TASKS = _env_int("SMITHERS_TT_BENCH_ENGINE_TASKS", 60, 15)
ROUNDS = _env_int("SMITHERS_TT_BENCH_ENGINE_ROUNDS", 5, 1)
WARMUP_STEPS = 10
CODEC = "bench.engine-state"
ROTATE = 131
NO_SAVER = "LangGraph, no saver"
FLOOR = "floor: INSERT + commit"
PUT = "LangGraph saver.put"
GOALS = {
    # (our shape, peer): the most our overhead may be, as a multiple of the peer's.
    # Issue 15 item 7: a checkpoint step <= 0.5x a LangGraph step and <= 1.5x the floor, a
    # publish through on_checkpoint <= 1.0x the saver's put, a task <= 1.0x a LangGraph step.
    ("steps", "LangGraph"): 0.5,
    ("steps", FLOOR): 1.5,
    ("steps", PUT): 1.0,
    ("tasks", "LangGraph"): 1.0,
    # issue 4: at most a tenth of DBOS (a goal below the floor, kept for the record)
    ("steps", "DBOS"): 0.1,
    ("tasks", "DBOS"): 0.1,
}

# --- the work ----------------------------------------------------------------------------------


TEXT = prose(random.Random(13), 4096)
STAMPS: list[float] = []
"""``perf_counter()`` at every call of :func:`timed_work` (cleared before each run)."""


def initial_state() -> dict[str, Any]:
    return {"step": 0, "text": TEXT}


def work(state: dict[str, Any]) -> dict[str, Any]:
    """One step of work: the text rotated by 131 characters, the counter incremented."""
    text = state["text"]
    return {"step": state["step"] + 1, "text": text[ROTATE:] + text[:ROTATE]}


def timed_work(state: dict[str, Any]) -> dict[str, Any]:
    STAMPS.append(time.perf_counter())
    return work(state)


def expected_state(steps: int) -> dict[str, Any]:
    k = (steps * ROTATE) % len(TEXT)
    return {"step": steps, "text": TEXT[k:] + TEXT[:k]}


def bare_work_ms(steps: int) -> float:
    """Median over 5 repetitions of ``steps`` chained calls of :func:`work`, per call."""
    samples = []
    for _ in range(5):
        state = initial_state()
        start = time.perf_counter()
        for _ in range(steps):
            state = work(state)
        samples.append((time.perf_counter() - start) / steps * 1000)
    return statistics.median(samples)


# --- runners -----------------------------------------------------------------------------------


@dataclass
class Runner:
    """One system on one backend: ``run(n)`` executes n steps and returns the final state."""

    backend: str
    system: str
    shape: str
    run: Callable[[int], dict[str, Any]]
    size: Callable[[], int] | None
    steps: int
    per_step: list[float] = field(default_factory=list)
    per_run: list[float] = field(default_factory=list)
    bytes_per_step: float | None = None

    def measure(self, *, record_bytes: bool) -> None:
        size = self.size if record_bytes else None
        before = size() if size else 0
        STAMPS.clear()
        start = time.perf_counter()
        final = self.run(self.steps)
        took = time.perf_counter() - start
        if final != expected_state(self.steps):
            raise AssertionError(f"{self.system} ({self.backend}) ended in a wrong state")
        if len(STAMPS) != self.steps:
            raise AssertionError(f"{self.system}: {len(STAMPS)} work calls for {self.steps}")
        self.per_step.append((STAMPS[-1] - STAMPS[0]) / (self.steps - 1) * 1000)
        self.per_run.append(took / self.steps * 1000)
        if size:
            self.bytes_per_step = (size() - before) / self.steps

    def warm_up(self) -> None:
        STAMPS.clear()
        if self.run(WARMUP_STEPS) != expected_state(WARMUP_STEPS):
            raise AssertionError(f"{self.system} ({self.backend}) ended in a wrong state")


class LGState(TypedDict):
    step: int
    text: str


def _floor_runner(backend: str, conn: Any, size: Callable[[], int]) -> Runner:
    """The floor under any durable engine: per step, one INSERT of the state and a commit."""
    insert = (
        "INSERT INTO floor_steps VALUES (?, ?)"
        if backend == "SQLite"
        else "INSERT INTO floor_steps VALUES (%s, %s)"
    )
    conn.execute("CREATE TABLE floor_steps (id INTEGER PRIMARY KEY, state TEXT NOT NULL)")
    conn.commit()
    ids = iter(range(1, 1 << 62))

    def run(n: int) -> dict[str, Any]:
        state = initial_state()
        for _ in range(n):
            state = timed_work(state)
            conn.execute(insert, (next(ids), json.dumps(state)))
            conn.commit()
        return state

    return Runner(backend, FLOOR, "steps", run, size, STEPS)


def _put_runner(backend: str, saver: Any) -> Runner:
    """Per step, the work and one ``saver.put`` of a v4 checkpoint of the new state.

    What ``on_checkpoint`` is compared with: the saver's durable write alone, without the
    Pregel loop and its ``put_writes``. Checkpoints are built as the loop builds them
    (``benchmarks.bench_store.LGThread``); both channels change every step.
    """
    from .bench_store import LGThread

    threads = iter(range(1_000_000))

    def run(n: int) -> dict[str, Any]:
        thread = LGThread(saver, f"put{next(threads)}")
        state = initial_state()
        for _ in range(n):
            state = timed_work(state)
            thread.put(state, ["step", "text"])
        return state

    return Runner(backend, PUT, "steps", run, None, STEPS)


def _langgraph_runner(backend: str, saver: Any, size: Callable[[], int] | None) -> Runner:
    from langgraph.graph import END, START, StateGraph

    target = {"steps": 0}

    def node(state: LGState) -> dict[str, Any]:
        return timed_work(dict(state))

    def route(state: LGState) -> str:
        return "work" if state["step"] < target["steps"] else END

    graph = StateGraph(LGState)
    graph.add_node("work", node)
    graph.add_edge(START, "work")
    graph.add_conditional_edges("work", route)
    app = graph.compile(checkpointer=saver)
    threads = iter(range(1_000_000))

    def run(n: int) -> dict[str, Any]:
        target["steps"] = n
        config = {"configurable": {"thread_id": f"t{next(threads)}"}, "recursion_limit": n + 10}
        options = {} if saver is None else {"durability": "sync"}
        out = app.invoke(initial_state(), config, **options)
        return {"step": out["step"], "text": out["text"]}

    name = "LangGraph" if saver is not None else NO_SAVER
    return Runner(backend, name, "steps", run, size, STEPS)


_DBOS_WORKFLOW: Callable[[int], dict[str, Any]] | None = None


def _dbos_workflow() -> Callable[[int], dict[str, Any]]:
    """The DBOS workflow, registered once per process (DBOS keeps a global registry)."""
    global _DBOS_WORKFLOW
    if _DBOS_WORKFLOW is None:
        from dbos import DBOS

        @DBOS.step()
        def bench_engine_step(state: dict[str, Any]) -> dict[str, Any]:
            return timed_work(state)

        @DBOS.workflow()
        def bench_engine_workflow(n: int) -> dict[str, Any]:
            state = initial_state()
            for _ in range(n):
                state = bench_engine_step(state)
            return state

        _DBOS_WORKFLOW = bench_engine_workflow
    return _DBOS_WORKFLOW


@contextlib.contextmanager
def _dbos(backend: str, url: str, size: Callable[[], int]) -> Iterator[Runner]:
    """DBOS launched on ``url`` (DBOS is a process-wide singleton: one backend at a time)."""
    from dbos import DBOS
    from dbos._serialization import DBOSPortableJSON

    workflow = _dbos_workflow()
    DBOS(
        config={
            "name": "smithers-tt-bench-engine",
            "system_database_url": url,
            "log_level": "WARNING",
            "serializer": DBOSPortableJSON,
        }
    )
    try:
        DBOS.launch()
        yield Runner(backend, "DBOS", "steps", workflow, size, STEPS)
    finally:
        DBOS.destroy()


def _ours_runners(backend: str, db: Any, size: Callable[[], int]) -> list[Runner]:
    import smithers_tt as st

    formats = [st.CheckpointFormat(CODEC, versions=[1])]
    capabilities = [st.CheckpointCapability(CODEC, versions=[1], modes=["resume"])]

    class StepsAgent:
        id = "bench-steps"
        checkpoint_formats = formats
        checkpoint_capabilities = capabilities

        async def generate(self, request: st.GenerateRequest) -> st.GenerateResult:
            state = initial_state()
            for _ in range(int(request.input["steps"])):
                state = timed_work(state)
                await request.on_checkpoint(st.AgentCheckpoint(CODEC, 1, state))
            return st.GenerateResult({"step": state["step"]})

    class ChainAgent:
        id = "bench-chain"
        checkpoint_formats = formats
        checkpoint_capabilities = capabilities

        async def generate(self, request: st.GenerateRequest) -> st.GenerateResult:
            previous = next(iter(request.needs.values()), None) or initial_state()
            state = timed_work(previous)
            return st.GenerateResult(state, checkpoint=st.AgentCheckpoint(CODEC, 1, state))

    steps_wf = st.Workflow("bench-engine-steps")
    steps_wf.task("work", agent=StepsAgent())
    chains: dict[int, Any] = {}

    def chain(n: int) -> Any:
        if n not in chains:
            wf = st.Workflow(f"bench-engine-chain-{n}")
            agent = ChainAgent()
            for i in range(n):
                wf.task(f"t{i:05d}", agent=agent, needs=[f"t{i - 1:05d}"] if i else [])
            chains[n] = wf
        return chains[n]

    def run_steps(n: int) -> dict[str, Any]:
        run = db.run(steps_wf, input={"steps": n})
        if run.status != "finished":
            raise AssertionError(f"our run ended {run.status}")
        newest = db.store.newest_ref(run.id, "work")
        return db.store.load(newest).payload

    def run_tasks(n: int) -> dict[str, Any]:
        run = db.run(chain(n), input=None)
        if run.status != "finished":
            raise AssertionError(f"our run ended {run.status}")
        return run.output[f"t{n - 1:05d}"]

    return [
        Runner(backend, "ours", "steps", run_steps, size, STEPS),
        Runner(backend, "ours", "tasks", run_tasks, size, TASKS),
    ]


# --- backends ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _sqlite_runners(base: Path) -> Iterator[list[Runner]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    import smithers_tt as st

    with contextlib.ExitStack() as stack:
        ours_path = base / "ours.db"
        db = st.connect(f"sqlite:///{ours_path}")
        stack.callback(db.close)
        lg_path = base / "langgraph.db"
        conn = sqlite3.connect(str(lg_path), check_same_thread=False)
        stack.callback(conn.close)
        saver = SqliteSaver(conn)
        saver.setup()
        dbos_path = base / "dbos.sqlite"
        floor_path = base / "floor.db"
        floor = sqlite3.connect(str(floor_path))
        stack.callback(floor.close)
        floor.execute("PRAGMA journal_mode=WAL")
        floor.execute("PRAGMA synchronous=FULL")
        runners = [
            _floor_runner("SQLite", floor, lambda: sqlite_bytes(floor_path)),
            _langgraph_runner("SQLite", None, None),
            _langgraph_runner("SQLite", saver, lambda: sqlite_bytes(lg_path)),
            _put_runner("SQLite", saver),
            stack.enter_context(
                _dbos("SQLite", f"sqlite:///{dbos_path}", lambda: sqlite_bytes(dbos_path))
            ),
            *_ours_runners("SQLite", db, lambda: sqlite_bytes(ours_path)),
        ]
        yield runners


@contextlib.contextmanager
def _pg_runners() -> Iterator[list[Runner]]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    import smithers_tt as st

    with contextlib.ExitStack() as stack:
        ours_url = stack.enter_context(fresh_pg_database("engours"))
        db = st.connect(sqlalchemy_url(ours_url))
        stack.callback(db.close)
        floor_url = stack.enter_context(fresh_pg_database("engfloor"))
        floor = stack.enter_context(psycopg.connect(floor_url))
        lg_url = stack.enter_context(fresh_pg_database("englg"))
        saver = stack.enter_context(PostgresSaver.from_conn_string(lg_url))
        saver.setup()
        dbos_url = stack.enter_context(fresh_pg_database("engdbos"))
        runners = [
            _floor_runner("PostgreSQL", floor, lambda: pg_bytes(floor_url)),
            _langgraph_runner("PostgreSQL", None, None),
            _langgraph_runner("PostgreSQL", saver, lambda: pg_bytes(lg_url)),
            _put_runner("PostgreSQL", saver),
            stack.enter_context(
                _dbos("PostgreSQL", dbos_url, lambda: pg_bytes(dbos_url, schema="dbos"))
            ),
            *_ours_runners("PostgreSQL", db, lambda: pg_bytes(ours_url)),
        ]
        yield runners


def _measure(runners: list[Runner]) -> None:
    for runner in runners:
        runner.warm_up()
    for round_no in range(ROUNDS):
        for runner in runners:
            runner.measure(record_bytes=round_no == 0)
        print(f"  {runners[0].backend}: round {round_no + 1} of {ROUNDS} done", flush=True)


def main() -> None:
    exit_cleanly_on_sigterm()
    bare = bare_work_ms(STEPS)
    print(
        f"steps {STEPS}, chain of {TASKS} tasks, rounds {ROUNDS}{' (QUICK)' if QUICK else ''}; "
        f"state {len(TEXT) + 20:,} bytes of JSON; bare work {bare * 1000:.1f} us/step",
        flush=True,
    )
    measured: list[Runner] = []
    with scratch_dir() as base:
        with _sqlite_runners(base) as runners:
            _measure(runners)
            measured += runners
        reason = pg_available()
        if reason is None:
            with _pg_runners() as runners:
                _measure(runners)
                measured += runners
        else:
            note(f"PostgreSQL skipped: {reason}")

    def overhead(r: Runner) -> float:
        return statistics.median(r.per_step) - bare

    rows = [
        [
            r.backend,
            r.system,
            r.shape,
            r.steps,
            statistics.median(r.per_step),
            f"{min(r.per_step):.2f} to {max(r.per_step):.2f}",
            overhead(r),
            statistics.median(r.per_run),
            "" if r.bytes_per_step is None else round(r.bytes_per_step),
        ]
        for r in measured
    ]
    print_table(
        "Per-step figures (ms/step: steady state, start of one step to the next; "
        "overhead = ms/step - bare work; run ms/step: the whole call over N)",
        [
            "backend",
            "system",
            "shape",
            "N",
            "ms/step",
            "rounds' range",
            "overhead ms",
            "run ms/step",
            "bytes/step",
        ],
        rows,
    )
    goals = []
    for backend in dict.fromkeys(r.backend for r in measured):
        mine = [r for r in measured if r.backend == backend and r.system == "ours"]
        peers = [r for r in measured if r.backend == backend]
        for ours in mine:
            for peer in peers:
                if (ours.shape, peer.system) not in GOALS:
                    continue
                ratio = overhead(ours) / overhead(peer)
                # The systems of a backend alternate within a round: per-round ratios show
                # how much the machine's load moved the comparison.
                each = [
                    (a - bare) / (b - bare)
                    for a, b in zip(ours.per_step, peer.per_step, strict=True)
                ]
                goal = GOALS[ours.shape, peer.system]
                goals.append(
                    [
                        backend,
                        f"ours ({ours.shape})",
                        peer.system,
                        overhead(ours),
                        overhead(peer),
                        ratio,
                        f"{min(each):.2f} to {max(each):.2f}",
                        f"<= {goal}",
                        verdict(ratio <= goal),
                    ]
                )
    print_table(
        "Goals (per-step overhead, medians; ratio = ours / peer)",
        [
            "backend",
            "ours",
            "peer",
            "ours ms",
            "peer ms",
            "ratio",
            "per-round ratios",
            "goal",
            "result",
        ],
        goals,
    )


if __name__ == "__main__":
    main()
