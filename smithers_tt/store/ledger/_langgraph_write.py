"""One write transaction of the LangGraph saver (:class:`LangGraphWrite`): a thread's run and
its clock, the values a checkpoint pins, its document, its pending writes, copies and
deletions. Plain data in (ids, bytes, :class:`EncodedCheckpoint`), frames out; nothing here
knows LangGraph's types."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import EncodedCheckpoint
from smithers_tt.errors import InvalidArgument, RunNotFound
from smithers_tt.store._frames import Frame
from smithers_tt.store._records import now_ms
from smithers_tt.store.backend import (
    AGENT,
    LANGGRAPH_DOC_NODE,
    LANGGRAPH_VALUE_NODE,
    LANGGRAPH_WORKFLOW,
    Driver,
    LangGraphSql,
    driver,
    langgraph_run_id,
)
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger._langgraph import (
    DocumentPut,
    FrameCopied,
    Incarnation,
    IndexCopied,
    NodeOpened,
    ThreadCreated,
    ThreadReplaced,
    ValuePinned,
    WritesPut,
)
from smithers_tt.store.ledger._langgraph_calls import LangGraphCalls, lg_call_changes
from smithers_tt.store.ledger._travel import delete_runs
from smithers_tt.store.ledger._write import Change, Entry, NewRun, write

Thread = tuple[str, str]
"""``(thread_id, checkpoint_ns)``."""


HistoryKey = tuple[int, int]
"""``(created_at_ms, owner_epoch)`` of a run: what its history is known by. A thread deleted
and created again is another incarnation; a rewind, its undo or a reset (each fences the run
with a new epoch) changes which frames are its history, and so which values they pin."""

NEW_EPOCH = 1
"""The owner epoch a thread's run is created with."""


class PinCache:
    """Per run, the hashes this process knows its frames pin, keyed by the run's
    :data:`HistoryKey` (a new incarnation or epoch starts afresh). Bounded."""

    def __init__(self) -> None:
        self._runs: OrderedDict[str, tuple[HistoryKey, set[str]]] = OrderedDict()
        self._lock = threading.Lock()

    def cached(self, run_id: str, hashes: set[str]) -> tuple[HistoryKey | None, set[str]]:
        """The history of the run this process knows (None: none), and which of ``hashes``
        it knows that history pins."""
        with self._lock:
            cached = self._runs.get(run_id)
            return (None, set()) if cached is None else (cached[0], hashes & cached[1])

    def remember(self, run_id: str, token: HistoryKey, pinned: set[str]) -> None:
        """Record hashes a committed transaction pinned in the run."""
        with self._lock:
            cached = self._runs.get(run_id)
            if cached is not None and cached[0] == token and len(cached[1]) < 100_000:
                cached[1].update(pinned)
            else:
                self._runs[run_id] = (token, set(pinned))
            self._runs.move_to_end(run_id)
            while len(self._runs) > 256:
                self._runs.popitem(last=False)

    def forget(self, run_ids: Sequence[str]) -> None:
        """Drop what is known of these runs (deleted or rewritten)."""
        with self._lock:
            for run_id in set(run_ids):
                self._runs.pop(run_id, None)


