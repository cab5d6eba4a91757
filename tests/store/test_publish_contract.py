"""What a publish records and what it says when it refuses: the checkpoint frame holds the
ref (and the content's size), the run's size limit is inclusive, stored content that does not
match its bytes is refused as corrupt, content that keeps vanishing under a concurrent
collection is a retryable error, and every refusal names its cause and writes nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import (
    AttemptNotFound,
    CheckpointCorrupt,
    CheckpointTooLarge,
    FenceLost,
    InvalidArgument,
    TransientStoreError,
)
from smithers_tt.store import AttemptKey, Fence, Frame, Store
from smithers_tt.store.ledger._publish import PublishUnit

from ._support import checkpoint, count, execute, refs_of


@pytest.fixture
def history(db: st.Database) -> Callable[[str], tuple[int, int, int, int]]:
    """A run's clock and its number of frames and refs, and the content rows stored."""

    def of(run_id: str) -> tuple[int, int, int, int]:
        return (
            db.store.get_run(run_id).clock,
            count(db, "tt_frames", run_id=run_id),
            count(db, "tt_checkpoint_refs", run_id=run_id),
            count(db, "tt_checkpoint_contents"),
        )

    return of


def test_a_publish_commits_one_checkpoint_frame_that_holds_its_ref_and_size(
    store: Store, fence: Fence
) -> None:
    store.start_attempt(fence, "node", 2)
    key = store.start_attempt(fence, "node", 2).key  # attempt 2 of iteration 2
    emitted: list[Frame] = []
    store.listeners.append(emitted.append)
    encoded = checkpoint("framed").encode()

    ref = store.publish(fence, key, encoded, purpose="turn", agent_id="agent-3")

    (frame,) = store.frames(fence.run_id, after=store.get_run(fence.run_id).clock - 1)
    assert emitted == [frame]
    assert (frame.kind, frame.frame_no) == ("checkpoint", store.get_run(fence.run_id).clock)
    assert (frame.node_id, frame.iteration, frame.attempt, frame.sequence) == ("node", 2, 2, 0)
    assert (frame.content_hash, frame.codec, frame.version) == (encoded.content_hash, "test", 1)
    assert (frame.purpose, frame.agent_id) == ("turn", "agent-3")
    assert frame.data == {"size": encoded.size}
    assert frame.checkpoint_ref() == ref


def test_a_checkpoint_exactly_at_the_run_s_size_limit_is_published(store: Store, history) -> None:
    size = checkpoint("at the limit").encode().size
    _, fence = store.create_run("wf", max_checkpoint_bytes=size)
    key = store.start_attempt(fence, "node").key

    assert store.publish(fence, key, checkpoint("at the limit")).sequence == 0

    _, tight = store.create_run("wf", max_checkpoint_bytes=size - 1)
    key = store.start_attempt(tight, "node").key
    before = history(tight.run_id)
    with pytest.raises(CheckpointTooLarge) as refused:
        store.publish(tight, key, checkpoint("at the limit"))
    assert refused.value.details == {"size": size, "limit": size - 1}
    assert f"checkpoint is {size} bytes, above run {tight.run_id}'s limit of {size - 1}" in str(
        refused.value
    )
    assert history(tight.run_id) == before


def test_a_publish_into_an_ended_attempt_says_what_became_of_it(
    store: Store, fence: Fence, attempt: AttemptKey, history
) -> None:
    store.finish_attempt(fence, attempt, "failed")
    before = history(fence.run_id)

    with pytest.raises(FenceLost) as lost:
        store.publish(fence, attempt, checkpoint(1))

    message = str(lost.value)
    assert f"attempt node#1 is failed under epoch {fence.epoch}" in message
    assert f"epoch {fence.epoch} can no longer publish into it; nothing was written" in message
    assert lost.value.details == {"run_id": fence.run_id}
    assert history(fence.run_id) == before


def test_a_publish_into_a_missing_attempt_says_to_start_it(
    store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    missing = AttemptKey(fence.run_id, "node", 0, 9)

    with pytest.raises(AttemptNotFound, match="start it before publishing"):
        store.publish(fence, missing, checkpoint(1))


def test_a_publish_with_an_unknown_purpose_lists_the_purposes(
    store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        store.publish(fence, attempt, checkpoint(1), purpose="gossip")

    assert "'progress', 'turn'" in str(refused.value)
    assert "got 'gossip'" in str(refused.value)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param("data", id="other_bytes_of_the_same_size"),
        pytest.param("size", id="wrong_recorded_size"),
    ],
)
def test_a_publish_over_damaged_stored_content_raises_checkpoint_corrupt_and_writes_nothing(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey, history, damage: str
) -> None:
    encoded = checkpoint("kept").encode()
    store.publish(fence, attempt, encoded)
    if damage == "data":
        other = encoded.data.replace(b"kept", b"lost")
        assert len(other) == len(encoded.data)
        execute(
            db,
            "UPDATE tt_checkpoint_contents SET data = :d WHERE content_hash = :h",
            d=other,
            h=encoded.content_hash,
        )
    else:
        execute(
            db,
            "UPDATE tt_checkpoint_contents SET size_bytes = size_bytes + 1 WHERE content_hash = :h",
            h=encoded.content_hash,
        )
    before = history(fence.run_id)

    with pytest.raises(CheckpointCorrupt) as corrupt:
        store.publish(fence, attempt, encoded)

    assert corrupt.value.details == {"content_hash": encoded.content_hash}
    assert str(corrupt.value) == (
        f"stored content {encoded.content_hash[:12]} differs from the bytes that hash to it; "
        "run verify() and restore the database from a backup"
    )
    assert history(fence.run_id) == before
    assert store.get_attempt(attempt).next_sequence == 1


