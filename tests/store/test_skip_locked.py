"""On PostgreSQL, a claim and a garbage collection pass over rows another transaction holds
(the dialect's ``skip_locked``) instead of waiting for them; on SQLite writers are serialised,
so there is nothing to skip."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.store import claim_next

from ._support import checkpoint, count, orphan

WAIT = 5.0
"""How long the other transaction holds its lock before giving it up anyway."""


@pytest.fixture
def hold(db: st.Database) -> Iterator[Callable[[str, str], None]]:
    """``hold(sql, key)``: another session locks the row ``sql`` selects (``:k`` is ``key``)
    until the test ends or :data:`WAIT` passes, whichever is first (a skip that failed then
    shows as a slow test, not a hung one)."""
    if db.engine.is_sqlite:
        pytest.skip("SQLite has no row locks: BEGIN IMMEDIATE serialises writers")
    engine = sa.create_engine(db.url)
    conn = engine.connect()
    timer: list[threading.Timer] = []

    def lock(sql: str, key: str) -> None:
        assert conn.execute(sa.text(sql + " FOR UPDATE"), {"k": key}).first() is not None
        timer.append(threading.Timer(WAIT, conn.rollback))
        timer[0].start()

    yield lock
    for t in timer:
        t.cancel()
    conn.rollback()
    conn.close()
    engine.dispose()


def test_a_claim_passes_over_a_run_another_claimer_holds(
    db: st.Database, hold: Callable[[str, str], None]
) -> None:
    store = db.store
    first, _ = store.create_run("wf", workflow_hash="h", status="queued")
    second, _ = store.create_run("wf", workflow_hash="h", status="queued")
    hold("SELECT run_id FROM tt_runs WHERE run_id = :k", first.run_id)

    started = time.monotonic()
    claimed = claim_next(store, "w", {"wf": "h"}, stale_after_ms=60_000)

    assert time.monotonic() - started < WAIT
    assert claimed is not None and claimed.fence.run_id == second.run_id
    assert store.get_run(first.run_id).status == "queued"


def test_garbage_collection_passes_over_content_another_transaction_holds(
    db: st.Database, hold: Callable[[str, str], None]
) -> None:
    held, free = orphan(db, checkpoint(1)), orphan(db, checkpoint(2))
    hold("SELECT content_hash FROM tt_checkpoint_contents WHERE content_hash = :k", held)

    started = time.monotonic()
    report = db.collect_garbage()

    assert time.monotonic() - started < WAIT
    assert report.deleted == 1 and report.done
    assert count(db, "tt_checkpoint_contents", content_hash=held) == 1
    assert count(db, "tt_checkpoint_contents", content_hash=free) == 0
