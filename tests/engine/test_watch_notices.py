"""The run watcher on PostgreSQL is woken by ``NOTIFY`` instead of polling every 0.1 s: a
cancel (from another process), a takeover and a dropped listening connection all reach a
running run within a second or two although its safety poll and heartbeat are set to 30 s, and
an idle run sends a small fraction of the round trips that polling sent (counted in a libpq
trace of every connection the run's store checks out)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt import FenceLost, GenerateRequest, Workflow
from smithers_tt.engine import Watching, _executor

from ._workflows import ScriptedAgent

SLOW = Watching(safety_poll=30.0, heartbeat=30.0)
"""Neither the safety poll nor the heartbeat comes within a test: only a notice can."""
PROMPTLY = 10.0
"""Seconds within which a notified change stops the run: a third of the safety poll, which is
what a lost notice would wait for (a notice takes milliseconds; the margin is for a loaded
machine: the suite runs four workers on two cores)."""
REPO = Path(__file__).resolve().parents[2]


ON_POSTGRES = pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
"""The ``db`` and ``db_url`` fixtures, on PostgreSQL only."""


class Idle:
    """An agent that marks when it started, then waits (without writing) until cancelled,
    marking when its cancellation came."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped_at: float | None = None

    async def __call__(self, request: GenerateRequest) -> str:
        self.started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.stopped_at = time.time()
            raise
        return "never cancelled"


def _run_in_background(
    db: st.Database, monkeypatch: pytest.MonkeyPatch, idle: Idle, run_id: str
) -> dict[str, Any]:
    """Start a run of ``idle`` in a thread, watched :data:`SLOW`ly; the returned dict gets
    its ``run`` or ``error``."""
    monkeypatch.setattr(_executor, "WATCHING", SLOW)
    wf = Workflow("watched")
    wf.task("t", agent=ScriptedAgent(idle))
    out: dict[str, Any] = {}

    def go() -> None:
        try:
            out["run"] = db.run(wf, run_id=run_id)
        except BaseException as error:  # the test looks at it
            out["error"] = error

    out["thread"] = threading.Thread(target=go, daemon=True)
    out["thread"].start()
    assert idle.started.wait(30), "the agent never started"
    return out


def _listener_pid(db: st.Database, schema: str) -> int | None:
    """The server process listening on this store's channel (named after its schema)."""
    query = sa.text(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND query = 'LISTEN \"smithers_tt:' || :digest || '\"'"
    )
    with db.engine.sa.connect() as conn:
        pids = conn.execute(query, {"digest": hashlib.md5(schema.encode()).hexdigest()}).all()
    assert len(pids) <= 1, f"one listening connection per store, found {pids}"
    return pids[0][0] if pids else None


def _schema(url: str) -> str:
    return url.rsplit("search_path%3D", 1)[1]


@ON_POSTGRES
def test_a_cancel_from_another_process_stops_the_run_long_before_the_safety_poll(
    db: st.Database, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    idle = Idle()
    out = _run_in_background(db, monkeypatch, idle, "cancelled-elsewhere")
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, time, smithers_tt as st\n"
            "db = st.connect(sys.argv[1])\n"
            "db.store.request_cancel('cancelled-elsewhere')\n"
            "print(time.time())\n"
            "db.close()\n",
            db_url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    )
    committed_at = float(other.stdout.split()[-1])
    out["thread"].join(30)

    assert out["run"].status == "cancelled"
    assert idle.stopped_at is not None
    assert idle.stopped_at - committed_at < PROMPTLY  # not the 30 s of the safety poll


