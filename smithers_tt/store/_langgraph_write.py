"""One write transaction of the LangGraph saver (:class:`LangGraphWrite`): a thread's run and
its clock, the values a checkpoint pins, its document, its pending writes, copies and
deletions. Plain data in (ids, bytes, :class:`EncodedCheckpoint`), frames out; nothing here
knows LangGraph's types."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import EncodedCheckpoint
from smithers_tt.store import _schema as S
from smithers_tt.store._driver import driver
from smithers_tt.store._frames import Frame
from smithers_tt.store._langgraph_sql import (
    AGENT,
    INSERT_WRITES,
    LANGGRAPH_DOC_NODE,
    LANGGRAPH_VALUE_NODE,
    LANGGRAPH_WORKFLOW,
    RUN_AND,
    RUN_EXISTS,
    SELECT_WRITES,
    UPDATE_WRITES,
    LangGraphSql,
    chunks,
    langgraph_run_id,
)
from smithers_tt.store._ledger import Entry, frame_values, insert_frames, write
from smithers_tt.store._ledger_langgraph import NodeOpened, ThreadCreated
from smithers_tt.store._publish import _insert_content as store_content
from smithers_tt.store._publish import insert_content
from smithers_tt.store._records import now_ms

Thread = tuple[str, str]
"""``(thread_id, checkpoint_ns)``."""


class _Clock(NamedTuple):
    """A thread's run after its clock advanced: the clock, and the run's incarnation."""

    clock: int
    created_at_ms: int


class PinCache:
    """Per run, the hashes this process knows its frames pin, keyed by the run's incarnation
    (``created_at_ms``: a thread deleted and created again starts afresh). Bounded."""

    def __init__(self) -> None:
        self._runs: OrderedDict[str, tuple[int, set[str]]] = OrderedDict()
        self._lock = threading.Lock()

    def known(self, run_id: str, token: int, hashes: set[str]) -> set[str]:
        """Of ``hashes``, those known to be pinned by this incarnation of the run."""
        with self._lock:
            cached = self._runs.get(run_id)
            return set(hashes & cached[1]) if cached is not None and cached[0] == token else set()

    def remember(self, run_id: str, token: int, pinned: set[str]) -> None:
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

    ``frames`` collects the frames it writes (emitted to the store's listeners once the
    transaction commits), ``pinned`` what it pinned (remembered once it commits) and
    ``outcome`` whatever the caller wants to keep once it commits.
    """

    __slots__ = ("_pins", "_sql", "conn", "frames", "outcome", "pinned")

    def __init__(self, sql: LangGraphSql, pins: PinCache, conn: Connection) -> None:
        self._sql, self._pins, self.conn = sql, pins, conn
        self.frames: list[Frame] = []
        self.outcome: dict[str, Any] = {}
        self.pinned: tuple[int, set[str]] | None = None

    def cache_nothing(self) -> None:
        """Keep nothing of this transaction in caches (it spans runs being rewritten)."""
        self.outcome.clear()
        self.pinned = None

    # --- runs and their clock ---------------------------------------------------------

    def _create_run(self, run_id: str, thread: Thread, parent: tuple[str, int] | None) -> None:
        """Create the run of a thread with one ledger write (frames 0-2: created, and one
        attempt per node; the thread row), unless another writer created it first."""
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
            ),
            create=(
                run_id,
                LANGGRAPH_WORKFLOW,
                None,  # workflow_hash
                "running",
                json.dumps(keys, ensure_ascii=False, sort_keys=True),
                1,  # owner_epoch
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
                write(db, [entry], now_ms())
        except sa.exc.IntegrityError:
            savepoint.rollback()
            if self._sql(self.conn, RUN_EXISTS, {"run": run_id}).first() is None:
                raise  # not a lost race: something else is wrong
            return  # another writer created it first
        savepoint.commit()
        self.frames.extend(entry.frames)

    def _advance(self, run_id: str, thread: Thread, by: int) -> _Clock:
        """Advance the run's clock by ``by`` (creating the run first if needed); the run row
        stays locked until the transaction ends. Returns ``(clock, created_at_ms)``."""
        params = (by, now_ms(), run_id)
        with driver(self.conn) as db:
            row = db.one(db.sql.advance_lg_run, params)
        if row is None:
            self._create_run(run_id, thread, None)
            with driver(self.conn) as db:
                row = db.one(db.sql.advance_lg_run, params)
            assert row is not None  # created above, or by the writer that won the race
        return _Clock(*row)

    def _insert_frames(self, frames: list[Frame]) -> None:
        """Insert frames numbered by :meth:`_advance`, with the ledger's statement."""
        with driver(self.conn) as db:
            insert_frames(db, frames)

    # --- checkpoints, their values and their writes ----------------------------------

    def _unpinned(self, run_id: str, token: int, hashes: set[str]) -> tuple[list[str], set[str]]:
        """Of ``hashes``, those no frame of the run pins yet (sorted), and those it does."""
        known = self._pins.known(run_id, token, hashes)
        unknown = sorted(hashes - known)
        for part in chunks(unknown):
            params: dict[str, Any] = {"run": run_id}
            marks = self._sql.in_list("h", part, params)  # placeholders only: no value inlined
            sql = f"SELECT DISTINCT content_hash FROM tt_frames WHERE {RUN_AND} IN ({marks})"  # noqa: S608
            known.update(self._sql(self.conn, sql, params).scalars())
        return [h for h in unknown if h not in known], known

    def pin(
        self, run_id: str, thread: Thread, blobs: dict[str, EncodedCheckpoint], extra: int = 0
    ) -> tuple[int, int]:
        """Lock the run (creating it if needed); store the values it uses for the first
        time, each with a value frame that pins it; reserve ``extra`` (0 or 1) more frame
        numbers after those. Returns the run's clock (the reserved number) and its
        incarnation token (``created_at_ms``)."""
        run = self._advance(run_id, thread, extra)
        top = run.clock
        new, known = self._unpinned(run_id, run.created_at_ms, set(blobs))
        if new:
            top = self._advance(run_id, thread, len(new)).clock
            stamp = now_ms()
            pins = []
            for no, digest in enumerate(new, start=top - len(new) - extra + 1):
                blob = blobs[digest]
                insert_content(self.conn, blob, stamp)
                pins.append(
                    Frame(
                        run_id,
                        no,
                        "checkpoint",
                        LANGGRAPH_VALUE_NODE,
                        0,
                        1,
                        no,
                        None,
                        digest,
                        blob.codec,
                        blob.version,
                        "progress",
                        AGENT,
                        {"size": blob.size},
                        stamp,
                    )
                )
            self._insert_frames(pins)
            self.frames.extend(pins)
        self.pinned = (run.created_at_ms, known | set(new))
        return top, run.created_at_ms

    def put_document(
        self, run_id: str, frame_no: int, checkpoint_id: str, document: EncodedCheckpoint
    ) -> None:
        """Store a checkpoint document as frame ``frame_no`` (reserved by :meth:`pin`) and
        point the checkpoint's index row at it."""
        stamp = now_ms()
        frame = Frame(
            run_id,
            frame_no,
            "checkpoint",
            LANGGRAPH_DOC_NODE,
            0,
            1,
            frame_no,
            None,
            document.content_hash,
            document.codec,
            document.version,
            "progress",
            AGENT,
            None,
            stamp,
        )
        with driver(self.conn) as db:
            store_content(db, document, stamp)
            db.together(  # one round trip on PostgreSQL
                [
                    (db.sql.insert_frame, [frame_values(frame)], True),
                    (db.sql.upsert_lg_index, (run_id, checkpoint_id, frame_no), False),
                ]
            )
        self.frames.append(frame)

    def update_writes(
        self,
        run_id: str,
        thread: Thread,
        checkpoint_id: str,
        blobs: dict[str, EncodedCheckpoint],
        merge: Callable[[str | None], str],
    ) -> None:
        """Replace a checkpoint's stored writes by ``merge(stored writes or None)``, after
        pinning ``blobs`` (the values they refer to by hash)."""
        key = {"run": run_id, "cid": checkpoint_id}
        # The row lock (or pin's lock on the run) keeps this read-modify-write exclusive.
        lock = SELECT_WRITES + self._sql.for_update
        row = None if blobs else self._sql(self.conn, lock, key).one_or_none()
        if row is None:  # values to pin, or no index row yet (the run may not exist)
            self.pin(run_id, thread, blobs)
            row = self._sql(self.conn, SELECT_WRITES, key).one_or_none()
        text = merge(row.writes_json if row is not None else None)
        self._sql(
            self.conn, INSERT_WRITES if row is None else UPDATE_WRITES, {**key, "writes": text}
        )

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
        for part in chunks(run_ids):
            self.conn.execute(S.runs.delete().where(S.runs.c.run_id.in_(list(part))))
        return run_ids

    def delete_checkpoints(self, keys: Sequence[tuple[str, str]]) -> None:
        """Delete index rows ``(run_id, checkpoint_id)`` (their frames stay)."""
        c = S.lg_checkpoints
        for run_id, checkpoint_id in keys:
            self.conn.execute(
                c.delete().where(c.c.run_id == run_id, c.c.checkpoint_id == checkpoint_id)
            )

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread (every namespace): each target run is a child of its source run;
        frames and index rows are copied, content is shared."""
        conn, t, c, f = self.conn, S.lg_threads, S.lg_checkpoints, S.frames
        target = str(target_thread_id)
        sources = conn.execute(
            sa.select(t.c.run_id, t.c.checkpoint_ns)
            .where(t.c.thread_id == str(source_thread_id))
            .order_by(t.c.checkpoint_ns)
        ).all()
        for src in sources:
            dst = langgraph_run_id(target, src.checkpoint_ns)
            thread = (target, src.checkpoint_ns)
            src_clock = conn.execute(
                sa.select(S.runs.c.clock).where(S.runs.c.run_id == src.run_id)
            ).scalar_one()
            self._create_run(dst, thread, (src.run_id, src_clock))
            old = conn.execute(
                sa.select(f)
                .where(f.c.run_id == src.run_id, f.c.kind == "checkpoint")
                .order_by(f.c.frame_no)
            ).all()
            top = self._advance(dst, thread, len(old)).clock
            stamp = now_ms()
            renumber: dict[int, int] = {}
            copies: list[Frame] = []
            for n, row in enumerate(old):
                no = top - len(old) + 1 + n
                renumber[row.frame_no] = no
                copies.append(
                    Frame(
                        dst,
                        no,
                        "checkpoint",
                        row.node_id,
                        row.iteration,
                        row.attempt,
                        no,
                        None,
                        row.content_hash,
                        row.codec,
                        row.version,
                        row.purpose,
                        row.agent_id,
                        {"copied_from": [src.run_id, row.frame_no]},
                        stamp,
                    )
                )
            for part in chunks(copies):
                self._insert_frames(list(part))
            self.frames.extend(copies)
            rows = conn.execute(sa.select(c).where(c.c.run_id == src.run_id)).all()
            for row in rows:
                conn.execute(
                    self._sql.insert(c)
                    .values(
                        run_id=dst,
                        checkpoint_id=row.checkpoint_id,
                        frame_no=renumber.get(row.frame_no),
                        writes_json=row.writes_json,
                    )
                    .on_conflict_do_update(
                        index_elements=[c.c.run_id, c.c.checkpoint_id],
                        set_={
                            "frame_no": renumber.get(row.frame_no),
                            "writes_json": row.writes_json,
                        },
                    )
                )