class LangGraphWrite:
    """The store side of one saver write transaction, on ``conn``.

    Each change it makes to a thread's run is one ledger write (:func:`._ledger.write`) of
    the changes of :mod:`._ledger_langgraph`: the run's clock advances once, its frames are
    numbered and inserted by the ledger. ``frames`` collects the frames it writes (emitted to
    the store's listeners once the transaction commits), ``pinned`` what it pinned
    (remembered once it commits) and ``outcome`` whatever the caller wants to keep once it
    commits.
    """

    __slots__ = ("_pins", "_sql", "conn", "frames", "outcome", "pinned")

    def __init__(self, sql: LangGraphSql, pins: PinCache, conn: Connection) -> None:
        self._sql, self._pins, self.conn = sql, pins, conn
        self.frames: list[Frame] = []
        self.outcome: dict[str, Any] = {}
        self.pinned: tuple[HistoryKey, set[str]] | None = None

    def cache_nothing(self) -> None:
        """Keep nothing of this transaction in caches (it spans runs being rewritten)."""
        self.outcome.clear()
        self.pinned = None

    # --- checkpoints, their values and their writes ----------------------------------

    def put_checkpoint(
        self,
        run_id: str,
        thread: Thread,
        checkpoint_id: str,
        document: EncodedCheckpoint,
        blobs: dict[str, EncodedCheckpoint],
        expect: int | None = None,
        step: tuple[str | None, Sequence[str]] = (None, ()),
    ) -> int:
        """Store a checkpoint in one ledger write: the values of ``blobs`` the run uses for
        the first time, each with a value frame that pins it, then the document's frame, at
        which the checkpoint's index row points (creating the thread's run if needed).
        ``step`` is its parent checkpoint's id and the nodes its pending sends go to: the
        model calls waiting for it are shown (:mod:`._langgraph_calls`).

        Returns the run's incarnation token (``created_at_ms``). With ``expect`` (a token
        cached earlier), raises :class:`ThreadReplaced`, having written nothing, when the
        run is not that incarnation."""
        put = DocumentPut(run_id, checkpoint_id, document, *step)
        return self._commit(run_id, thread, blobs, [put], expect)

    def update_writes(
        self,
        run_id: str,
        thread: Thread,
        checkpoint_id: str,
        blobs: dict[str, EncodedCheckpoint],
        merge: Callable[[str | None], str],
        calls: LangGraphCalls | None = None,
    ) -> None:
        """Replace a checkpoint's stored writes by ``merge(stored writes or None)``, pinning
        ``blobs`` (the values they refer to by hash) in the same ledger write; ``calls`` (the
        model calls the task's writes show) are recorded with it, numbered with the checkpoint
        the step makes (see :mod:`._langgraph_calls`)."""
        recorded = [] if calls is None else lg_call_changes(run_id, calls)
        self._commit(run_id, thread, blobs, [WritesPut(run_id, checkpoint_id, merge), *recorded])

    # --- the one ledger write per run ------------------------------------------------

    def _commit(
        self,
        run_id: str,
        thread: Thread,
        blobs: dict[str, EncodedCheckpoint],
        changes: Sequence[Change],
        expect: int | None = None,
        parent: tuple[str, int] | None = None,
    ) -> int:
        """Write ``changes`` to the thread's run, after a :class:`ValuePinned` per value of
        ``blobs`` it does not pin yet, in one ledger write; a missing run is created by that
        write (with ``parent``). Returns the run's incarnation token."""
        for _ in range(2):  # a second turn only after losing the race to create the run
            with driver(self.conn) as db:
                token = self._update(db, run_id, blobs, changes, expect)
            if token is not None:
                return token
            if expect is not None:
                raise ThreadReplaced(f"thread run {run_id} was deleted; nothing was written")
            stamp = now_ms()  # the new run's created_at_ms: its incarnation token
            pins = [ValuePinned(run_id, blobs[digest]) for digest in sorted(blobs)]
            if self._create_run(run_id, thread, parent, [*pins, *changes], stamp):
                if blobs:
                    self.pinned = ((stamp, NEW_EPOCH), set(blobs))
                return stamp
        raise RunNotFound(f"thread run {run_id} was created and deleted again meanwhile; retry")

    def _update(
        self,
        db: Driver,
        run_id: str,
        blobs: dict[str, EncodedCheckpoint],
        changes: Sequence[Change],
        expect: int | None,
    ) -> int | None:
        """:meth:`_commit` on a run that exists; None (nothing written) if it does not."""
        new: list[str] = []
        known: set[str] = set()
        if blobs:
            token, new, known = self._unpinned(db, run_id, set(blobs))
            if token is None:
                return None
        seen = Incarnation(expect)
        pins = [ValuePinned(run_id, blobs[digest]) for digest in new]
        entry = Entry(run_id, None, [seen, *pins, *changes])
        try:
            # Guesses only in the group committer's transaction (LangGraphStore.write), which
            # applies a refused batch again, one unit at a time under savepoints, asking.
            write(db, [entry], now_ms(), guess=True)
        except RunNotFound:  # only without blobs: otherwise the run row is locked already
            return None
        assert seen.token is not None  # set by the clock's advance
        self.frames.extend(entry.frames)
        if blobs:
            self.pinned = ((seen.token, seen.epoch), known | set(new))
        return seen.token

    def _unpinned(
        self, db: Driver, run_id: str, hashes: set[str]
    ) -> tuple[HistoryKey | None, list[str], set[str]]:
        """Lock the run row, then read which of ``hashes`` its frames pin (one round trip on
        PostgreSQL; what this process knows pinned is not asked). Returns the run's history
        key (None: no run), the hashes not pinned yet (sorted) and those pinned."""
        cached, known = self._pins.cached(run_id, hashes)
        unknown = sorted(hashes - known)
        run, *rows = db.together(
            [(db.sql.lock_lg_run, (run_id,), False), *self._asks(run_id, unknown)]
        )
        if run is None:
            return None, [], set()
        token = (run[0], run[1])
        if token != cached and known:  # the cache knew another history: ask for all
            known, unknown = set(), sorted(hashes)
            rows = db.together(self._asks(run_id, unknown))
        flags = [flag for row in rows for flag in row]  # type: ignore[union-attr]
        new = [digest for digest, flag in zip(unknown, flags, strict=True) if not flag]
        return token, new, hashes - set(new)

    def _asks(self, run_id: str, hashes: list[str]) -> list[tuple[str, Any, bool]]:
        """Steps reading whether the run's frames pin each of ``hashes``, a row per step."""
        return [
            (self._sql.pinned(len(part)), tuple(v for h in part for v in (run_id, h)), False)
            for part in self._sql.chunks(hashes)
        ]

    def _create_run(
        self,
        run_id: str,
        thread: Thread,
        parent: tuple[str, int] | None,
        changes: Sequence[Change] = (),
        stamp: int | None = None,
    ) -> bool:
        """Create the run of a thread with one ledger write (frames 0-2: created, and one
        attempt per node; the thread row), followed by ``changes``; return whether it did,
        writing nothing when another writer created the run first."""
        thread_id, ns = thread
        keys = {"thread_id": thread_id, "checkpoint_ns": ns}
        entry = Entry(
            run_id,
            None,
            (
                ThreadCreated(
                    run_id, thread_id, ns, {"workflow": LANGGRAPH_WORKFLOW, "input": keys}
                ),
                NodeOpened(run_id, LANGGRAPH_DOC_NODE, AGENT),
                NodeOpened(run_id, LANGGRAPH_VALUE_NODE, AGENT),
                *changes,
            ),
            create=NewRun(
                run_id,
                LANGGRAPH_WORKFLOW,
                None,  # workflow_hash
                "running",
                json.dumps(keys, ensure_ascii=False, sort_keys=True),
                NEW_EPOCH,
                AGENT,
                None,  # heartbeat_at_ms
                False,  # cancel_requested
                parent[0] if parent else None,
                parent[1] if parent else None,
                None,  # max_checkpoint_bytes
                json.dumps({LANGGRAPH_DOC_NODE: [], LANGGRAPH_VALUE_NODE: []}, sort_keys=True),
            ),
        )
        savepoint = self.conn.begin_nested()  # a race lost to another writer fails here only
        try:
            with driver(self.conn) as db:
                write(db, [entry], now_ms() if stamp is None else stamp)
        except sa.exc.IntegrityError:
            savepoint.rollback()
            with driver(self.conn) as db:
                if db.one(db.sql.lock_lg_run, (run_id,)) is None:
                    raise  # not a lost race: something else is wrong
            return False  # another writer created it first
        savepoint.commit()
        self.frames.extend(entry.frames)
        return True

    # --- deleting and copying --------------------------------------------------------

    def delete_runs(self, thread_id: str) -> list[str]:
        """Delete the runs of a thread (every namespace; frames and index rows go with
        them). Returns their ids."""
        t = S.lg_threads
        run_ids = list(
            self.conn.execute(
                sa.select(t.c.run_id).where(t.c.thread_id == str(thread_id))
            ).scalars()
        )
        r = S.runs
        for part in self._sql.chunks(run_ids):
            # Locked first: a fork being made holds its parent's row until it commits, and
            # the check below (a new statement) then sees it.
            self.conn.execute(
                sa.select(r.c.run_id).where(r.c.run_id.in_(list(part))).with_for_update()
            )
            forks = self.conn.execute(
                sa.select(r.c.run_id, r.c.parent_run_id)
                .where(r.c.parent_run_id.in_(list(part)), r.c.inherits.is_(True))
                .limit(5)
            ).all()
            if forks:
                shown = ", ".join(f"{child} (of {parent})" for child, parent in forks)
                raise InvalidArgument(
                    f"thread {thread_id!r} has runs forked by reference that read its history: "
                    f"{shown}. Materialise them first (smithers_tt.timetravel.materialize) or "
                    "delete them; nothing was deleted"
                )
        for part in self._sql.chunks(run_ids):
            delete_runs(self.conn, part)
        return run_ids

    def delete_checkpoints(self, keys: Sequence[tuple[str, str]]) -> None:
        """Delete index rows ``(run_id, checkpoint_id)`` (their frames stay)."""
        c = S.lg_checkpoints
        for run_id, checkpoint_id in keys:
            self.conn.execute(
                c.delete().where(c.c.run_id == run_id, c.c.checkpoint_id == checkpoint_id)
            )

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread (every namespace): each target run is a child of its source run
        (or, if it exists, goes on); frames and index rows are copied, content is shared,
        one ledger write per target run."""
        conn, t, c, f = self.conn, S.lg_threads, S.lg_checkpoints, S.frames
        target = str(target_thread_id)
        sources = conn.execute(
            sa.select(t.c.run_id, t.c.checkpoint_ns)
            .where(t.c.thread_id == str(source_thread_id))
            .order_by(t.c.checkpoint_ns)
        ).all()
        for src in sources:
            src_clock = conn.execute(
                sa.select(S.runs.c.clock).where(S.runs.c.run_id == src.run_id)
            ).scalar_one()
            old = conn.execute(
                sa.select(f)
                .where(f.c.run_id == src.run_id, f.c.kind == "checkpoint")
                .order_by(f.c.frame_no)
            ).all()
            rows = conn.execute(sa.select(c).where(c.c.run_id == src.run_id)).all()
            dst = langgraph_run_id(target, src.checkpoint_ns)
            renumber: dict[int, int] = {}
            copies: list[Change] = [FrameCopied(dst, src.run_id, row, renumber) for row in old]
            changes = [*copies, IndexCopied(dst, rows, renumber)]
            thread = (target, src.checkpoint_ns)
            self._commit(dst, thread, {}, changes, parent=(src.run_id, src_clock))
