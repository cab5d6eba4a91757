"""Claiming runs for workers: queued runs and runs whose owner stopped heartbeating.

The database is the coordination engine. A claim is one transaction that picks a run
(the dialect's :meth:`~smithers_tt.store.backend._dialect.Dialect.skip_locked`: PostgreSQL's
``FOR UPDATE SKIP LOCKED``, so concurrent workers never pick the same one; on SQLite
``BEGIN IMMEDIATE`` serialises writers) and takes it over under a new owner epoch, which
fences out whoever had it. Workers also register themselves so people can see who is alive.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import canonical_bytes
from smithers_tt.errors import FenceLost, InvalidArgument, RunNotFound
from smithers_tt.store._frames import Frame
from smithers_tt.store._records import Fence, now_ms
from smithers_tt.store._store import Store
from smithers_tt.store.backend import Driver, driver
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger import Entry, RunReleased, claim, open_ends, touch


@dataclass(frozen=True)
class WorkerRecord:
    """A registered worker process and what it is doing."""

    worker_id: str
    host: str
    pid: int
    workflows: list[str]
    state: str
    started_at_ms: int
    heartbeat_at_ms: int
    runs: list[str]


@dataclass(frozen=True)
class Claim:
    """A run a worker just claimed: its fence, and what the worker needs to know about it."""

    fence: Fence
    workflow: str
    cancel_requested: bool
    """A cancel was requested (its previous owner died before finishing it): the claimer
    completes the cancellation instead of executing the run."""
    previous_owner: str | None
    """Who owned the run before (None for a queued run never executed)."""
    takeover: bool
    """The run was ``running`` under an owner that stopped heartbeating."""


def claim_next(
    store: Store, worker_id: str, workflows: dict[str, str], *, stale_after_ms: int
) -> Claim | None:
    """Claim the oldest runnable run of a known workflow (name -> definition hash).

    Runnable: ``queued``, or ``running`` with a heartbeat older than ``stale_after_ms`` (its
    owner died or hangs). A run whose definition hash differs from the worker's is never
    claimed, nor one under a time-travel lease. A run whose cancellation was requested is
    claimed too (its owner may have died before completing it): the caller cancels it.
    Returns the claim, or None when nothing is runnable.
    """
    if not workflows:
        return None
    if type(stale_after_ms) is not int or stale_after_ms < 1:
        raise InvalidArgument(f"stale_after_ms must be an int >= 1, got {stale_after_ms!r}")
    r = S.runs
    known = sa.or_(
        *(
            (r.c.workflow == name) & (r.c.workflow_hash == digest)
            for name, digest in workflows.items()
        )
    )

    lock = store.engine.backend.skip_locked

    def work(conn: Connection, frames: list[Frame]) -> Claim | None:
        now = now_ms()
        runnable = (r.c.status == "queued") | (
            (r.c.status == "running")
            & (sa.func.coalesce(r.c.heartbeat_at_ms, 0) < now - stale_after_ms)
        )
        pick = (
            sa.select(
                r.c.run_id,
                r.c.status,
                r.c.owner_id,
                r.c.workflow,
                r.c.cancel_requested,
                r.c.owner_epoch,
            )
            .where(runnable, known, r.c.lease_owner.is_(None))
            .order_by(r.c.created_at_ms, r.c.run_id)
            .limit(1)
        )
        row = conn.execute(lock(pick)).one_or_none()
        if row is None:
            return None
        takeover = row.status == "running"
        epoch = row.owner_epoch + 1
        data: dict[str, Any] = {"epoch": epoch, "owner_id": worker_id}
        if takeover:
            data["took_over_from"] = row.owner_id
        with driver(conn) as db:
            frames += claim(db, row.run_id, epoch, worker_id, data)
        return Claim(
            Fence(row.run_id, epoch),
            row.workflow,
            bool(row.cancel_requested),
            row.owner_id if takeover else None,
            takeover,
        )

    return store._change(work)


def release_run(store: Store, fence: Fence) -> bool:
    """Give an owned run back to the queue (a new epoch fences any late write of ours); its
    attempts left in progress end ``interrupted``. False when ``fence`` no longer owns it."""

    def entries(db: Driver) -> list[Entry]:
        if db.one(db.sql.lock_run, (fence.run_id,)) is None:
            raise RunNotFound(f"no run {fence.run_id!r}")
        # Locked: no attempt starts meanwhile. The ledger checks the fence before any of it.
        ends = open_ends(db, fence.run_id, "interrupted")
        return [Entry(fence.run_id, fence, [RunReleased(fence.run_id), *ends])]

    try:
        store._write(entries)
    except (FenceLost, RunNotFound):
        return False
    return True


def register_worker(
    store: Store, worker_id: str, host: str, pid: int, workflows: list[str]
) -> None:
    """Record a worker as started (or restarted under the same id)."""
    w = S.workers
    now = now_ms()
    values = {
        "host": host,
        "pid": pid,
        "workflows_json": canonical_bytes(sorted(workflows)).decode(),
        "state": "running",
        "started_at_ms": now,
        "heartbeat_at_ms": now,
    }

    def work(conn: Connection) -> None:
        if not conn.execute(w.update().where(w.c.worker_id == worker_id).values(**values)).rowcount:
            conn.execute(w.insert().values(worker_id=worker_id, **values))

    store.engine.transaction(work)


def worker_heartbeat(
    store: Store, worker_id: str, fences: list[Fence], state: str = "running"
) -> list[Fence]:
    """Heartbeat a worker and every run it owns; return the fences it no longer holds."""
    w = S.workers

    def work(conn: Connection) -> list[Fence]:
        now = now_ms()
        conn.execute(
            w.update().where(w.c.worker_id == worker_id).values(heartbeat_at_ms=now, state=state)
        )
        with driver(conn) as db:
            return touch(db, fences, now)

    return store.engine.transaction(work)


def list_workers(store: Store, *, silent_after_ms: int = 10_000) -> list[WorkerRecord]:
    """Registered workers with the runs each owns now.

    A worker recorded as ``running`` whose last heartbeat is older than ``silent_after_ms``
    is listed as ``unresponsive``: it was killed or paused without saying so, and its runs
    are taken over once their own heartbeats are as old.
    """
    if type(silent_after_ms) is not int or silent_after_ms < 1:
        raise InvalidArgument(f"silent_after_ms must be an int >= 1, got {silent_after_ms!r}")
    w, r = S.workers, S.runs

    def work(conn: Connection) -> list[Any]:
        workers = conn.execute(sa.select(w).order_by(w.c.started_at_ms)).all()
        owned = conn.execute(
            sa.select(r.c.owner_id, r.c.run_id).where(
                r.c.status == "running", r.c.owner_id.is_not(None)
            )
        ).all()
        return [workers, owned]

    workers, owned = store.engine.transaction(work, write=False)
    by_owner: dict[str, list[str]] = {}
    for owner, run_id in owned:
        by_owner.setdefault(owner, []).append(run_id)
    silent_since = now_ms() - silent_after_ms
    return [
        WorkerRecord(
            row.worker_id,
            row.host,
            row.pid,
            json.loads(row.workflows_json),
            "unresponsive"
            if row.state == "running" and row.heartbeat_at_ms < silent_since
            else row.state,
            row.started_at_ms,
            row.heartbeat_at_ms,
            sorted(by_owner.get(row.worker_id, [])),
        )
        for row in workers
    ]


def count_runs(store: Store, status: str) -> int:
    """How many runs have ``status`` (e.g. how many wait in the queue)."""
    r = S.runs
    return int(
        store.engine.transaction(
            lambda conn: conn.execute(
                sa.select(sa.func.count()).select_from(r).where(r.c.status == status)
            ).scalar_one(),
            write=False,
        )
    )
