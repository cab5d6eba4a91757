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
from collections import Counter
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
        self._traces: list[tuple[str, Any]] = []
        self.calls = 0
        self.by_call: Counter[str] = Counter()
        """Calls of each method traced since :meth:`round_trips` was last asked."""
        self.trips_by_call: Counter[str] = Counter()
        """Round trips of each method, added up by :meth:`round_trips` (never forgotten)."""
        self.calls_by_name: Counter[str] = Counter()
        """Calls of each method (never forgotten)."""

    @contextlib.contextmanager
    def installed(self) -> Iterator[WatcherTrace]:
        import sqlalchemy as sa

        store, engine = self.db.store, self.db.engine.sa
        for name in ("watch_run", "heartbeat"):
            setattr(store, name, self._wrapped(name, getattr(store, name)))
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

    def _wrapped(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def traced(*args: Any, **kwargs: Any) -> Any:
            self._inside.on = name
            self.calls += 1
            self.calls_by_name[name] += 1
            try:
                return call(*args, **kwargs)
            finally:
                self._inside.on = None

        return traced

    def _checkout(self, dbapi_conn: Any, record: Any, proxy: Any) -> None:
        name = getattr(self._inside, "on", None)
        if name is not None:
            trace = self._files.enter_context(tempfile.TemporaryFile("w+"))  # noqa: SIM115
            self._traces.append((name, trace))
            record.info["trace"] = trace
            dbapi_conn.pgconn.trace(trace.fileno())

    def _checkin(self, dbapi_conn: Any, record: Any) -> None:
        if record.info.pop("trace", None) is not None and dbapi_conn is not None:
            dbapi_conn.pgconn.untrace()

    def round_trips(self) -> int:
        """Sync and Query messages traced so far (and forget them)."""
        trips = 0
        for name, trace in self._traces:
            trace.seek(0)
            for line in trace.read().splitlines():
                fields = line.split("\t")
                if len(fields) >= 4 and fields[1] == "F":
                    trip = fields[3].split(" ")[0] in ("Sync", "Query")
                    trips += trip
                    self.trips_by_call[name] += trip
            trace.seek(0)
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


def measure() -> tuple[list[list[object]], list[list[object]]]:
    """The rows of both tables: round trips per mode and run, and per call of each method."""
    rows: list[list[object]] = []
    per_call: list[list[object]] = []
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
                for call, calls in sorted(trace.calls_by_name.items()):
                    trips = trace.trips_by_call[call]
                    per_call.append([call, trips / calls, trips, calls])
        finally:
            _executor.WATCHING = Watching()
            db.close()
    return rows, per_call


def main() -> None:
    exit_cleanly_on_sigterm()
    reason = pg_available()
    if reason is not None:
        note(f"PostgreSQL skipped: {reason}")
        return
    rows, per_call = measure()
    print_table(
        "The run watcher's round trips on PostgreSQL (libpq trace of watch_run and heartbeat)",
        ["watching", "run", "round trips", "count", "watcher calls"],
        rows,
    )
    print_table(
        "Round trips per call (both modes; the first uses of a statement on a connection "
        "include psycopg preparing it)",
        ["call", "round trips per call", "round trips", "calls"],
        per_call,
    )
