"""A publish on PostgreSQL is one round trip (issue 38): its statements are guarded guesses sent
with the COMMIT. What these tests hold: the count itself, and that every guess found wrong (a
clock, a fence, a sequence, stored bytes another writer changed) is refused by the database and
the publish applied again asking, with the outcome it would have had without guessing.

Two databases objects on one store stand for two processes (each engine learns only from its
own commits)."""

from __future__ import annotations

import itertools
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import CheckpointCorrupt, FenceLost
from smithers_tt.store import AttemptKey, Fence, Store

from ._support import checkpoint, count, execute, refs_of

R = TypeVar("R")


@pytest.fixture(autouse=True)
def no_prune(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every 64th commit of a process also prunes old commit tokens, a fourth statement in
    the same round trip, and the count starts at random: counted from 1 here, no publish of
    these tests is one that prunes (a count of statements otherwise fails one run in ~20)."""
    from smithers_tt.store.backend import _postgres

    monkeypatch.setattr(_postgres, "_TOKENS", itertools.count(1))


def _sent(store: Store, publish: object) -> tuple[Counter[str], str]:
    """The messages (by type) the committer's connection sends while ``publish()`` runs, and
    the server's replies, from a libpq trace."""
    raw = store._committer._connection._conn.connection.dbapi_connection  # type: ignore[union-attr]
    with tempfile.TemporaryFile("w+") as trace:
        raw.pgconn.trace(trace.fileno())
        try:
            publish()  # type: ignore[operator]
        finally:
            raw.pgconn.untrace()
        trace.seek(0)
        lines = [line.split("\t") for line in trace.read().splitlines() if line.count("\t") >= 3]
    sent = Counter(line[3].split(" ")[0] for line in lines if line[1] == "F")
    replies = "\n".join("\t".join(line[3:]) for line in lines if line[1] == "B")
    return sent, replies


def _traced(store: Store, publish: object) -> tuple[int, str]:
    """The round trips (Sync and simple Query messages) ``publish()`` sends, and the replies."""
    sent, replies = _sent(store, publish)
    return sent["Sync"] + sent["Query"], replies


def _cost(store: Store, publish: object) -> tuple[int, int]:
    """The round trips and statements (Execute and simple Query messages) ``publish()``
    sends."""
    sent = _sent(store, publish)[0]
    return sent["Sync"] + sent["Query"], sent["Execute"] + sent["Query"]


def refused_then_asked(db: st.Database, publish: Callable[[], R]) -> R:
    """``publish()``'s result; on PostgreSQL, checked to have sent a guess that was refused
    before asking (more than the one round trip of a right guess), with an error that says
    so in the server's log (not a bare "division by zero" a DBA cannot place)."""
    if db.engine.is_sqlite:
        return publish()
    done: list[R] = []
    trips, replies = _traced(db.store, lambda: done.append(publish()))
    assert trips > 2
    assert "ErrorResponse" in replies and "smithers_tt: a guarded guess was stale" in replies
    return done[0]


@pytest.fixture
def other(db: st.Database) -> Iterator[st.Database]:
    """A second database object on the same store: another process's engine."""
    database = st.connect(db.engine.url)
    try:
        yield database
    finally:
        database.close()


def published(db: st.Database, first: st.AgentCheckpoint) -> tuple[Fence, AttemptKey]:
    """A run owned by ``db``, its attempt, and ``first`` published there (so ``db``'s engine
    has learned the run and the attempt from its own commits)."""
    _, fence = db.store.create_run("wf")
    key = db.store.start_attempt(fence, "node").key
    db.store.publish(fence, key, first)
    return fence, key


def dense(db: st.Database, run_id: str) -> None:
    """The run's frames are numbered 0..clock without a gap, and each ref names a checkpoint
    frame of its own attempt and sequence."""
    numbers = [f.frame_no for f in db.store.frames(run_id)]
    assert numbers == list(range(len(numbers)))
    frames = {f.frame_no: f for f in db.store.frames(run_id)}
    for ref in refs_of(db, run_id):
        named = [
            f
            for f in frames.values()
            if f.kind == "checkpoint"
            and (f.node_id, f.attempt, f.sequence) == (ref.node_id, ref.attempt, ref.sequence)
        ]
        assert [f.content_hash for f in named] == [ref.content_hash]


@pytest.mark.postgres
def test_a_publish_is_one_round_trip_new_or_unchanged_content_or_with_a_model_call(
    db: st.Database,
) -> None:
    """One round trip of three statements: the clock's advance carrying the commit token, the
    content, the frame with its ref and the sequence's guard; no BEGIN or COMMIT (the server
    runs the pipeline as one implicit transaction, committed at its Sync). A model call adds
    its own rows."""
    if db.engine.is_sqlite:
        pytest.skip("SQLite has no round trips")
    store = db.store
    _, fence = store.create_run("wf")
    key = store.start_attempt(fence, "node").key
    call = st.ModelCall("m", [{"role": "user", "content": "q"}], {"role": "assistant",
                        "content": "a"}, "stop", 1, 1, latency_ms=1.0, status=200)  # fmt: skip

    store.publish(fence, key, checkpoint(0))  # the committer's connection is opened here
    assert _cost(store, lambda: store.publish(fence, key, checkpoint(1))) == (1, 3)
    assert _cost(store, lambda: store.publish(fence, key, checkpoint(1))) == (1, 3)
    with_call = lambda: store.publish(fence, key, checkpoint(2), model_calls=[call])  # noqa: E731
    trips, statements = _cost(store, with_call)
    assert (trips, statements <= 7) == (1, True)
    assert [r.sequence for r in refs_of(db, fence.run_id)] == [0, 1, 2, 3]
    assert count(db, "tt_model_calls") == 1
    dense(db, fence.run_id)


@pytest.mark.postgres
def test_a_session_that_defaults_to_another_isolation_level_still_sends_begin(
    db: st.Database,
) -> None:
    """Without a BEGIN a transaction runs at the session's default isolation level: where
    that is not READ COMMITTED (a role or database may set it), the publish sends its BEGIN
    and COMMIT, and still commits in one round trip."""
    if db.engine.is_sqlite:
        pytest.skip("SQLite sends no statements over a wire")
    url = sa.make_url(str(db.engine.url))
    options = f"{url.query.get('options', '')} -cdefault_transaction_isolation=serializable"
    serializable = st.connect(
        url.update_query_dict({"options": options.strip()}).render_as_string(hide_password=False)
    )
    try:
        store = serializable.store
        _, fence = store.create_run("wf")
        key = store.start_attempt(fence, "node").key
        store.publish(fence, key, checkpoint(0))
        assert _cost(store, lambda: store.publish(fence, key, checkpoint(1))) == (1, 5)
        assert [r.sequence for r in refs_of(serializable, fence.run_id)] == [0, 1]
        dense(serializable, fence.run_id)
    finally:
        serializable.close()


def test_a_clock_another_process_moved_is_refused_and_the_publish_asks(
    db: st.Database, other: st.Database
) -> None:
    fence, key = published(db, checkpoint(0))
    # Another process of the same owner writes frames: this engine's clock is out of date.
    other.store.start_attempt(fence, "elsewhere")
    ref = refused_then_asked(db, lambda: db.store.publish(fence, key, checkpoint(1)))
    again = db.store.publish(fence, key, checkpoint(2))  # learned from the one that asked

    assert (ref.sequence, again.sequence) == (1, 2)
    assert [f.kind for f in db.store.frames(fence.run_id)][-4:] == [
        "checkpoint", "attempt_started", "checkpoint", "checkpoint"
    ]  # fmt: skip
    dense(db, fence.run_id)


def test_a_sequence_another_process_took_is_refused_and_the_publish_takes_the_next(
    db: st.Database, other: st.Database
) -> None:
    fence, key = published(db, checkpoint(0))
    other.store.publish(fence, key, checkpoint(1))  # sequence 1, behind this engine's back

    ref = refused_then_asked(db, lambda: db.store.publish(fence, key, checkpoint(2)))
    assert ref.sequence == 2
    assert [r.sequence for r in refs_of(db, fence.run_id)] == [0, 1, 2]
    dense(db, fence.run_id)


def test_an_owner_fenced_out_by_another_process_cannot_publish_on_a_guess(
    db: st.Database, other: st.Database
) -> None:
    fence, key = published(db, checkpoint(0))
    other.store.claim_run(fence.run_id)  # a new epoch: this engine still knows the old one
    before = (count(db, "tt_frames"), count(db, "tt_checkpoint_contents"))

    with pytest.raises(FenceLost):
        refused_then_asked(db, lambda: db.store.publish(fence, key, checkpoint("late")))
    assert (count(db, "tt_frames"), count(db, "tt_checkpoint_contents")) == before


def test_stored_bytes_that_differ_from_their_hash_are_found_on_a_guess(
    db: st.Database,
) -> None:
    fence, key = published(db, checkpoint("same"))
    digest = checkpoint("same").encode().content_hash
    execute(db, "UPDATE tt_checkpoint_contents SET data = :d WHERE content_hash = :h",
            d=b"{}", h=digest)  # fmt: skip

    with pytest.raises(CheckpointCorrupt):
        refused_then_asked(db, lambda: db.store.publish(fence, key, checkpoint("same")))
    assert [r.sequence for r in refs_of(db, fence.run_id)] == [0]
