"""What every time-travel operation runs under: the run's durable lease (destructive ones),
one transaction retried with a full fold when the set-based path cannot decide
(:func:`transaction`), and the reason a person gave, for the audit (:func:`why`)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TypeVar

from smithers_tt._ids import owner_id
from smithers_tt.errors import InvalidArgument, LeaseBusy, RunNotFound, SmithersError
from smithers_tt.store import Store, now_ms, travel
from smithers_tt.store.for_timetravel import Refold, RunState, Travel

T = TypeVar("T")

LEASE_MS = 60_000
"""How long a time-travel lease holds if its holder dies without releasing it."""

LIVE_OWNER_MS = 10_000
"""A running run whose owner heartbeat is younger than this is being executed: hands off."""


@dataclass(frozen=True)
class Lease:
    """A held time-travel lease on one run."""

    run_id: str
    token: str


def acquire_lease(
    store: Store,
    run_id: str,
    operation: str,
    *,
    force: bool = False,
    lease_ms: int | None = None,
) -> Lease:
    """Take the run's durable lease for a destructive operation.

    The lease holds for ``lease_ms`` (default :data:`LEASE_MS`) if its holder dies without
    releasing it; after that anyone may take it. The run is first read without waiting for
    any lock, so an operation that starts while another one holds the lease fails at once;
    one that had to wait for another to finish (both started together) fails too, because
    the run changed under it (its owner epoch moved on): it never acts on a state its caller
    did not see.

    Raises:
        RunNotFound: no such run.
        LeaseBusy: another operation holds the lease or changed the run meanwhile, or a live
            process executes the run (``force=True`` overrides the last, never the others).
    """
    token = f"{owner_id()}:{operation}:{secrets.token_hex(4)}"
    hold = LEASE_MS if lease_ms is None else lease_ms
    if type(hold) is not int or hold <= 0:
        raise InvalidArgument(f"lease_ms must be a positive int, got {lease_ms!r}")

    def check(row: RunState | None, now: int) -> RunState:
        if row is None:
            raise RunNotFound(f"no run {run_id!r}")
        if row.lease_owner is not None and (row.lease_until_ms or 0) > now:
            raise LeaseBusy(
                f"run {run_id} is busy: {row.lease_owner} holds its time-travel lease for "
                f"{((row.lease_until_ms or now) - now) / 1000:.0f} s more; try again later",
                run_id=run_id,
            )
        alive = row.status == "running" and now - (row.heartbeat_at_ms or 0) < LIVE_OWNER_MS
        if alive and not force:
            raise LeaseBusy(
                f"run {run_id} is being executed by {row.owner_id} (heartbeat "
                f"{(now - (row.heartbeat_at_ms or 0)) / 1000:.1f} s ago); cancel it first, "
                "or pass force=True if that process is gone",
                run_id=run_id,
            )
        return row

    seen = check(travel(store.engine, lambda tx: tx.run_state(run_id), write=False), now_ms())

    def work(tx: Travel) -> None:
        row = check(tx.run_state(run_id, lock=True), now_ms())
        if row.owner_epoch != seen.owner_epoch:
            raise LeaseBusy(
                f"run {run_id} changed while this {operation} waited for it (another "
                "operation or a new owner took it); look at it again, then retry",
                run_id=run_id,
            )
        tx.take_lease(run_id, token, now_ms() + hold)

    travel(store.engine, work)
    return Lease(run_id, token)


def release_lease(store: Store, lease: Lease) -> None:
    """Give the lease back (a no-op if it expired and someone else took it)."""
    travel(store.engine, lambda tx: tx.release_lease(lease.run_id, lease.token))


def check_lease(tx: Travel, lease: Lease) -> RunState:
    row = tx.run_state(lease.run_id, lock=True)
    if row is None:  # deleted after the lease expired (retention)
        raise RunNotFound(f"no run {lease.run_id!r}")
    if row.lease_owner != lease.token:
        raise LeaseBusy(
            f"the lease on run {lease.run_id} expired and was taken over; nothing was changed",
            run_id=lease.run_id,
        )
    return row


def transaction(
    store: Store, work: Callable[[Travel, bool], T], *, roomy: bool = True, write: bool = True
) -> T:
    """Run ``work(tx, exact=False)`` (set-based) in one transaction; if it raises
    :class:`Refold` (that transaction rolled back, nothing changed), run
    ``work(tx, exact=True)`` (full fold) in a new one. ``roomy``: with the larger memory a
    rewind or copy of a long history needs (see :func:`travel`); ``write=False``: read-only
    transactions."""

    def attempt(exact: bool) -> T:
        return travel(store.engine, lambda tx: work(tx, exact), roomy_memory=roomy, write=write)

    try:
        return attempt(False)
    except Refold:
        return attempt(True)


def leased(store: Store, lease: Lease, operation: Callable[[], T]) -> T:
    """Run ``operation`` under ``lease``, whose own transaction gives the lease back as it
    commits: only a failed operation releases it here. A committed operation is never
    reported as failed because the release after it could not reach the database, and a
    release that fails after a failed operation does not hide its error (the lease then
    expires by itself)."""
    try:
        return operation()
    except BaseException:
        with suppress(SmithersError):
            release_lease(store, lease)
        raise


def why(reason: str | None) -> dict[str, str]:
    """The audit entry's ``reason`` (why a person did it), when one was given."""
    if reason is None or not str(reason).strip():
        return {}
    if not isinstance(reason, str):
        raise InvalidArgument(f"reason must be text, not {type(reason).__name__}")
    return {"reason": reason.strip()[:2000]}
