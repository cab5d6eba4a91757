"""Who drives a sweep: one process at a time makes its forks and runs its branches.

Two processes driving the same sweep at once (two ``sweep.run(wf)`` after a crash, started
together) would both fork a variant not forked yet, and both resume a branch the other had
just started (a resume claims the run under a new epoch: the first process is fenced out
after its agent already ran). So a driver holds the sweep's lease (``tt_sweeps.driver``,
taken by compare-and-set, renewed every :data:`RENEW_S` while it drives, released at the
end); a second driver waits until the lease is free, then finds the branches the first
finished and runs none of them again. A lease whose holder died is taken at once when that
process was on this host and is gone, otherwise once it runs out (:data:`DRIVE_MS`).

A branch another live process runs (a worker) is waited for, never taken over.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt._ids import owner_id
from smithers_tt.runs import Run
from smithers_tt.store import now_ms

DRIVE_MS = 15_000
"""How long a sweep's lease holds if its driver stops renewing it (it died on another host)."""
RENEW_S = 3.0
"""Seconds between renewals of a held lease."""
POLL_S = 0.2
"""Seconds between looks at a lease held by another live driver (or a branch it runs)."""


@contextlib.asynccontextmanager
async def driving(sweeps: Any, sweep_id: str) -> AsyncIterator[Callable[[], bool]]:
    """Hold the sweep's lease while the body runs (waiting while another live process holds
    it); yields ``held()``: False once the lease was lost (this process stalled past
    :data:`DRIVE_MS` and another took it), when no branch must start any more here."""
    token = f"{owner_id()}#{secrets.token_hex(4)}"
    while True:
        record = await asyncio.to_thread(sweeps.get, sweep_id)
        seen = record.driver
        if seen is None or not holder_alive(seen.partition("#")[0], record.driver_until_ms):
            until = now_ms() + DRIVE_MS
            if await asyncio.to_thread(sweeps.set_driver, sweep_id, seen, token, until):
                break
            continue  # another took it between the look and the take: look again
        await asyncio.sleep(POLL_S)
    held = True

    async def renew() -> None:
        nonlocal held
        while held:
            await asyncio.sleep(RENEW_S)
            until = now_ms() + DRIVE_MS
            held = await asyncio.to_thread(sweeps.set_driver, sweep_id, token, token, until)

    renewing = asyncio.create_task(renew())
    try:
        yield lambda: held
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        await asyncio.to_thread(sweeps.set_driver, sweep_id, token, None, None)


async def wait_for_live_owner(run: Run) -> None:
    """Wait while another live process runs ``run`` (a branch a worker holds): resuming it
    here would take it over and run its work twice. An owner on this host whose process is
    gone (killed) is not waited for."""
    while run.status == "running" and owner_alive(run):
        await asyncio.sleep(POLL_S)
        await asyncio.to_thread(run.refresh)


def owner_alive(run: Run) -> bool:
    """Whether the process that owns ``run`` may still be at work on it."""
    fresh_until = (run.record.heartbeat_at_ms or 0) + tt.LIVE_OWNER_MS
    return holder_alive(run.record.owner_id or "", fresh_until)


def holder_alive(owner: str, until_ms: int | None) -> bool:
    """Whether ``owner`` (``host:pid``) may still hold what it holds until ``until_ms``: not
    once that time passed, nor when it is a process of this host that is gone."""
    if now_ms() >= (until_ms or 0):
        return False
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's process, within its time
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
