"""The group committer's contract with its callers (``Store.publish`` and the LangGraph
saver's writes share it): a caller that arrives while a commit runs is committed by the next
commit, together with everyone else who arrived meanwhile; each caller gets its own outcome,
once; a caller interrupted while it waits never leaves the committer stuck; a unit that
fails alone writes nothing while the others commit, a transient error is retried, and an
unexpected error fails the whole batch rather than committing part of it.

The commits are made to overlap deterministically: a unit of work blocks inside its commit
until the test releases it, and each waiting caller's wake-up event tells the test when the
caller has queued (the committer queues a unit before it waits on it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import SmithersError
from smithers_tt.store import AttemptKey, Fence, Store
from smithers_tt.store.ledger._publish import PublishUnit, WorkUnit, insert_content

from ._support import checkpoint, count, refs_of, squat_next_sequence

LIMIT = 10.0
"""A bound on every wait, so a broken committer fails the test instead of hanging it."""


class Wake(threading.Event):
    """A unit's wake-up event that says when its caller starts waiting, and can interrupt
    that caller (as a KeyboardInterrupt would) at a chosen point."""

    def __init__(self, interrupt: str | None = None) -> None:
        super().__init__()
        self.interrupt = interrupt
        """None, ``queued`` (at once), ``woken`` (once woken) or ``on_demand``
        (when :attr:`now` is set)."""
        self.waiting = threading.Event()
        self.now = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        if self.interrupt == "queued":
            raise KeyboardInterrupt
        if self.interrupt == "on_demand":
            assert self.now.wait(LIMIT)
            raise KeyboardInterrupt
        woken = super().wait(LIMIT if timeout is None else timeout)
        if self.interrupt == "woken":
            raise KeyboardInterrupt
        return woken


class Work:
    """Units of work that store a checkpoint's content and log what ran, in order."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def unit(self, name: str, gate: threading.Event | None = None, **wake: Any) -> WorkUnit:
        """A unit that logs ``name``, stores the content named by it, waits for ``gate`` if
        given (logging ``name-end`` once released) and returns ``name``."""
        entered = threading.Event()

        def work(conn: Any) -> str:
            self.log.append(name)
            insert_content(conn, content(name), 1)
            if gate is not None:
                entered.set()
                assert gate.wait(LIMIT), f"{name} was never released"
                self.log.append(f"{name}-end")
            return name

        unit = WorkUnit(work)
        unit.wake = Wake(**wake)
        unit.entered = entered  # type: ignore[attr-defined]
        return unit


def content(name: str) -> Any:
    return checkpoint(f"work {name}").encode()


def stored(db: st.Database, name: str) -> int:
    return count(db, "tt_checkpoint_contents", content_hash=content(name).content_hash)


class Caller(threading.Thread):
    """A thread that publishes one unit and keeps what the call returned or raised."""

    def __init__(self, store: Store, unit: WorkUnit) -> None:
        super().__init__(daemon=True)
        self.store, self.unit = store, unit
        self.outcome: Any = None

    def run(self) -> None:
        try:
            self.outcome = self.store._committer.publish(self.unit)
        except BaseException as error:  # KeyboardInterrupt included: it is the outcome
            self.outcome = error

    def result(self) -> Any:
        self.join(LIMIT)
        assert not self.is_alive(), "the caller never returned"
        return self.outcome


def call(store: Store, unit: WorkUnit) -> Caller:
    caller = Caller(store, unit)
    caller.start()
    return caller


def blocked_first(store: Store, work: Work) -> tuple[Caller, threading.Event]:
    """A caller whose commit is running and holds until the returned gate is set."""
    gate = threading.Event()
    first = call(store, work.unit("a", gate))
    assert first.unit.entered.wait(LIMIT)  # type: ignore[attr-defined]
    return first, gate


def queued(store: Store, unit: WorkUnit) -> Caller:
    caller = call(store, unit)
    assert unit.wake.waiting.wait(LIMIT)  # type: ignore[attr-defined]
    return caller


