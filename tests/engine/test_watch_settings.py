"""``st.connect(..., watching=Watching(...))`` sets how the runs a ``Database`` executes (and
its workers' runs) watch the store: a cancel from another connection stops the agent within
the poll interval it was given, and no sooner."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

import smithers_tt as st
from smithers_tt import GenerateRequest, Workflow
from smithers_tt.engine import Watching
from smithers_tt.errors import InvalidArgument

from ._workflows import ScriptedAgent, state


def _run_cancelled_after(path: Path, watching: Watching, after: float) -> float | None:
    """Run a node that sleeps 3 s while another connection asks to cancel the run ``after``
    seconds into it; return how long after that ask the agent was cancelled (None: never)."""
    url = f"sqlite:///{path}"
    db = st.connect(url, watching=watching)
    other = st.connect(url)
    asked: dict[str, float] = {}
    seen: dict[str, float] = {}

    async def slow(request: GenerateRequest) -> str:
        await request.on_checkpoint(state({"step": 0}))

        def ask() -> None:
            time.sleep(after)
            other.store.request_cancel(request.run_id)
            asked["at"] = time.monotonic()

        threading.Thread(target=ask, daemon=True).start()
        try:
            await asyncio.sleep(3.0)
        except asyncio.CancelledError:
            seen["at"] = time.monotonic()
            raise
        return "slept"

    wf = Workflow("watched")
    wf.task("t", agent=ScriptedAgent(slow))
    try:
        db.run(wf, {})
    except st.SmithersError:
        pass  # a cancelled run may end in an error for its caller; its agent is what we watch
    finally:
        other.close()
        db.close()
    return seen["at"] - asked["at"] if "at" in seen else None


def test_a_short_poll_sees_a_cancel_from_another_connection_at_once(tmp_path: Path) -> None:
    took = _run_cancelled_after(tmp_path / "a.db", Watching(poll=0.05), 0.3)
    assert took is not None and took < 1.5


def test_a_long_poll_given_to_connect_is_the_one_the_run_uses(tmp_path: Path) -> None:
    # Read every 30 s: the cancel asked 0.3 s in is not seen before the node's 3 s are over.
    slow = Watching(poll=30.0, heartbeat=30.0)
    assert _run_cancelled_after(tmp_path / "b.db", slow, 0.3) is None


def test_a_databases_workers_watch_as_it_does(tmp_path: Path) -> None:
    slow = Watching(poll=5.0)
    with st.connect(f"sqlite:///{tmp_path / 'c.db'}", watching=slow) as db:
        assert db.worker([Workflow("w")]).watching is slow
        assert db.worker([Workflow("w")], watching=Watching()).watching == Watching()


def test_connect_refuses_a_watching_that_is_not_one(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"watching must be a smithers_tt\.engine\.Watching"):
        st.connect(f"sqlite:///{tmp_path / 'd.db'}", watching={"poll": 1})  # type: ignore[arg-type]
    assert not (tmp_path / "d.db").exists()  # refused before anything was made
