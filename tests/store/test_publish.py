"""Publishing: content dedup, dense sequences, immutable refs, fencing, size and validity."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

import smithers_tt as st
from smithers_tt.checkpoint import EncodedCheckpoint, content_hash
from smithers_tt.errors import (
    AttemptNotFound,
    CheckpointInvalid,
    CheckpointTooLarge,
    FenceLost,
    InvalidArgument,
    RefConflict,
    StoreError,
)
from smithers_tt.store import AttemptKey, Fence, Store
from smithers_tt.store.ledger._publish import PublishUnit, WorkUnit, insert_content

from ._support import checkpoint, count, refs_of, squat_next_sequence

MIB = 1024 * 1024


@pytest.fixture
def rows(db: st.Database) -> Callable[[], tuple[int, int, int]]:
    """How many content rows, refs and frames the database holds right now."""
    return lambda: (
        count(db, "tt_checkpoint_contents"),
        count(db, "tt_checkpoint_refs"),
        count(db, "tt_frames"),
    )


def test_publish_stores_content_once_when_two_runs_publish_it_in_two_attempts_each(
    db: st.Database, store: Store
) -> None:
    refs = []
    for _ in range(2):
        _, fence = store.create_run("wf")
        first = store.start_attempt(fence, "node").key
        refs.append(store.publish(fence, first, checkpoint("same")))
        store.finish_attempt(fence, first, "failed")
        second = store.start_attempt(fence, "node").key
        refs.append(store.publish(fence, second, checkpoint("same")))

    assert count(db, "tt_checkpoint_contents") == 1
    assert count(db, "tt_checkpoint_refs") == 4
    assert len({(r.run_id, r.attempt) for r in refs}) == 4
    assert {r.content_hash for r in refs} == {checkpoint("same").encode().content_hash}


def test_publish_allocates_dense_sequences_from_zero_per_attempt(
    store: Store, fence: Fence
) -> None:
    keys = [
        store.start_attempt(fence, "a").key,
        store.start_attempt(fence, "a").key,
        store.start_attempt(fence, "b", 3).key,
    ]
    published: dict[AttemptKey, list[int]] = {key: [] for key in keys}
    for n in range(4):
        for key in keys:
            published[key].append(store.publish(fence, key, checkpoint(n)).sequence)

    assert published == {key: [0, 1, 2, 3] for key in keys}
    assert [store.get_attempt(key).next_sequence for key in keys] == [4, 4, 4]


def test_publish_returns_the_ref_that_list_refs_reads_back(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    ref = store.publish(fence, attempt, checkpoint(1), purpose="turn", agent_id="agent-7")

    assert refs_of(db, fence.run_id) == [ref]
    assert (ref.purpose, ref.agent_id, ref.codec, ref.version) == ("turn", "agent-7", "test", 1)
    assert store.load(ref) == checkpoint(1)


# --- immutable refs -----------------------------------------------------------------------


def test_put_ref_is_a_no_op_when_the_identical_ref_exists(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    ref = store.publish(fence, attempt, checkpoint(1))

    assert store.put_ref(ref) == ref
    assert refs_of(db, fence.run_id) == [ref]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"content_hash": checkpoint(2).encode().content_hash}, id="content"),
        pytest.param({"codec": "other"}, id="codec"),
        pytest.param({"version": 2}, id="version"),
        pytest.param({"purpose": "turn"}, id="purpose"),
    ],
)
def test_put_ref_raises_ref_conflict_when_the_key_points_elsewhere(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey, change: dict
) -> None:
    ref = store.publish(fence, attempt, checkpoint(1))
    other = store.publish(fence, attempt, checkpoint(2))

    with pytest.raises(RefConflict):
        store.put_ref(dataclasses.replace(ref, **change))
    assert refs_of(db, fence.run_id) == [ref, other]


def test_publish_continues_after_the_sequence_of_a_put_ref(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    first = store.publish(fence, attempt, checkpoint(1))
    restored = store.put_ref(dataclasses.replace(first, sequence=1))

    after = store.publish(fence, attempt, checkpoint(2))

    assert after.sequence == 2
    assert refs_of(db, fence.run_id) == [first, restored, after]


def test_publish_into_a_healthy_attempt_succeeds_when_its_batch_holds_a_failing_unit(
    db: st.Database, store: Store, fence: Fence
) -> None:
    """One unit's database error (here a duplicate key) must not fail the other units of
    the group commit it shares a transaction with."""
    broken = store.start_attempt(fence, "broken").key
    healthy = store.start_attempt(fence, "healthy").key
    store.publish(fence, broken, checkpoint(1))
    squat_next_sequence(store, fence, "broken")
    units = [
        PublishUnit(fence, broken, checkpoint(2).encode(), "progress", None),
        PublishUnit(fence, healthy, checkpoint(3).encode(), "progress", None),
    ]
    store._committer._commit(units)

    assert type(units[0].error) is StoreError
    assert units[1].error is None
    assert refs_of(db, fence.run_id, node_id="healthy") == [units[1].result]


def test_publish_commits_the_healthy_units_of_a_batch_over_two_runs_with_dense_frames(
    db: st.Database, store: Store, fence: Fence
) -> None:
    """A batch spanning two runs, one of whose units is fenced out: the batch is applied
    again one unit per savepoint, the fenced unit writes nothing, and each run's frames stay
    dense and in queue order."""
    _, other = store.create_run("wf")
    a = store.start_attempt(fence, "a").key
    b = store.start_attempt(other, "b").key
    stale = Fence(fence.run_id, fence.epoch - 1)
    clocks = {r: store.get_run(r).clock for r in (fence.run_id, other.run_id)}
    units = [
        PublishUnit(fence, a, checkpoint("a0").encode(), "progress", None),
        PublishUnit(other, b, checkpoint("b0").encode(), "progress", None),
        PublishUnit(stale, a, checkpoint("never").encode(), "progress", None),
        PublishUnit(fence, a, checkpoint("a1").encode(), "progress", None),
    ]
    store._committer._commit(units)

    assert type(units[2].error) is FenceLost
    assert all(u.error is None for u in (units[0], units[1], units[3]))
    assert [u.result.sequence for u in (units[0], units[3])] == [0, 1]
    assert [f.frame_no for f in store.frames(fence.run_id, after=clocks[fence.run_id])] == [
        clocks[fence.run_id] + 1,
        clocks[fence.run_id] + 2,
    ]
    assert [f.sequence for f in store.frames(fence.run_id, after=clocks[fence.run_id])] == [0, 1]
    assert [f.frame_no for f in store.frames(other.run_id, after=clocks[other.run_id])] == [
        clocks[other.run_id] + 1
    ]
    assert count(db, "tt_checkpoint_contents", content_hash=units[2].encoded.content_hash) == 0


class _Refused(Exception):
    """What a unit of work raises on its own (as the LangGraph saver's ``ThreadReplaced`` does)."""


def _store_then(encoded: EncodedCheckpoint, outcome: object) -> Callable[..., object]:
    """Work that stores ``encoded`` and then returns ``outcome`` or raises it."""

    def work(conn: object) -> object:
        insert_content(conn, encoded, 1)  # type: ignore[arg-type]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return work


def test_group_commit_isolates_a_failing_unit_of_work_among_publishes_and_other_work(
    db: st.Database, store: Store, fence: Fence
) -> None:
    """Publishes and units of work (the LangGraph saver's writes) share one committer: an
    exception a unit of work raises fails it alone and rolls back what it wrote, while the
    publishes and the other work of its batch commit."""
    key = store.start_attempt(fence, "a").key
    failing, healthy = checkpoint("refused").encode(), checkpoint("work").encode()
    units = [
        PublishUnit(fence, key, checkpoint("p0").encode(), "progress", None),
        WorkUnit(_store_then(failing, _Refused("stale"))),
        WorkUnit(_store_then(healthy, "done")),
        PublishUnit(fence, key, checkpoint("p1").encode(), "progress", None),
    ]
    store._committer._commit(units)

    assert type(units[1].error) is _Refused
    assert units[2].error is None and units[2].result == "done"
    assert [u.result.sequence for u in (units[0], units[3])] == [0, 1]
    assert refs_of(db, fence.run_id) == [units[0].result, units[3].result]
    assert count(db, "tt_checkpoint_contents", content_hash=failing.content_hash) == 0
    assert count(db, "tt_checkpoint_contents", content_hash=healthy.content_hash) == 1


def test_group_commit_of_one_failing_unit_of_work_raises_its_error_and_writes_nothing(
    db: st.Database, store: Store
) -> None:
    encoded = checkpoint("alone").encode()
    with pytest.raises(_Refused):
        store._committer.publish(WorkUnit(_store_then(encoded, _Refused("stale"))))
    assert count(db, "tt_checkpoint_contents", content_hash=encoded.content_hash) == 0
    assert store._committer.publish(WorkUnit(_store_then(encoded, 7))) == 7
    assert count(db, "tt_checkpoint_contents", content_hash=encoded.content_hash) == 1


# --- fencing ------------------------------------------------------------------------------


def _claim(store: Store, fence: Fence, key: AttemptKey) -> None:
    store.claim_run(fence.run_id, "new-owner")


def _cancel(store: Store, fence: Fence, key: AttemptKey) -> None:
    store.cancel_run(fence.run_id)


def _finish_attempt(store: Store, fence: Fence, key: AttemptKey) -> None:
    store.finish_attempt(fence, key, "failed")


def _finish_run(store: Store, fence: Fence, key: AttemptKey) -> None:
    store.finish_run(fence, "finished")


@pytest.mark.parametrize(
    "fence_out",
    [
        pytest.param(_claim, id="owner_takeover"),
        pytest.param(_cancel, id="cancel_run"),
        pytest.param(_finish_attempt, id="attempt_ended"),
        pytest.param(_finish_run, id="run_finished"),
    ],
)
def test_publish_raises_fence_lost_and_writes_nothing_when_fenced_out(
    store: Store, fence: Fence, attempt: AttemptKey, rows, fence_out
) -> None:
    store.publish(fence, attempt, checkpoint("before"))
    fence_out(store, fence, attempt)
    before = rows()

    with pytest.raises(FenceLost):
        store.publish(fence, attempt, checkpoint("never published before"))

    assert rows() == before
    assert store.get_attempt(attempt).next_sequence == 1


def test_publish_succeeds_when_cancellation_was_only_requested(
    store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    store.request_cancel(fence.run_id)

    ref = store.publish(fence, attempt, checkpoint("final words"))

    assert ref.sequence == 0
    assert store.get_run(fence.run_id).cancel_requested
    assert store.load(ref) == checkpoint("final words")


def test_publish_raises_attempt_not_found_when_the_attempt_does_not_exist(
    store: Store, fence: Fence, attempt: AttemptKey, rows
) -> None:
    before = rows()

    with pytest.raises(AttemptNotFound):
        store.publish(fence, dataclasses.replace(attempt, attempt=2), checkpoint(1))

    assert rows() == before


# --- what never reaches the database ------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(-0.0, id="negative_zero"),
        pytest.param(float("nan"), id="nan"),
        pytest.param(float("inf"), id="infinity"),
        pytest.param((1, 2), id="tuple"),
        pytest.param({1: "x"}, id="int_key"),
        pytest.param(2**53, id="unsafe_int"),
    ],
)
def test_publish_raises_checkpoint_invalid_and_writes_nothing_when_the_payload_was_mutated(
    store: Store, fence: Fence, attempt: AttemptKey, rows, bad
) -> None:
    cp = st.AgentCheckpoint("test", 1, {"ok": 1})
    cp.payload["ok"] = bad  # the envelope is frozen, its payload is not
    before = rows()

    with pytest.raises(CheckpointInvalid):
        store.publish(fence, attempt, cp)

    assert rows() == before
    assert store.get_attempt(attempt).next_sequence == 0