def test_a_caller_that_arrives_during_a_commit_is_committed_by_the_next_one(
    db: st.Database, store: Store
) -> None:
    work = Work()
    first, gate = blocked_first(store, work)
    second = queued(store, work.unit("b"))

    gate.set()

    assert (first.result(), second.result()) == ("a", "b")
    assert work.log == ["a", "a-end", "b"]
    assert (stored(db, "a"), stored(db, "b")) == (1, 1)
    assert call(store, work.unit("c")).result() == "c"  # the committer is free again


def test_callers_that_arrive_during_a_commit_share_the_next_commit_each_with_its_result(
    db: st.Database, store: Store
) -> None:
    work = Work()
    before = store.commit_batches
    first, gate = blocked_first(store, work)
    second = queued(store, work.unit("b"))
    third = queued(store, work.unit("c"))

    gate.set()

    assert [c.result() for c in (first, second, third)] == ["a", "b", "c"]
    assert work.log == ["a", "a-end", "b", "c"]  # each unit applied once, in queue order
    assert store.commit_batches == before + 2
    assert call(store, work.unit("d")).result() == "d"
    assert store.commit_batches == before + 3
    assert [stored(db, n) for n in "abcd"] == [1, 1, 1, 1]


def test_commit_batches_counts_each_commit_once_from_zero(
    store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    assert store.commit_batches == 0
    for n in range(3):
        store.publish(fence, attempt, checkpoint(n))
    assert store.commit_batches == 3


def test_a_caller_interrupted_while_queued_withdraws_its_unit_and_blocks_nobody(
    db: st.Database, store: Store
) -> None:
    work = Work()
    before = store.commit_batches
    first, gate = blocked_first(store, work)
    withdrawn = queued(store, work.unit("b", interrupt="queued"))

    assert isinstance(withdrawn.result(), KeyboardInterrupt)
    gate.set()

    assert first.result() == "a"
    assert call(store, work.unit("c")).result() == "c"
    assert work.log == ["a", "a-end", "c"]
    assert stored(db, "b") == 0
    assert store.commit_batches == before + 2


def test_a_caller_interrupted_after_its_unit_was_taken_into_a_commit_still_has_it_committed(
    db: st.Database, store: Store
) -> None:
    work = Work()
    first, gate = blocked_first(store, work)
    second_gate = threading.Event()
    second = queued(store, work.unit("b", second_gate))
    third = queued(store, work.unit("c", interrupt="on_demand"))
    gate.set()
    assert second.unit.entered.wait(LIMIT)  # type: ignore[attr-defined]  # b commits b and c

    third.unit.wake.now.set()  # type: ignore[attr-defined]
    assert isinstance(third.result(), KeyboardInterrupt)
    second_gate.set()

    assert (first.result(), second.result()) == ("a", "b")
    assert work.log == ["a", "a-end", "b", "b-end", "c"]
    assert stored(db, "c") == 1
    assert call(store, work.unit("d")).result() == "d"


def test_a_caller_interrupted_as_it_is_woken_to_commit_still_commits_for_the_others(
    db: st.Database, store: Store
) -> None:
    work = Work()
    first, gate = blocked_first(store, work)
    second = queued(store, work.unit("b", interrupt="woken"))
    third = queued(store, work.unit("c"))

    gate.set()

    assert first.result() == "a"
    assert isinstance(second.result(), KeyboardInterrupt)
    assert third.result() == "c"
    assert work.log == ["a", "a-end", "b", "c"]
    assert (stored(db, "b"), stored(db, "c")) == (1, 1)
    assert call(store, work.unit("d")).result() == "d"


# --- failures --------------------------------------------------------------------------------


class _Refused(Exception):
    """What a unit of work raises on its own (as the LangGraph saver's ``ThreadReplaced``)."""


def _transient() -> sa.exc.DBAPIError:
    """A database error the store retries (a connection lost), on either backend."""
    return sa.exc.OperationalError(
        "SELECT 1", (), Exception("server closed the connection"), connection_invalidated=True
    )


def _fails_once(name: str, first: BaseException) -> Callable[[Any], str]:
    """Work that raises ``first`` on its first try, then stores ``name``'s content."""
    tries: list[int] = []

    def work(conn: Any) -> str:
        tries.append(1)
        if len(tries) == 1:
            raise first
        insert_content(conn, content(name), 1)
        return name

    return work


def test_a_publish_whose_commit_hits_a_transient_error_is_retried_and_succeeds(
    db: st.Database, store: Store
) -> None:
    assert store._committer.publish(WorkUnit(_fails_once("x", _transient()))) == "x"
    assert stored(db, "x") == 1


def _refuse(conn: Any) -> None:
    raise _Refused("stale")


def test_a_transient_error_in_a_batch_with_a_failing_unit_is_retried_not_reported(
    db: st.Database, store: Store
) -> None:
    units = [
        WorkUnit(_refuse),
        WorkUnit(_fails_once("retried", _transient())),
    ]
    store._committer._commit(units)

    assert type(units[0].error) is _Refused
    assert (units[1].error, units[1].result) == (None, "retried")
    assert stored(db, "retried") == 1


class _Buggy(WorkUnit):
    """A unit for which only a SmithersError is its own failure (as for a publish)."""

    isolates = (SmithersError,)


def test_an_unexpected_error_of_one_unit_fails_the_whole_batch_and_writes_nothing(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    clock = store.get_run(fence.run_id).clock
    bug = RuntimeError("a bug, not a refusal")

    def buggy(conn: Any) -> None:
        raise bug

    units = [
        PublishUnit(fence, attempt, checkpoint("p").encode(), "progress", None),
        _Buggy(buggy),
        WorkUnit(lambda conn: insert_content(conn, content("w"), 1)),
    ]
    store._committer._commit(units)

    assert [u.error for u in units] == [bug, bug, bug]
    assert refs_of(db, fence.run_id) == []
    assert stored(db, "w") == 0
    assert count(db, "tt_checkpoint_contents") == 0
    assert store.get_run(fence.run_id).clock == clock


@pytest.mark.parametrize("alone", [True, False], ids=["alone", "in_a_batch"])
def test_a_publish_the_database_refuses_raises_store_error_with_the_cause_and_writes_nothing(
    db: st.Database, store: Store, fence: Fence, alone: bool
) -> None:
    """A ref squatting the next sequence (written behind the store's back) makes the
    database refuse the publish: the caller gets a StoreError naming the database error,
    with the driver's error as its cause, and nothing of the publish is written."""
    broken = store.start_attempt(fence, "broken").key
    healthy = store.start_attempt(fence, "healthy").key
    store.publish(fence, broken, checkpoint(1))
    squat_next_sequence(store, fence, "broken")
    clock = store.get_run(fence.run_id).clock
    refused = checkpoint("refused").encode()

    if alone:
        with pytest.raises(SmithersError) as caught:
            store.publish(fence, broken, refused)
        error: BaseException | None = caught.value
    else:
        units = [
            PublishUnit(fence, broken, refused, "progress", None),
            PublishUnit(fence, healthy, checkpoint(3).encode(), "progress", None),
        ]
        store._committer._commit(units)
        error = units[0].error
        assert units[1].error is None
        clock += 1  # the healthy publish's frame

    assert type(error).__name__ == "StoreError"
    assert str(error).startswith("database error: ")
    assert len(str(error)) > len("database error: ") + 5
    assert isinstance(error.__cause__, sa.exc.IntegrityError)
    assert count(db, "tt_checkpoint_contents", content_hash=refused.content_hash) == 0
    assert store.get_run(fence.run_id).clock == clock
    # the squatter and the first publish, no more (counted: the squatter names no
    # checkpoint frame of its own, so reading it refuses)
    assert count(db, "tt_checkpoint_refs", run_id=fence.run_id, node_id="broken") == 2
