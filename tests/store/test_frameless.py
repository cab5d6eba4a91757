"""Writes that go through the ledger without growing a run's history: heartbeats, restoring
a ref, deleting an attempt. Each is fenced (or unfenced) exactly as before, and none adds a
frame or ticks the run's clock. Releasing a run, fenced the same way, is in its history."""

from __future__ import annotations

import dataclasses
import time

import smithers_tt as st
from smithers_tt.store import AttemptKey, Fence, Store, release_run, worker_heartbeat

from ._support import checkpoint, refs_of


def _history(store: Store, run_id: str) -> tuple[int, list[int]]:
    """The run's clock and its frame numbers."""
    return store.get_run(run_id).clock, [f.frame_no for f in store.frames(run_id)]


def test_a_heartbeat_moves_only_the_heartbeat_and_adds_no_frame(
    store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    before = store.get_run(fence.run_id)
    history = _history(store, fence.run_id)
    time.sleep(0.005)

    assert store.heartbeat(fence)
    assert worker_heartbeat(store, "w1", [fence]) == []

    after = store.get_run(fence.run_id)
    assert after.heartbeat_at_ms > before.heartbeat_at_ms
    assert after.updated_at_ms == before.updated_at_ms
    assert _history(store, fence.run_id) == history


def test_a_heartbeat_of_a_lost_fence_writes_nothing(store: Store, fence: Fence) -> None:
    newer = store.claim_run(fence.run_id, "other")
    before = store.get_run(fence.run_id)
    time.sleep(0.005)

    assert not store.heartbeat(fence)
    assert worker_heartbeat(store, "w1", [fence, newer]) == [fence]

    after = store.get_run(fence.run_id)
    assert after.heartbeat_at_ms > before.heartbeat_at_ms  # the owner's heartbeat, only
    assert not store.heartbeat(Fence(fence.run_id, newer.epoch + 1))
    assert store.get_run(fence.run_id).heartbeat_at_ms == after.heartbeat_at_ms


def test_releasing_a_run_requeues_it_interrupts_its_attempts_and_fences_its_owner(
    store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    clock = store.get_run(fence.run_id).clock

    assert release_run(store, fence)

    run = store.get_run(fence.run_id)
    assert (run.status, run.owner_id, run.heartbeat_at_ms) == ("queued", None, None)
    assert run.owner_epoch == fence.epoch + 1
    assert store.get_attempt(attempt).state == "interrupted"
    # the release, then the interrupted end of the attempt it left open
    released, end = store.frames(fence.run_id, after=clock)
    assert (released.kind, released.state, released.frame_no) == (
        "run_released",
        "queued",
        clock + 1,
    )
    assert (end.kind, end.state, end.attempt) == ("attempt_finished", "interrupted", 1)
    assert run.clock == clock + 2
    assert not store.heartbeat(fence)


def test_releasing_a_run_its_fence_lost_writes_nothing(store: Store, fence: Fence) -> None:
    store.start_attempt(fence, "node")
    newer = store.claim_run(fence.run_id, "other")
    attempt = store.start_attempt(newer, "node")
    before = store.get_run(fence.run_id)

    assert not release_run(store, fence)
    assert not release_run(store, Fence("no-such-run", 1))

    assert store.get_run(fence.run_id) == before
    assert store.get_attempt(attempt.key).state == "in_progress"


def test_restoring_a_ref_adds_its_checkpoint_frame_once_and_deleting_an_attempt_none(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    ref = store.publish(fence, attempt, checkpoint(1))
    clock, frames = _history(store, fence.run_id)

    restored = store.put_ref(dataclasses.replace(ref, sequence=5))
    assert store.put_ref(restored) == restored  # identical: a no-op
    assert refs_of(db, fence.run_id) == [ref, restored]
    history = _history(store, fence.run_id)
    assert history == (clock + 1, [*frames, clock + 1])
    (frame,) = store.frames(fence.run_id, after=clock)
    assert frame.checkpoint_ref() == restored  # the ref's frame holds what it points at
    store.delete_attempt(attempt)

    assert refs_of(db, fence.run_id) == []
    assert store.list_attempts(fence.run_id) == []
    assert _history(store, fence.run_id) == history
