"""What the run watcher (cancel, breakpoints, ownership, heartbeat) sends to PostgreSQL: counts.

Run with ``python -m benchmarks watcher`` (about half a minute). Two ways of watching, in one
process, on one fresh database:

- **polling** (what every run did before issue 38, ``Watching(listen=False)``): the executor
  reads its run every 0.1 s and heartbeats every 2 s;
- **notified** (the default on PostgreSQL): ``LISTEN``/``NOTIFY`` wakes it; it reads its run
  at start, when notified, and every 2 s for safety, and heartbeats every 2 s.

Counted: frontend messages of a libpq trace on every connection the watcher's own store calls
(``watch_run``, ``heartbeat``) check out, traced only inside those calls (a thread-local flag
set around them), so the run's publishes are not counted; a ``Sync`` or a simple ``Query``
ends a round trip. Figures: round trips per second of an idle run (its agent sleeps), and per
publish of ``bench_engine``'s checkpoint-step agent (``on_checkpoint`` after each step of
work; the pace of that benchmark). The listening connection sends nothing while it waits
(one ``LISTEN`` when it connects, once per process).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import smithers_tt as st
from smithers_tt.engine import Watching, _executor

from ._common import (
    exit_cleanly_on_sigterm,
    fresh_pg_database,
    note,
    pg_available,
    print_table,
    sqlalchemy_url,
)
from .bench_engine import STEPS, _ours_runners

IDLE_SECONDS = 6.0
MODES = {"polling": Watching(listen=False), "notified": Watching()}


class WatcherTrace:
    """Traces the connections the store's ``watch_run`` and ``heartbeat`` check out."""

    def __init__(self, db: st.Database) -> None:
        self.db = db
        self._inside = threading.local()
        self._files = contextlib.ExitStack()
        self._traces: list[Any] = []
        self.calls = 0

    @contextlib.contextmanager
    def installed(self) -> Iterator[WatcherTrace]:
        import sqlalchemy as sa

        store, engine = self.db.store, self.db.engine.sa
        for name in ("watch_run", "heartbeat"):
            setattr(store, name, self._wrapped(getattr(store, name)))
        sa.event.listen(engine, "checkout", self._checkout)
        sa.event.listen(engine, "checkin", self._checkin)
        try:
            with self._files:
                yield self
        finally:
            sa.event.remove(engine, "checkout", self._checkout)
            sa.event.remove(engine, "checkin", self._checkin)
            for name in ("watch_run", "heartbeat"):
                delattr(store, name)

    def _wrapped(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def traced(*args: Any, **kwargs: Any) -> Any:
            self._inside.on = True
            self.calls += 1
            try:
                return call(*args, **kwargs)
            finally:
                self._inside.on = False

        return traced

    def _checkout(self, dbapi_conn: Any, record: Any, proxy: Any) -> None:
        if getattr(self._inside, "on", False):
            trace = self._files.enter_context(tempfile.TemporaryFile("w+"))  # noqa: SIM115
            self._traces.append(trace)
            record.info["trace"] = trace
            dbapi_conn.pgconn.trace(trace.fileno())

    def _checkin(self, dbapi_conn: Any, record: Any) -> None:
        if record.info.pop("trace", None) is not None and dbapi_conn is not None:
            dbapi_conn.pgconn.untrace()

    def round_trips(self) -> int:
        """Sync and Query messages traced so far (and forget them)."""
        trips = 0
        for trace in self._traces:
            trace.seek(0)
            for line in trace.read().splitlines():
                fields = line.split("\t")
                if len(fields) >= 4 and fields[1] == "F":
                    trips += fields[3].split(" ")[0] in ("Sync", "Query")
            trace.truncate(0)
        self.calls = 0
        return trips


def _idle_workflow(seconds: float) -> st.Workflow:
    async def idle(request: st.GenerateRequest) -> str:
        await asyncio.sleep(seconds)
        return "idle"

    wf = st.Workflow("bench-watcher-idle")
    wf.task("t", agent=idle)
    return wf


def measure() -> list[list[object]]:
    rows: list[list[object]] = []
    with fresh_pg_database("watcher") as url:
        db = st.connect(sqlalchemy_url(url))
        try:
            runners = _ours_runners("PostgreSQL", db, lambda: 0)
            steps = next(r for r in runners if r.shape == "steps")
            idle = _idle_workflow(IDLE_SECONDS)
            with WatcherTrace(db).installed() as trace:
                for name, watching in MODES.items():
                    _executor.WATCHING = watching
                    trace.round_trips()
                    db.run(idle)
                    calls, trips = trace.calls, trace.round_trips()
                    rows.append([name, "idle run", "per second", trips / IDLE_SECONDS, calls])
                    start = time.perf_counter()
                    steps.run(STEPS)
                    took = time.perf_counter() - start
                    calls, trips = trace.calls, trace.round_trips()
                    run = f"{STEPS} steps in {took:.2f} s"
                    rows.append([name, run, "per publish", trips / STEPS, calls])
        finally:
            _executor.WATCHING = Watching()
            db.close()
    return rows


def main() -> None:
    exit_cleanly_on_sigterm()
    reason = pg_available()
    if reason is not None:
        note(f"PostgreSQL skipped: {reason}")
        return
    print_table(
        "The run watcher's round trips on PostgreSQL (libpq trace of watch_run and heartbeat)",
        ["watching", "run", "round trips", "count", "watcher calls"],
        measure(),
    )
