"""Who drives a sweep's branches: a branch another live process runs is waited for, never
taken over (that would run its work twice)."""

from __future__ import annotations

import asyncio
import os
import socket

from smithers_tt import timetravel as tt
from smithers_tt.runs import Run
from smithers_tt.store import now_ms


async def wait_for_live_owner(run: Run) -> None:
    """Wait while another live process runs ``run`` (a sweep run twice at once, or a branch
    a worker holds): resuming it here would take it over and run its work twice. An owner
    on this host whose process is gone (killed) is not waited for."""
    while run.status == "running" and owner_alive(run):
        await asyncio.sleep(0.2)
        await asyncio.to_thread(run.refresh)


def owner_alive(run: Run) -> bool:
    if now_ms() - (run.record.heartbeat_at_ms or 0) >= tt.LIVE_OWNER_MS:
        return False
    host, _, pid = (run.record.owner_id or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's process, heartbeating recently
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