def test_publish_raises_checkpoint_too_large_and_writes_nothing_above_16_mib(
    store: Store, fence: Fence, attempt: AttemptKey, rows
) -> None:
    before = rows()

    with pytest.raises(CheckpointTooLarge):
        store.publish(fence, attempt, st.AgentCheckpoint("test", 1, "x" * (16 * MIB)))

    assert rows() == before


def test_publish_raises_checkpoint_too_large_when_above_the_callers_max_bytes(
    store: Store, fence: Fence, attempt: AttemptKey, rows
) -> None:
    before = rows()

    with pytest.raises(CheckpointTooLarge):
        store.publish(fence, attempt, checkpoint("x" * 100), max_bytes=100)

    assert rows() == before


def _oversized() -> EncodedCheckpoint:
    cp = st.AgentCheckpoint("test", 1, "x" * 64)
    good = cp.encode()
    data = good.data.replace(b"x" * 64, b"x" * (16 * MIB))
    return EncodedCheckpoint("test", 1, data, content_hash(data))


def _forged() -> EncodedCheckpoint:
    good = checkpoint(1).encode()
    return EncodedCheckpoint(
        good.codec, good.version, good.data, checkpoint(2).encode().content_hash
    )


@pytest.mark.parametrize(
    ("encoded", "error"),
    [
        pytest.param(_oversized, CheckpointTooLarge, id="above_16_mib"),
        pytest.param(_forged, CheckpointInvalid, id="hash_of_other_bytes"),
    ],
)
def test_publish_writes_nothing_when_an_encoded_checkpoint_breaks_the_contract(
    store: Store, fence: Fence, attempt: AttemptKey, rows, encoded, error
) -> None:
    before = rows()

    with pytest.raises(error):
        store.publish(fence, attempt, encoded())

    assert rows() == before


