"""The cancel/heartbeat watcher: a store that stops answering for longer than its retries
(another process holding SQLite's write lock, a PostgreSQL outage) does not abort a healthy
run, which goes on once the store is back; a heartbeat that finds another owner stops the
agents; and however a run ends, its agents are stopped and the ``Database`` stays usable."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import FenceLost, GenerateRequest, Workflow
from smithers_tt.engine import Watching, _executor
from smithers_tt.store import Frame, RetryPolicy

from ._workflows import ScriptedAgent, refs, state

SHORT_RETRIES = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05)
"""A retry budget of well under a second (with a 100 ms SQLite busy timeout)."""


@dataclass
class Unreachable:
    """A store a test can make unreachable for a while, through a real fault."""

    db: st.Database
    begin: Callable[[], None]
    """Put the fault in place (returns once the store no longer answers)."""
    end: Callable[[], None]
    seconds: float
    """How long a test keeps the fault: several retry budgets."""

    def cut(self) -> None:
        """Block the calling thread while the store does not answer for ``seconds``."""
        self.begin()
        try:
            time.sleep(self.seconds)
        finally:
            self.end()

    def cut_in_background(self) -> None:
        """Put the fault in place now and end it after ``seconds``, from another thread."""
        self.begin()
        threading.Timer(self.seconds, self.end).start()


class WriteLock:
    """Another connection (as another process would) holds SQLite's write lock."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._release = threading.Event()
        self._thread: threading.Thread | None = None

    def begin(self) -> None:
        held = threading.Event()
        self._release.clear()

        def hold() -> None:
            holder = sqlite3.connect(self.path, isolation_level=None, timeout=10)
            try:
                holder.execute("BEGIN IMMEDIATE")
                held.set()
                self._release.wait(60)
                holder.execute("ROLLBACK")
            finally:
                holder.close()

        self._thread = threading.Thread(target=hold, daemon=True)
        self._thread.start()
        assert held.wait(10), "the write lock was never taken"

    def end(self) -> None:
        self._release.set()
        if self._thread is not None:
            self._thread.join(10)


@pytest.fixture(
    params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)]
)
def unreachable(
    request: pytest.FixtureRequest, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Unreachable]:
    if request.param == "sqlite":
        # Heartbeat every 0.2 s, so the held lock meets several heartbeats.
        monkeypatch.setattr(_executor, "WATCHING", Watching(heartbeat=0.2))
        path = str(tmp_path / "smithers.db")
        db = st.connect(f"sqlite:///{path}", retry=SHORT_RETRIES, busy_timeout_ms=100)
        lock = WriteLock(path)
        fault = Unreachable(db, lock.begin, lock.end, 1.5)
    else:
        proxy = request.getfixturevalue("pg_proxy")
        url = proxy.url(request.getfixturevalue("pg_schema_url"))
        db = st.connect(url)  # the default retries: about 6 s
        fault = Unreachable(db, proxy.outage, proxy.restore, 12.0)  # twice the retry budget
    try:
        yield fault
    finally:
        fault.db.close()


def test_a_run_goes_on_when_its_store_is_unreachable_for_longer_than_the_retries(
    unreachable: Unreachable,
) -> None:
    db = unreachable.db

    async def work(request: GenerateRequest) -> dict[str, int]:
        await request.on_checkpoint(state({"step": 1}))
        # The agent works (without writing) while the store does not answer.
        await asyncio.to_thread(unreachable.cut)
        await request.on_checkpoint(state({"step": 2}))
        return {"steps": 2}

    wf = Workflow("unreachable")
    wf.task("t", agent=ScriptedAgent(work))
    events: list[Frame] = []
    run = db.run(wf, run_id="unreachable-run", on_event=events.append)

    assert (run.status, run.output) == ("finished", {"t": {"steps": 2}})
    assert [r.sequence for r in refs(db, run.id)] == [0, 1]
    assert [a.state for a in db.store.list_attempts(run.id)] == ["finished"]
    assert events[-1].kind == "run_finished"
    # Nothing of the run is left behind: a later write to it through the same Database works.
    assert db.store.listeners == []
    db.store.request_cancel(run.id)
    assert db.get_run(run.id).status == "finished"


def test_an_attempt_failed_by_an_unreachable_store_is_retried_once_it_is_back(
    unreachable: Unreachable,
) -> None:
    db = unreachable.db

    async def work(request: GenerateRequest) -> dict[str, Any]:
        if request.attempt == 1:
            await request.on_checkpoint(state({"step": 1}))
            unreachable.cut_in_background()
            await request.on_checkpoint(state({"step": 2}))  # raises: the store is away
        assert request.resume_checkpoint is not None
        return {"attempt": request.attempt, "resumed": request.resume_checkpoint.payload}

    wf = Workflow("retried")
    wf.task("t", agent=ScriptedAgent(work), retries=1)
    run = db.run(wf, run_id="retried-run")

    assert (run.status, run.output) == ("finished", {"t": {"attempt": 2, "resumed": {"step": 1}}})
    first, second = db.store.list_attempts(run.id)
    assert (first.state, first.error_code) == ("failed", "transient_store_error")
    assert second.state == "finished"
    assert [r.sequence for r in refs(db, run.id)] == [0]  # the second publish wrote nothing


def test_a_heartbeat_that_finds_another_owner_stops_the_agents(
    db: st.Database, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_executor, "WATCHING", Watching(heartbeat=0.2))
    thief = st.connect(db_url)
    claimed, seen = threading.Event(), {}

    async def idle(request: GenerateRequest) -> str:
        await request.on_checkpoint(state({"step": 0}))
        await asyncio.to_thread(thief.store.claim_run, request.run_id, "thief")
        claimed.set()
        try:
            await asyncio.sleep(10)  # works without writing: only the heartbeat can tell
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise
        return "finished anyway"

    wf = Workflow("stolen")
    wf.task("t", agent=ScriptedAgent(idle))
    try:
        with pytest.raises(FenceLost, match="lost ownership and stopped its agents"):
            db.run(wf, run_id="stolen-run", on_event=lambda frame: None)
        record = thief.store.get_run("stolen-run")
    finally:
        thief.close()

    assert claimed.is_set() and seen == {"cancelled": True}
    assert (record.status, record.owner_id) == ("running", "thief")
    assert db.store.listeners == []
    db.store.request_cancel("stolen-run")  # the same Database still writes to the run
    assert db.store.get_run("stolen-run").cancel_requested