def _make_content_vanish(db: st.Database, content_hash: str) -> Callable[[], None]:
    """A trigger that drops every insert of ``content_hash``, as if a concurrent collection
    deleted the row each time right after it was inserted; returns its removal."""
    if db.engine.sa.dialect.name == "sqlite":
        create = [
            "CREATE TRIGGER tt_test_vanish BEFORE INSERT ON tt_checkpoint_contents "
            f"WHEN NEW.content_hash = '{content_hash}' BEGIN SELECT RAISE(IGNORE); END"
        ]
        drop = ["DROP TRIGGER tt_test_vanish"]
    else:
        create = [
            "CREATE FUNCTION tt_test_vanish() RETURNS trigger LANGUAGE plpgsql "
            "AS $$ BEGIN RETURN NULL; END $$",
            "CREATE TRIGGER tt_test_vanish BEFORE INSERT ON tt_checkpoint_contents FOR EACH ROW "
            f"WHEN (NEW.content_hash = '{content_hash}') EXECUTE FUNCTION tt_test_vanish()",
        ]
        drop = [
            "DROP TRIGGER tt_test_vanish ON tt_checkpoint_contents",
            "DROP FUNCTION tt_test_vanish()",
        ]

    def run(statements: list[str]) -> None:
        def work(conn: sa.Connection) -> None:
            for statement in statements:
                conn.exec_driver_sql(statement)

        db.engine.transaction(work)

    run(create)
    return lambda: run(drop)


def test_a_publish_whose_content_keeps_vanishing_raises_a_retryable_error_and_writes_nothing(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey, history
) -> None:
    encoded = checkpoint("elusive").encode()
    restore = _make_content_vanish(db, encoded.content_hash)
    before = history(fence.run_id)

    with pytest.raises(TransientStoreError) as gave_up:
        store.publish(fence, attempt, encoded)

    assert gave_up.value.retryable
    assert gave_up.value.details == {"content_hash": encoded.content_hash}
    assert str(gave_up.value) == (
        f"content {encoded.content_hash[:12]} kept appearing and disappearing under a "
        "concurrent collection; retry"
    )
    assert history(fence.run_id) == before
    restore()
    ref = store.publish(fence, attempt, encoded)  # the retry the error asks for
    assert (ref.sequence, refs_of(db, fence.run_id)) == (0, [ref])
    assert store.load(ref) == checkpoint("elusive")


def test_a_publish_after_a_takeover_says_who_owns_the_run_now(
    store: Store, fence: Fence, attempt: AttemptKey, history
) -> None:
    newer = store.claim_run(fence.run_id, "other")
    before = history(fence.run_id)

    with pytest.raises(FenceLost) as lost:
        store.publish(fence, attempt, checkpoint(1))

    assert str(lost.value) == (
        f"run {fence.run_id} is running under epoch {newer.epoch}; epoch {fence.epoch} lost "
        "ownership and wrote nothing"
    )
    assert lost.value.details == {"run_id": fence.run_id, "epoch": fence.epoch}
    assert history(fence.run_id) == before


def test_a_batch_of_publishes_into_two_runs_numbers_each_run_s_frames_densely_after_its_clock(
    store: Store, fence: Fence
) -> None:
    """Several publishes into one run committed together (as the group committer does) tick
    its clock once each: the frames follow the clock densely in queue order, the clock ends
    at the last of them, and the next write follows on."""
    _, other = store.create_run("wf")
    a = store.start_attempt(fence, "a").key
    b = store.start_attempt(fence, "b").key
    c = store.start_attempt(other, "c").key
    clocks = {r: store.get_run(r).clock for r in (fence.run_id, other.run_id)}
    before = store.commit_batches
    units = [
        PublishUnit(fence, a, checkpoint("a0").encode(), "progress", None),
        PublishUnit(other, c, checkpoint("c0").encode(), "progress", None),
        PublishUnit(fence, b, checkpoint("b0").encode(), "progress", None),
        PublishUnit(fence, a, checkpoint("a1").encode(), "progress", None),
    ]
    store._committer._commit(units)

    assert [u.error for u in units] == [None] * 4
    assert store.commit_batches == before + 1
    mine = store.frames(fence.run_id, after=clocks[fence.run_id])
    assert [(f.frame_no, f.node_id, f.sequence) for f in mine] == [
        (clocks[fence.run_id] + 1, "a", 0),
        (clocks[fence.run_id] + 2, "b", 0),
        (clocks[fence.run_id] + 3, "a", 1),
    ]
    assert [u.frame for u in (units[0], units[2], units[3])] == mine
    assert store.get_run(fence.run_id).clock == clocks[fence.run_id] + 3
    (theirs,) = store.frames(other.run_id, after=clocks[other.run_id])
    assert (theirs.frame_no, units[1].frame) == (clocks[other.run_id] + 1, theirs)
    assert store.get_run(other.run_id).clock == clocks[other.run_id] + 1
    after = store.publish(fence, b, checkpoint("b1"))
    assert store.frames(fence.run_id)[-1].frame_no == clocks[fence.run_id] + 4
    assert after.sequence == 1