def test_publish_enforces_the_lower_size_limit_of_the_run(db: st.Database, store: Store) -> None:
    _, fence = store.create_run("wf", max_checkpoint_bytes=64)
    key = store.start_attempt(fence, "node").key
    small = store.publish(fence, key, checkpoint(1))
    contents = count(db, "tt_checkpoint_contents")

    with pytest.raises(CheckpointTooLarge):
        store.publish(fence, key, checkpoint("x" * 64))

    assert count(db, "tt_checkpoint_contents") == contents
    assert store.publish(fence, key, checkpoint(2)).sequence == small.sequence + 1


@pytest.mark.parametrize(
    "limit",
    [
        pytest.param(17 * MIB, id="17_mib"),
        pytest.param(16 * MIB + 1, id="one_byte_above"),
        pytest.param(0, id="zero"),
        pytest.param(-1, id="negative"),
        pytest.param(True, id="bool"),
        pytest.param(1024.0, id="float"),
    ],
)
def test_create_run_raises_invalid_argument_when_the_size_limit_is_not_allowed(
    store: Store, limit
) -> None:
    with pytest.raises(InvalidArgument):
        store.create_run("wf", max_checkpoint_bytes=limit)

    assert store.list_runs().items == []


def test_finish_attempt_publishes_its_checkpoints_in_the_transaction_that_ends_it(
    store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    (ref,) = store.finish_attempt(
        fence,
        attempt,
        "finished",
        node_state="finished",
        output={"answer": 42},
        checkpoints=[(checkpoint("result"), "turn", "agent")],
    )

    assert (ref.sequence, ref.purpose, ref.agent_id) == (0, "turn", "agent")
    assert store.load(ref) == checkpoint("result")
    assert store.get_attempt(attempt).state == "finished"
    frames = store.frames(fence.run_id)
    assert [(f.kind, f.state) for f in frames[-3:]] == [
        ("checkpoint", None),
        ("attempt_finished", "finished"),
        ("node_state", "finished"),
    ]
    assert store.get_run(fence.run_id).clock == frames[-1].frame_no


@pytest.mark.parametrize(
    "fence_out",
    [
        pytest.param(_claim, id="owner_takeover"),
        pytest.param(_finish_attempt, id="attempt_ended"),
    ],
)
def test_finish_attempt_with_checkpoints_writes_nothing_when_fenced_out(
    store: Store, fence: Fence, attempt: AttemptKey, rows, fence_out
) -> None:
    fence_out(store, fence, attempt)
    before = rows()
    clock = store.get_run(fence.run_id).clock

    with pytest.raises(FenceLost):
        store.finish_attempt(
            fence,
            attempt,
            "finished",
            node_state="finished",
            checkpoints=[(checkpoint("never stored"), "turn", None)],
        )

    assert rows() == before
    assert store.get_run(fence.run_id).clock == clock