@ON_POSTGRES
def test_a_takeover_stops_the_agents_without_waiting_for_a_heartbeat(
    db: st.Database, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    idle = Idle()
    out = _run_in_background(db, monkeypatch, idle, "taken-over")
    with st.connect(db_url) as thief:
        thief.store.claim_run("taken-over", "thief")
        claimed_at = time.time()
        out["thread"].join(30)
        record = thief.store.get_run("taken-over")

    assert isinstance(out.get("error"), FenceLost)
    assert idle.stopped_at is not None and idle.stopped_at - claimed_at < PROMPTLY
    assert (record.status, record.owner_id) == ("running", "thief")


@ON_POSTGRES
def test_cancels_still_arrive_after_the_server_drops_the_listening_connection(
    db: st.Database, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = _schema(db_url)
    idle = Idle()
    out = _run_in_background(db, monkeypatch, idle, "listener-dropped")
    deadline = time.monotonic() + 10
    while (first := _listener_pid(db, schema)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first is not None, "nothing listens on the store's channel"

    with st.connect(db_url) as other:
        with other.engine.sa.connect() as conn:
            ended = conn.execute(sa.text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": first})
            assert ended.scalar() is True
        # At once, before the listener is back or after: either way the run must see it.
        other.store.request_cancel("listener-dropped")
        cancelled_at = time.time()
        out["thread"].join(30)

    assert out["run"].status == "cancelled"
    assert idle.stopped_at is not None and idle.stopped_at - cancelled_at < PROMPTLY
    second = _listener_pid(db, schema)
    assert second is not None and second != first  # it listens again, on a new connection


def _round_trips_while_idle(db: st.Database, watching: Watching, seconds: float) -> int:
    """Round trips (libpq ``Sync`` and simple ``Query`` messages) the store's pooled
    connections send while a run's only agent waits ``seconds`` without writing: the
    watcher's reads and heartbeats. Each checkout is traced into a file of its own."""
    counting = threading.Event()
    traces: list[Any] = []
    files = contextlib.ExitStack()

    def checkout(dbapi_conn: Any, record: Any, proxy: Any) -> None:
        if counting.is_set():
            trace = files.enter_context(tempfile.TemporaryFile("w+"))  # noqa: SIM115
            traces.append(trace)
            record.info["trace"] = trace
            dbapi_conn.pgconn.trace(trace.fileno())

    def checkin(dbapi_conn: Any, record: Any) -> None:
        if record.info.pop("trace", None) is not None and dbapi_conn is not None:
            dbapi_conn.pgconn.untrace()

    async def idle(request: GenerateRequest) -> str:
        counting.set()
        await asyncio.sleep(seconds)
        counting.clear()
        return "done"

    wf = Workflow("idle")
    wf.task("t", agent=ScriptedAgent(idle))
    sa.event.listen(db.engine.sa, "checkout", checkout)
    sa.event.listen(db.engine.sa, "checkin", checkin)
    try:
        run = db.run(wf, run_id=f"idle-{watching.listen}")
    finally:
        sa.event.remove(db.engine.sa, "checkout", checkout)
        sa.event.remove(db.engine.sa, "checkin", checkin)
    assert run.status == "finished"
    trips = 0
    with files:
        for trace in traces:
            trace.seek(0)
            for line in trace.read().splitlines():
                fields = line.split("\t")
                if len(fields) >= 4 and fields[1] == "F":
                    trips += fields[3].split(" ")[0] in ("Sync", "Query")
    return trips


@ON_POSTGRES
def test_an_idle_run_sends_a_small_fraction_of_the_round_trips_polling_sent(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    polling = Watching(listen=False)  # what every run did before: a read every 0.1 s
    monkeypatch.setattr(_executor, "WATCHING", polling)
    before = _round_trips_while_idle(db, polling, 3.0)
    monkeypatch.setattr(_executor, "WATCHING", Watching())  # the default
    after = _round_trips_while_idle(db, Watching(), 3.0)
    print(f"round trips while idle 3 s: polling {before}, notified {after}")

    # Polling: about 30 reads of the run (and a heartbeat), one round trip each; woken by
    # notices: the read at the start, one safety poll and one heartbeat.
    assert before >= 20, before
    assert after * 5 <= before, (after, before)
