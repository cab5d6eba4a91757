"""Garbage collection: only unreachable content, in bounded pages, never under a publish."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import smithers_tt as st
from smithers_tt.errors import AttemptNotFound, CheckpointMissing, InvalidArgument
from smithers_tt.store import AttemptKey, Fence, Store

from ._support import checkpoint, count, execute, orphan, refs_of


@pytest.fixture
def second(db: st.Database) -> Iterator[st.Database]:
    """Another Database object (its own engine and connections) on the same database."""
    other = st.connect(db.url)
    try:
        yield other
    finally:
        other.close()


def contents(db: st.Database) -> int:
    return count(db, "tt_checkpoint_contents")


def test_collect_garbage_deletes_only_content_that_nothing_reaches(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    live = store.publish(fence, attempt, checkpoint("live"))
    dead = orphan(db, checkpoint("dead"))

    report = db.collect_garbage()

    assert (report.deleted, report.done, report.cursor) == (1, True, None)
    assert report.bytes_freed == checkpoint("dead").encode().size
    assert store.load(live) == checkpoint("live")
    with pytest.raises(CheckpointMissing):
        store.read_content(dead)


def test_collect_garbage_deletes_nothing_when_run_twice(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    store.publish(fence, attempt, checkpoint("live"))
    orphan(db, checkpoint("dead"))
    db.collect_garbage()

    assert db.collect_garbage().deleted == 0
    assert contents(db) == 1


def test_collect_garbage_stops_after_max_pages_and_its_cursor_continues(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    live = [store.publish(fence, attempt, checkpoint(["live", i])) for i in range(2)]
    dead = sorted(orphan(db, checkpoint(["dead", i])) for i in range(5))
    everything = sorted([*dead, *(r.content_hash for r in live)])

    first = db.collect_garbage(page_size=2, max_pages=1)

    assert (first.pages, first.done) == (1, False)
    assert first.cursor == everything[1]
    assert first.deleted == len(set(everything[:2]) & set(dead))
    assert contents(db) == 7 - first.deleted

    deleted, cursor, calls = first.deleted, first.cursor, 1
    while cursor is not None and calls < 10:
        report = db.collect_garbage(page_size=2, max_pages=1, cursor=cursor)
        assert report.pages == 1
        deleted, cursor, calls = deleted + report.deleted, report.cursor, calls + 1

    assert report.done
    assert deleted == 5
    assert sorted(r.content_hash for r in live) == sorted(
        r.content_hash for r in refs_of(db, fence.run_id)
    )
    assert contents(db) == 2


def test_collect_garbage_reports_progress_per_page(db: st.Database) -> None:
    for i in range(3):
        orphan(db, checkpoint(i))
    pages: list[int] = []

    report = db.collect_garbage(page_size=2, progress=pages.append)

    assert sum(pages) == report.deleted == 3
    assert len(pages) == report.pages


@pytest.mark.parametrize("page_size", [0, 1001, True])
def test_collect_garbage_raises_invalid_argument_when_the_page_size_is_bad(
    db: st.Database, page_size
) -> None:
    orphan(db, checkpoint(1))

    with pytest.raises(InvalidArgument):
        db.collect_garbage(page_size=page_size)
    assert contents(db) == 1


def test_delete_attempt_removes_its_refs_and_only_its_refs(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    for i in range(3):
        store.publish(fence, attempt, checkpoint(i))
    store.finish_attempt(fence, attempt, "failed")
    kept = store.start_attempt(fence, "node").key
    survivor = store.publish(fence, kept, checkpoint("kept"))

    store.delete_attempt(attempt)

    assert refs_of(db, fence.run_id) == [survivor]
    with pytest.raises(AttemptNotFound):
        store.get_attempt(attempt)


def test_collect_garbage_keeps_content_a_frame_still_pins_after_its_attempt_was_deleted(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    """The run's history (its checkpoint frames) still reaches the content, so time travel
    can restore it."""
    ref = store.publish(fence, attempt, checkpoint("history"))
    store.finish_attempt(fence, attempt, "failed")
    store.delete_attempt(attempt)

    db.collect_garbage()

    assert count(db, "tt_frames", content_hash=ref.content_hash) >= 1
    assert store.read_content(ref.content_hash) == checkpoint("history").encode().data


def test_collect_garbage_keeps_content_shared_with_another_run(
    db: st.Database, store: Store
) -> None:
    runs = []
    for _ in range(2):
        _, fence = store.create_run("wf")
        key = store.start_attempt(fence, "node").key
        runs.append(store.publish(fence, key, checkpoint("shared")))
    execute(db, "DELETE FROM tt_runs WHERE run_id = :r", r=runs[0].run_id)

    assert db.collect_garbage().deleted == 0
    assert store.load(runs[1]) == checkpoint("shared")


ROUNDS = 200


def test_publish_keeps_its_content_when_garbage_collection_runs_at_the_same_moment(
    db: st.Database, second: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    """Publisher on one connection, collector on another, released together by a barrier,
    200 times, each time over content that nothing reached just before."""
    start = threading.Barrier(2)
    collected = 0
    failures: list[BaseException] = []

    def collect() -> None:
        nonlocal collected
        try:
            start.wait()
            collected += second.collect_garbage().deleted
        except BaseException as error:  # reported by the assertion below
            failures.append(error)

    for n in range(ROUNDS):
        cp = checkpoint(["raced", n])
        digest = orphan(db, cp)
        collector = threading.Thread(target=collect)
        collector.start()
        start.wait()
        ref = store.publish(fence, attempt, cp)
        collector.join()

        assert failures == []
        assert ref.sequence == n
        assert ref.content_hash == digest
        assert store.read_content(digest) == cp.encode().data
        assert store.load(ref) == cp

    assert refs_of(db, fence.run_id)[-1].sequence == ROUNDS - 1
    assert db.verify().ok
    print(f"the collector deleted the content first in {collected} of {ROUNDS} rounds")
