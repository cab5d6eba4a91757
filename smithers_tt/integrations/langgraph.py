"""A LangGraph checkpoint saver backed by the smithers_tt store.

``SmithersSaver(db)`` is a :class:`langgraph.checkpoint.base.BaseCheckpointSaver`: give it to
``graph.compile(checkpointer=...)`` and the graph runs unchanged, while its checkpoints gain
what the store offers: content addressed by SHA-256 and stored once across checkpoints and
threads, every read verified against its address (``CheckpointCorrupt`` instead of bad state),
and each thread's history as a smithers_tt run that the notebook debugger, the timeline, the
lineage queries and ``verify``/``collect_garbage`` understand.

Usage::

    import smithers_tt as st
    from smithers_tt.integrations.langgraph import SmithersSaver

    db = st.connect("sqlite:///agents.db")   # or postgresql+psycopg://...
    saver = SmithersSaver(db)
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "ticket-42"}}
    app.invoke({"question": "..."}, config)

    # LangGraph time travel works as usual:
    history = list(app.get_state_history(config))            # newest first
    older = history[2].config
    forked = app.update_state(older, {"question": "edited"})  # a fork from an old checkpoint
    app.invoke(None, forked)                                  # replay from there

    # ... and the thread is a smithers_tt run:
    run_id = saver.run_id("ticket-42")                        # thread (+ namespace) -> run
    db.timeline(run_id); db.snapshot(run_id)                  # or Debugger(db, run_id)

Async graphs (``ainvoke``/``astream``) use the same saver: every ``a*`` method runs its sync
twin in a worker thread.

How LangGraph maps onto the store
---------------------------------

* A **thread** (``thread_id`` + ``checkpoint_ns``) is one **run** of workflow ``langgraph``
  whose id is derived from the pair (:func:`thread_run_id`); ``tt_lg_threads`` maps it back.
  A run has two nodes: ``checkpoints`` and ``values``.
* Each LangGraph **checkpoint** is one content document (codec ``langgraph.checkpoint`` v1)
  published as a ``checkpoint`` frame of node ``checkpoints``: its id, parent id, metadata,
  channel versions, versions seen and a map from channel name to value. ``tt_lg_checkpoints``
  indexes the frame by ``(run, checkpoint_id)`` and holds the checkpoint's pending writes.
* Each **channel value** is encoded once (strict JSON when it is plain JSON, else LangGraph's
  ``JsonPlusSerializer`` msgpack bytes in base64; pickle is never used) and, when its encoding
  is longer than ``inline_max_bytes`` (default 64, the length of a SHA-256 address), stored as
  its own content (codec ``langgraph.value`` v1) referenced from the document by hash, so an
  unchanged channel costs one address per checkpoint and its bytes are stored once, across
  checkpoints, threads and copies. The first time a thread uses a value, a ``checkpoint`` frame
  of node ``values`` records (and pins) it. Shorter values are cheaper inline than by address.
* **Writes** (``put_writes``) live with their checkpoint's index row (values encoded the same
  way, long ones as content). ``copy_thread`` creates a run whose parent is the source run and
  copies frames and index rows, never content.

Frames pin every document and value, so ``collect_garbage`` keeps all of a thread's history;
``delete_thread`` deletes its runs (frames, index rows and all) and the next collection frees
the content nobody else uses. ``delete_for_runs`` removes checkpoints from LangGraph's view but
keeps the frames (the history the debugger shows) until the thread is deleted. Smithers time
travel (``db.fork``/``db.rewind``) on such a run changes only smithers_tt's view; use
LangGraph's own ``update_state``/replay to branch a thread.

``prune(thread_ids, strategy=...)`` does what PostgresSaver 3.2's does (``"keep_latest"`` or
``"delete"``); it rewrites the thread's runs, so the pruned frames go and the next
``collect_garbage`` frees what only they used. ``get_delta_channel_history`` (for LangGraph's
``DeltaChannel``) answers as the base class's walker does, in one read transaction.

Channel versions: the saver starts threads with integer versions; a thread written by a
built-in saver (string versions ``"000...0003.0.52..."``, e.g. brought over by
:mod:`smithers_tt.integrations.langgraph_import`) goes on with string versions of the same
form.

Conformance: ``langgraph-checkpoint-conformance`` passes for every capability it defines:
``put``, ``put_writes``, ``get_tuple``, ``list``, ``delete_thread``, ``delete_for_runs``,
``copy_thread`` and ``prune`` (``tests/integrations/test_langgraph_saver.py``, SQLite and
PostgreSQL).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import random
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import (
    MAX_CHECKPOINT_BYTES,
    EncodedCheckpoint,
    content_hash,
    loads,
    validate,
)
from smithers_tt.checkpoint._json import canonical_envelope
from smithers_tt.errors import (
    CheckpointCorrupt,
    CheckpointInvalid,
    CheckpointMissing,
    CheckpointTooLarge,
    InvalidArgument,
    SmithersError,
    StoreError,
)
from smithers_tt.store import _schema as S
from smithers_tt.store._engine import is_transient
from smithers_tt.store._frames import Frame, frame_row
from smithers_tt.store._publish import insert_content
from smithers_tt.store._records import now_ms

__all__ = [
    "CHECKPOINT_CODEC",
    "VALUE_CODEC",
    "WORKFLOW",
    "SmithersSaver",
    "thread_run_id",
]

WORKFLOW = "langgraph"
"""Workflow name of the runs that hold LangGraph threads."""

CHECKPOINT_CODEC = "langgraph.checkpoint"
"""Codec of a checkpoint document: ``{"id", "parent", "checkpoint", "metadata", "values"}``.
``checkpoint`` is the LangGraph checkpoint without id and channel values and ``metadata`` its
metadata, both as plain JSON (or, when they are not, encoded under ``checkpoint_encoded`` /
``metadata_encoded``); ``values`` maps channel name to an encoded value or ``{"ref": sha256}``.
An encoded value is ``{"json": value}`` or ``{"msgpack" | "bytes" | "bytearray": base64}``."""

VALUE_CODEC = "langgraph.value"
"""Codec of one channel (or write) value stored as its own content: an encoded value."""

DOC_NODE = "checkpoints"
VALUE_NODE = "values"
_AGENT = "langgraph"
_PAGE = 100
_CHUNK = 500
_ENCODINGS = ("msgpack", "bytes", "bytearray")
# Bytes a value adds to a content envelope beyond its own encoding.
_ENVELOPE_OVERHEAD = len(canonical_envelope(VALUE_CODEC, 1, None)) - len(b"null")


def thread_run_id(thread_id: str, checkpoint_ns: str = "") -> str:
    """The id of the run that holds a LangGraph thread (and namespace)."""
    key = json.dumps([str(thread_id), str(checkpoint_ns)], ensure_ascii=False)
    return "lg" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _insert(conn: Connection, table: sa.Table) -> Any:
    return (postgresql if conn.dialect.name == "postgresql" else sqlite).insert(table)


def _thread_of(config: RunnableConfig) -> tuple[str, str]:
    conf = config.get("configurable") or {}
    if conf.get("thread_id") is None:
        raise InvalidArgument("a LangGraph config needs configurable.thread_id")
    return str(conf["thread_id"]), str(conf.get("checkpoint_ns") or "")


def _verified(digest: str, data: Any, size: int) -> bytes:
    data = bytes(data)
    if len(data) != size or content_hash(data) != digest:
        raise CheckpointCorrupt(
            f"content {digest[:12]} of a LangGraph checkpoint failed its integrity check; it is "
            "never handed to LangGraph; run verify() and restore from a backup",
            content_hash=digest,
        )
    return data


def _payload(data: bytes, codec: str, digest: str) -> Any:
    """The payload of verified canonical bytes (written by this module) of ``codec``."""
    envelope = loads(data)
    if type(envelope) is not dict or envelope.get("codec") != codec or "payload" not in envelope:
        raise CheckpointCorrupt(f"content {digest[:12]} is not a {codec} document")
    return envelope["payload"]


def _delete_runs(conn: Connection, thread_id: str) -> list[str]:
    """Delete the runs of a thread (every namespace; frames and index rows go with them)."""
    t = S.lg_threads
    run_ids = list(
        conn.execute(sa.select(t.c.run_id).where(t.c.thread_id == str(thread_id))).scalars()
    )
    for part in _chunks(run_ids):
        conn.execute(S.runs.delete().where(S.runs.c.run_id.in_(list(part))))
    return run_ids


def _refs(slots: Any) -> Iterator[str]:
    for slot in slots:
        if type(slot) is dict and "ref" in slot:
            yield slot["ref"]


class _Sql:
    """Hot-path statements as driver SQL: written once with ``:name`` parameters, turned into
    ``%(name)s`` for psycopg. (Building SQLAlchemy Core statements costs more than running
    these; cold paths use Core.)"""

    def __init__(self, dialect: str) -> None:
        self.pg = dialect == "postgresql"
        self._texts: dict[str, str] = {}

    def __call__(self, conn: Connection, sql: str, params: dict[str, Any] | None = None) -> Any:
        text = self._texts.get(sql)
        if text is None:
            text = re.sub(r"(?<!:):([a-z_][a-z0-9_]*)", r"%(\1)s", sql) if self.pg else sql
            self._texts[sql] = text
        return conn.exec_driver_sql(text, params or {})

    @staticmethod
    def in_list(name: str, values: Sequence[Any], params: dict[str, Any]) -> str:
        """``:name0, :name1, ...`` for an IN list, adding the values to ``params``."""
        keys = [f"{name}{n}" for n in range(len(values))]
        params.update(zip(keys, values, strict=True))
        return ", ".join(f":{k}" for k in keys)


_ADVANCE = (
    "UPDATE tt_runs SET clock = clock + :by, updated_at_ms = :now WHERE run_id = :run "
    "RETURNING clock, created_at_ms"
)
_INSERT_CONTENT = (
    "INSERT INTO tt_checkpoint_contents (content_hash, data, size_bytes, created_at_ms) "
    "VALUES (:hash, :data, :size, :now) ON CONFLICT (content_hash) DO NOTHING"
)
_INSERT_FRAME = (
    "INSERT INTO tt_frames (run_id, frame_no, kind, node_id, iteration, attempt, sequence, "
    "state, content_hash, codec, version, purpose, agent_id, data_json, created_at_ms) VALUES "
    "(:run_id, :frame_no, :kind, :node_id, :iteration, :attempt, :sequence, :state, "
    ":content_hash, :codec, :version, :purpose, :agent_id, :data_json, :created_at_ms)"
)
_UPSERT_INDEX = (
    "INSERT INTO tt_lg_checkpoints (run_id, checkpoint_id, frame_no, writes_json) "
    "VALUES (:run, :cid, :frame, NULL) ON CONFLICT (run_id, checkpoint_id) "
    "DO UPDATE SET frame_no = excluded.frame_no"
)
_SELECT_WRITES = (
    "SELECT writes_json FROM tt_lg_checkpoints WHERE run_id = :run AND checkpoint_id = :cid"
)
_INSERT_WRITES = (
    "INSERT INTO tt_lg_checkpoints (run_id, checkpoint_id, frame_no, writes_json) "
    "VALUES (:run, :cid, NULL, :writes)"
)
_UPDATE_WRITES = (
    "UPDATE tt_lg_checkpoints SET writes_json = :writes "
    "WHERE run_id = :run AND checkpoint_id = :cid"
)
_RUN_AND = "run_id = :run AND content_hash"
_CONTENTS_WHERE = "FROM tt_checkpoint_contents WHERE content_hash"
# Index rows whose frame holds a document, with the document's bytes.
_SELECT_DOCS = (
    "SELECT c.run_id, c.checkpoint_id, c.frame_no, c.writes_json, t.thread_id, t.checkpoint_ns "
    "FROM tt_lg_checkpoints c JOIN tt_lg_threads t ON t.run_id = c.run_id "
    "WHERE c.frame_no IS NOT NULL"
)
"""Index rows that have a document. Their frames and contents are read by primary key in a
second statement (a join lets PostgreSQL, before statistics exist, scan a run's frames once
per row)."""
_FRAME_DOCS = (
    "SELECT f.frame_no, f.kind, f.node_id, f.content_hash, d.data, d.size_bytes FROM tt_frames f "
    "LEFT JOIN tt_checkpoint_contents d ON d.content_hash = f.content_hash WHERE f.run_id = :run "
    "AND f.frame_no IN "
)


class _GroupCommit:
    """One writer at a time, many writes per commit.

    LangGraph writes a step's task writes and its next checkpoint from background threads.
    Each write queues here; whoever holds the commit lock takes everything queued and commits
    it in one transaction (one fsync), each write in a savepoint of its own so that one
    failing write fails alone. Waiting on this lock (not in SQLite's busy handler, whose
    sleeps last milliseconds) also keeps SQLite writers of one process from contending.
    """

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._queue: list[_Unit] = []
        self._queue_lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self.commits = 0
        self.writes = 0

    def run(self, work: Any) -> Any:
        unit = _Unit(work)
        with self._queue_lock:
            self._queue.append(unit)
        while not unit.done.is_set():
            with self._commit_lock:
                if unit.done.is_set():
                    break
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                if batch:
                    self._commit(batch)
        if unit.error is not None:
            raise unit.error
        return unit.result

    def _commit(self, batch: list[_Unit]) -> None:
        def tx(conn: Connection) -> list[tuple[Any, BaseException | None]]:
            if len(batch) == 1:
                return [(batch[0].work(conn), None)]
            outcomes: list[tuple[Any, BaseException | None]] = []
            for unit in batch:
                savepoint = conn.begin_nested()
                try:
                    result = unit.work(conn)
                except SmithersError as error:
                    savepoint.rollback()
                    outcomes.append((None, error))
                except sa.exc.DBAPIError as error:
                    if is_transient(error):
                        raise  # the whole batch is tried again on a fresh transaction
                    savepoint.rollback()
                    failure = StoreError(f"database error: {str(error.orig)[:300]}")
                    failure.__cause__ = error
                    outcomes.append((None, failure))
                else:
                    savepoint.commit()
                    outcomes.append((result, None))
            return outcomes

        try:
            outcomes = self.engine.transaction(tx)
            self.commits += 1
            self.writes += len(batch)
        except BaseException as error:  # the transaction failed as a whole
            outcomes = [(None, error)] * len(batch)
        for unit, (result, error) in zip(batch, outcomes, strict=True):
            unit.result, unit.error = result, error
            unit.done.set()


class _Unit:
    __slots__ = ("done", "error", "result", "work")

    def __init__(self, work: Any) -> None:
        self.work = work
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()


class _Row(NamedTuple):
    run_id: str
    checkpoint_id: str
    writes_json: str | None
    thread_id: str
    checkpoint_ns: str
    content_hash: str
    data: Any
    size_bytes: int | None


class _Stale(Exception):
    """A cached parent belongs to an earlier incarnation of the thread's run."""


class _Recent:
    """What this process stored of a recent checkpoint: its run's incarnation, its channel
    versions and its value slots (reused by its children for channels that did not change)."""

    __slots__ = ("token", "values", "versions")

    def __init__(self, token: int, versions: dict[str, Any], values: dict[str, Any]) -> None:
        self.token, self.versions, self.values = token, versions, values


class _Paging:
    """Keyset paging shared by ``list`` and ``alist``: page sizes, the cursor, the limit."""

    def __init__(self, limit: int | None, filtered: bool) -> None:
        self.left, self.filtered = limit, filtered
        self.cursor: tuple[str, str] | None = None
        self.more = limit is None or limit > 0

    @property
    def size(self) -> int:
        if self.left is None or self.filtered:
            return _PAGE
        return max(1, min(_PAGE, self.left))

    def take(
        self, tuples: list[CheckpointTuple], cursor: tuple[str, str] | None
    ) -> list[CheckpointTuple]:
        if self.left is not None:
            tuples = tuples[: self.left]
            self.left -= len(tuples)
        self.cursor = cursor
        self.more = cursor is not None and (self.left is None or self.left > 0)
        return tuples


class SmithersSaver(BaseCheckpointSaver[int | str]):
    """LangGraph checkpoints in a smithers_tt database (see the module documentation).

    Args:
        db: an open :class:`smithers_tt.Database` (SQLite or PostgreSQL).
        serde: LangGraph serializer for values that are not plain JSON; default
            ``JsonPlusSerializer(pickle_fallback=False)``. A serializer with pickle enabled is
            refused.
        inline_max_bytes: channel and write values whose encoding is at most this long are
            kept inside the checkpoint document instead of as content of their own (0: every
            value is content).
    """

    def __init__(self, db: Any, *, serde: Any | None = None, inline_max_bytes: int = 64) -> None:
        serde = serde if serde is not None else JsonPlusSerializer(pickle_fallback=False)
        if getattr(serde, "pickle_fallback", False):
            raise InvalidArgument("SmithersSaver never stores pickles: turn pickle_fallback off")
        if type(inline_max_bytes) is not int or inline_max_bytes < 0:
            raise InvalidArgument(f"inline_max_bytes must be an int >= 0, not {inline_max_bytes!r}")
        super().__init__(serde=serde)
        self.db = db
        self.engine = db.engine
        self.store = db.store
        self.inline_max_bytes = inline_max_bytes
        # run_id -> (created_at_ms of the run, hashes known to be pinned by its frames)
        self._pinned: OrderedDict[str, tuple[int, set[str]]] = OrderedDict()
        self._pinned_lock = threading.Lock()
        self._sql = _Sql(self.engine.dialect)
        # (run_id, checkpoint_id) -> what this process stored of a recent checkpoint
        self._recent: OrderedDict[tuple[str, str], _Recent] = OrderedDict()
        self._select_writes = _SELECT_WRITES + ("" if self.engine.is_sqlite else " FOR UPDATE")
        self._committer = _GroupCommit(self.engine)

    # --- naming --------------------------------------------------------------------------

    @staticmethod
    def run_id(thread_id: str, checkpoint_ns: str = "") -> str:
        """The smithers_tt run that holds a thread (and namespace); see :func:`thread_run_id`."""
        return thread_run_id(thread_id, checkpoint_ns)

    # --- versions ------------------------------------------------------------------------

    def get_next_version(self, current: Any, channel: None = None) -> Any:
        """The version after ``current``: ``current + 1`` for the integer versions this saver
        starts threads with; for the string versions LangGraph's built-in savers write
        (``"000...0003.0.52..."``: a zero-padded counter, then a random part), the next counter
        in the same form, so a thread written by SqliteSaver or PostgresSaver continues here
        (LangGraph compares the versions of one thread with each other, so their type never
        changes within it)."""
        if isinstance(current, str):
            counter = current.split(".", 1)[0]
            if not counter.isdigit():
                raise CheckpointCorrupt(
                    f"channel version {current[:40]!r} is neither an int nor the form "
                    "'<counter>.<random>' LangGraph's savers write"
                )
            return f"{int(counter) + 1:032}.{random.random():016}"
        if current is None:
            return 1
        return current + 1

    # --- values --------------------------------------------------------------------------

    def _encode(self, value: Any) -> dict[str, Any]:
        """``{"json": v}`` for plain JSON values, else ``{"msgpack"|"bytes"|...: base64}``."""
        try:
            validate(value)
        except CheckpointInvalid:
            pass
        else:
            return {"json": value}
        kind, data = self.serde.dumps_typed(value)
        if kind == "null":
            return {"json": None}
        if kind not in _ENCODINGS:
            raise InvalidArgument(f"serializer produced {kind!r}; only {_ENCODINGS} are stored")
        return {kind: base64.b64encode(data).decode("ascii")}

    def _field(self, name: str, value: Any) -> dict[str, Any]:
        """A document field: ``{name: value}`` when plain JSON, else ``{name + "_encoded":
        encoded value}``."""
        encoded = self._encode(value)
        return {name: value} if "json" in encoded else {f"{name}_encoded": encoded}

    def _unfield(self, doc: dict[str, Any], name: str) -> Any:
        if name in doc:
            return doc[name]
        return self._decode(doc.get(f"{name}_encoded"))

    def _decode(self, encoded: Any) -> Any:
        if type(encoded) is not dict or len(encoded) != 1:
            raise CheckpointCorrupt(f"not an encoded LangGraph value: {str(encoded)[:80]}")
        ((kind, data),) = encoded.items()
        if kind == "json":
            return data
        if kind in _ENCODINGS and type(data) is str:
            return self.serde.loads_typed((kind, base64.b64decode(data)))
        raise CheckpointCorrupt(f"unknown LangGraph value encoding {kind!r}")

    def _slot(self, value: Any, blobs: dict[str, EncodedCheckpoint]) -> dict[str, Any]:
        """Encode a value for a document: inline, or ``{"ref": hash}`` with its content."""
        encoded = self._encode(value)
        data = canonical_envelope(VALUE_CODEC, 1, encoded)
        if len(data) - _ENVELOPE_OVERHEAD <= self.inline_max_bytes:
            return encoded
        if len(data) > MAX_CHECKPOINT_BYTES:
            raise CheckpointTooLarge(
                f"a LangGraph value encodes to {len(data)} bytes, above the checkpoint ceiling "
                f"of {MAX_CHECKPOINT_BYTES} bytes",
                size=len(data),
                limit=MAX_CHECKPOINT_BYTES,
            )
        digest = content_hash(data)
        blobs[digest] = EncodedCheckpoint(VALUE_CODEC, 1, data, digest)
        return {"ref": digest}

    def _unslot(self, slot: Any, contents: dict[str, bytes]) -> Any:
        if type(slot) is dict and set(slot) == {"ref"}:
            data = contents.get(slot["ref"])
            if data is None:
                raise CheckpointMissing(f"LangGraph value {str(slot['ref'])[:12]} is not stored")
            return self._decode(_payload(data, VALUE_CODEC, slot["ref"]))
        return self._decode(slot)

    # --- runs and frames -----------------------------------------------------------------

    def _create_run(
        self,
        conn: Connection,
        run_id: str,
        thread_id: str,
        ns: str,
        frames: list[Frame],
        parent: tuple[str, int] | None = None,
    ) -> None:
        """Create the run of a thread (frames 0-2: created, and one attempt per node)."""
        stamp = now_ms()
        thread = {"thread_id": thread_id, "checkpoint_ns": ns}
        inserted = conn.execute(
            _insert(conn, S.runs)
            .values(
                run_id=run_id,
                workflow=WORKFLOW,
                workflow_hash=None,
                status="running",
                input_json=json.dumps(thread, ensure_ascii=False, sort_keys=True),
                output_json=None,
                error=None,
                owner_epoch=1,
                owner_id=_AGENT,
                heartbeat_at_ms=None,
                cancel_requested=False,
                parent_run_id=parent[0] if parent else None,
                parent_frame_no=parent[1] if parent else None,
                max_checkpoint_bytes=None,
                clock=2,
                graph_json=json.dumps({DOC_NODE: [], VALUE_NODE: []}, sort_keys=True),
                created_at_ms=stamp,
                updated_at_ms=stamp,
            )
            .on_conflict_do_nothing()
        ).rowcount
        if not inserted:  # another writer created it first
            return
        new = [
            Frame(
                run_id,
                0,
                "run_created",
                state="running",
                created_at_ms=stamp,
                data={"workflow": WORKFLOW, "input": thread},
            )
        ]
        attempt = {
            "run_id": run_id,
            "iteration": 0,
            "attempt": 1,
            "state": "in_progress",
            "owner_epoch": 1,
            "next_sequence": 0,
            "discard_resume": False,
            "started_at_ms": stamp,
        }
        for n, node in enumerate((DOC_NODE, VALUE_NODE), start=1):
            new.append(
                Frame(
                    run_id,
                    n,
                    "attempt_started",
                    node,
                    0,
                    1,
                    state="in_progress",
                    agent_id=_AGENT,
                    created_at_ms=stamp,
                )
            )
            conn.execute(S.attempts.insert().values(node_id=node, **attempt))
        conn.execute(S.frames.insert(), [frame_row(f) for f in new])
        conn.execute(
            S.lg_threads.insert().values(
                run_id=run_id, thread_id=thread_id, checkpoint_ns=ns, created_at_ms=stamp
            )
        )
        frames.extend(new)

    def _advance(
        self, conn: Connection, run_id: str, thread_id: str, ns: str, by: int, frames: list[Frame]
    ) -> Any:
        """Advance the run's clock by ``by`` (creating the run first if needed); the run row
        stays locked until the transaction ends. Returns ``(clock, created_at_ms)``."""
        params = {"by": by, "now": now_ms(), "run": run_id}
        row = self._sql(conn, _ADVANCE, params).one_or_none()
        if row is None:
            self._create_run(conn, run_id, thread_id, ns, frames)
            row = self._sql(conn, _ADVANCE, params).one()
        return row

    def _insert_frames(self, conn: Connection, frames: list[Frame]) -> None:
        rows = [frame_row(f) for f in frames]
        if len(rows) == 1:
            self._sql(conn, _INSERT_FRAME, rows[0])
        elif rows:
            conn.execute(S.frames.insert(), rows)

    def _unpinned(
        self, conn: Connection, run_id: str, token: int, hashes: set[str]
    ) -> tuple[list[str], set[str]]:
        """Of ``hashes``, those no frame of the run pins yet (sorted), and those it does."""
        with self._pinned_lock:
            cached = self._pinned.get(run_id)
            known = set(hashes & cached[1]) if cached is not None and cached[0] == token else set()
        unknown = sorted(hashes - known)
        for part in _chunks(unknown):
            params: dict[str, Any] = {"run": run_id}
            marks = _Sql.in_list("h", part, params)  # placeholders only: no value is inlined
            sql = f"SELECT DISTINCT content_hash FROM tt_frames WHERE {_RUN_AND} IN ({marks})"  # noqa: S608
            found = self._sql(conn, sql, params).scalars()
            known.update(found)
        return [h for h in unknown if h not in known], known

    def _pin(
        self,
        conn: Connection,
        run_id: str,
        thread: tuple[str, str],
        blobs: dict[str, EncodedCheckpoint],
        frames: list[Frame],
        outcome: dict[str, Any],
        extra: int = 0,
    ) -> int:
        """Lock the run (creating it if needed); store the values it uses for the first
        time, each with a ``values`` frame that pins it; reserve ``extra`` (0 or 1) more
        frame numbers after those. Returns the run's clock (the reserved number)."""
        run = self._advance(conn, run_id, *thread, extra, frames)
        top = run.clock
        new, known = self._unpinned(conn, run_id, run.created_at_ms, set(blobs))
        if new:
            top = self._advance(conn, run_id, *thread, len(new), frames).clock
            stamp = now_ms()
            pins = []
            for no, digest in enumerate(new, start=top - len(new) - extra + 1):
                insert_content(conn, blobs[digest], stamp)
                pins.append(
                    Frame(
                        run_id,
                        no,
                        "checkpoint",
                        VALUE_NODE,
                        0,
                        1,
                        no,
                        None,
                        digest,
                        VALUE_CODEC,
                        1,
                        "progress",
                        _AGENT,
                        {"size": blobs[digest].size},
                        stamp,
                    )
                )
            self._insert_frames(conn, pins)
            frames.extend(pins)
        outcome["pinned"] = (run.created_at_ms, known | set(new))
        return top

    def _remember(self, run_id: str, token: int, pinned: set[str]) -> None:
        with self._pinned_lock:
            cached = self._pinned.get(run_id)
            if cached is not None and cached[0] == token and len(cached[1]) < 100_000:
                cached[1].update(pinned)
            else:
                self._pinned[run_id] = (token, set(pinned))
            self._pinned.move_to_end(run_id)
            while len(self._pinned) > 256:
                self._pinned.popitem(last=False)

    def _forget(self, run_ids: Sequence[str]) -> None:
        gone = set(run_ids)
        with self._pinned_lock:
            for run_id in gone:
                self._pinned.pop(run_id, None)
            for key in [k for k in self._recent if k[0] in gone]:
                del self._recent[key]

    def _write(self, run_id: str, work: Any) -> Any:
        """Run a write transaction; emit its frames to the store's listeners and remember
        the hashes it pinned (only once it committed)."""
        frames: list[Frame] = []
        outcome: dict[str, Any] = {}

        def tx(conn: Connection) -> Any:
            frames.clear()
            outcome.clear()
            return work(conn, frames, outcome)

        result = self._committer.run(tx)
        if "pinned" in outcome:
            self._remember(run_id, *outcome["pinned"])
        if "recent" in outcome:
            with self._pinned_lock:
                self._recent[(run_id, outcome["checkpoint_id"])] = outcome["recent"]
                while len(self._recent) > 1024:
                    self._recent.popitem(last=False)
        self.store._emit(frames)
        return result

    # --- writing -------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: one document and a frame for it, plus the values the thread
        uses for the first time (each with a frame), in one transaction."""
        run_id, parent, put = self._prepare_put(config, checkpoint, metadata, new_versions)
        previous = None
        if parent is not None:
            with self._pinned_lock:
                previous = self._recent.get((run_id, str(parent)))
        try:
            self._write(run_id, put(previous))
        except _Stale:  # the thread was deleted and created again since: encode everything
            self._write(run_id, put(None))
        thread_id, ns = _thread_of(config)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": str(checkpoint["id"]),
            }
        }

    def _prepare_put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[str, Any, Any]:
        """``(run_id, parent checkpoint id, put)``: ``put(previous)`` encodes the checkpoint
        (reusing the slots of ``previous``, its parent as this process stored it) and returns
        the transaction body that stores it."""
        thread_id, ns = _thread_of(config)
        parent = (config.get("configurable") or {}).get("checkpoint_id")
        rest = dict(checkpoint)
        checkpoint_id = str(rest.pop("id"))
        channel_values = rest.pop("channel_values", None) or {}
        versions = rest.get("channel_versions") or {}
        metadata = get_serializable_checkpoint_metadata(config, metadata)
        run_id = thread_run_id(thread_id, ns)
        fields = {**self._field("checkpoint", rest), **self._field("metadata", metadata)}

        def build(
            previous: _Recent | None,
        ) -> tuple[EncodedCheckpoint, dict[str, EncodedCheckpoint], dict[str, Any]]:
            # A channel whose version did not change holds the value its parent stored under
            # that version (what every LangGraph saver relies on): reuse the parent's slot
            # instead of encoding and hashing the value again.
            blobs: dict[str, EncodedCheckpoint] = {}
            values: dict[str, Any] = {}
            for name, value in channel_values.items():
                if name not in versions:
                    continue
                if (
                    previous is not None
                    and name not in new_versions
                    and name in previous.values
                    and previous.versions.get(name) == versions[name]
                ):
                    values[name] = previous.values[name]
                else:
                    values[name] = self._slot(value, blobs)
            payload = {
                "id": checkpoint_id,
                "parent": None if parent is None else str(parent),
                **fields,
                "values": values,
            }
            data = canonical_envelope(CHECKPOINT_CODEC, 1, payload)
            if len(data) > MAX_CHECKPOINT_BYTES:
                raise CheckpointTooLarge(
                    f"LangGraph checkpoint {checkpoint_id} encodes to {len(data)} bytes, above "
                    f"the ceiling of {MAX_CHECKPOINT_BYTES}",
                    size=len(data),
                    limit=MAX_CHECKPOINT_BYTES,
                )
            return EncodedCheckpoint(CHECKPOINT_CODEC, 1, data, content_hash(data)), blobs, values

        def put(previous: _Recent | None) -> Any:
            return self._put_work(run_id, thread_id, ns, checkpoint_id, versions, build, previous)

        return run_id, parent, put

    def _put_work(
        self,
        run_id: str,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        versions: ChannelVersions,
        build: Any,
        previous: _Recent | None,
    ) -> Any:
        """The transaction body of a put (``work(conn, frames, outcome)``)."""
        document, blobs, values = build(previous)

        def work(conn: Connection, frames: list[Frame], outcome: dict[str, Any]) -> None:
            no = self._pin(conn, run_id, (thread_id, ns), blobs, frames, outcome, extra=1)
            token = outcome["pinned"][0]
            if previous is not None and previous.token != token:
                raise _Stale
            outcome["recent"] = _Recent(token, dict(versions), values)
            outcome["checkpoint_id"] = checkpoint_id
            stamp = now_ms()
            fresh = self._sql(
                conn,
                _INSERT_CONTENT,
                {
                    "hash": document.content_hash,
                    "data": document.data,
                    "size": document.size,
                    "now": stamp,
                },
            ).rowcount
            if not fresh:  # the same document again: compare (and lock) the stored one
                insert_content(conn, document, stamp)
            frame = Frame(
                run_id,
                no,
                "checkpoint",
                DOC_NODE,
                0,
                1,
                no,
                None,
                document.content_hash,
                CHECKPOINT_CODEC,
                1,
                "progress",
                _AGENT,
                None,
                stamp,
            )
            self._insert_frames(conn, [frame])
            self._sql(conn, _UPSERT_INDEX, {"run": run_id, "cid": checkpoint_id, "frame": no})
            frames.append(frame)

        return work

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes with their checkpoint. Writing the same ``(task_id, idx)``
        again is a no-op, except for special channels (errors, interrupts), which replace."""
        self._write(*self._writes_work(config, writes, task_id, task_path))

    def _writes_work(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> tuple[str, Any]:
        """``(run_id, transaction body)`` of :meth:`put_writes`."""
        thread_id, ns = _thread_of(config)
        checkpoint_id = (config.get("configurable") or {}).get("checkpoint_id")
        if checkpoint_id is None:
            raise InvalidArgument("put_writes needs configurable.checkpoint_id")
        checkpoint_id = str(checkpoint_id)
        blobs: dict[str, EncodedCheckpoint] = {}
        encoded = [
            (str(WRITES_IDX_MAP.get(channel, idx)), channel, self._slot(value, blobs))
            for idx, (channel, value) in enumerate(writes)
        ]
        replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        run_id = thread_run_id(thread_id, ns)
        key = {"run": run_id, "cid": checkpoint_id}

        def work(conn: Connection, frames: list[Frame], outcome: dict[str, Any]) -> None:
            # The row lock (or _pin's lock on the run) keeps this read-modify-write exclusive.
            row = None if blobs else self._sql(conn, self._select_writes, key).one_or_none()
            if row is None:  # values to pin, or no index row yet (the run may not exist)
                self._pin(conn, run_id, (thread_id, ns), blobs, frames, outcome)
                row = self._sql(conn, _SELECT_WRITES, key).one_or_none()
            stored = json.loads(row.writes_json) if row is not None and row.writes_json else {}
            task = stored.setdefault(task_id, {"path": task_path, "w": {}})
            for idx, channel, slot in encoded:
                if replace or idx not in task["w"]:
                    task["w"][idx] = [channel, slot]
            text = json.dumps(stored, ensure_ascii=False, separators=(",", ":"))
            self._sql(
                conn, _INSERT_WRITES if row is None else _UPDATE_WRITES, {**key, "writes": text}
            )

        return run_id, work

    # --- reading -------------------------------------------------------------------------

    def _contents(self, conn: Connection, hashes: set[str]) -> dict[str, bytes]:
        """Verified bytes of these contents (missing ones are left out)."""
        out: dict[str, bytes] = {}
        for part in _chunks(sorted(hashes)):
            params: dict[str, Any] = {}
            marks = _Sql.in_list("h", part, params)  # placeholders only: no value is inlined
            sql = f"SELECT content_hash, data, size_bytes {_CONTENTS_WHERE} IN ({marks})"
            rows = self._sql(conn, sql, params)
            for row in rows:
                out[row.content_hash] = _verified(row.content_hash, row.data, row.size_bytes)
        return out

    def _attach(self, conn: Connection, rows: Sequence[Any]) -> list[_Row]:
        """Index rows with their document frame's content (rows whose frame is gone or holds
        no document, as after a smithers_tt rewind, are left out)."""
        by_run: dict[str, list[Any]] = {}
        for row in rows:
            by_run.setdefault(row.run_id, []).append(row)
        found: dict[tuple[str, int], Any] = {}
        for run_id, group in by_run.items():
            for part in _chunks(group):
                params: dict[str, Any] = {"run": run_id}
                marks = _Sql.in_list("f", [r.frame_no for r in part], params)
                for frame in self._sql(conn, f"{_FRAME_DOCS}({marks})", params):
                    found[(run_id, frame.frame_no)] = frame
        out: list[_Row] = []
        for row in rows:
            frame = found.get((row.run_id, row.frame_no))
            if frame is None or frame.kind != "checkpoint" or frame.node_id != DOC_NODE:
                continue
            out.append(
                _Row(
                    row.run_id,
                    row.checkpoint_id,
                    row.writes_json,
                    row.thread_id,
                    row.checkpoint_ns,
                    frame.content_hash,
                    frame.data,
                    frame.size_bytes,
                )
            )
        return out

    def _documents(self, rows: Sequence[Any]) -> list[tuple[Any, dict]]:
        """The verified document of each index row (rows whose frame holds another
        checkpoint, as after a smithers_tt rewind, are skipped)."""
        out: list[tuple[Any, dict]] = []
        for row in rows:
            if row.data is None:
                raise CheckpointMissing(
                    f"the document of LangGraph checkpoint {row.checkpoint_id} is not stored"
                )
            data = _verified(row.content_hash, row.data, row.size_bytes)
            doc = _payload(data, CHECKPOINT_CODEC, row.content_hash)
            if type(doc) is not dict:
                raise CheckpointCorrupt(f"content {row.content_hash[:12]} is not a checkpoint")
            if doc.get("id") == row.checkpoint_id:
                out.append((row, doc))
        return out

    def _tuples(self, conn: Connection, rows: Sequence[Any], md_filter: dict | None) -> list:
        chosen: list[tuple[Any, dict, Any]] = []
        for row, doc in self._documents(self._attach(conn, rows)):
            metadata = self._unfield(doc, "metadata")
            if md_filter and any(
                k not in metadata or metadata[k] != v for k, v in md_filter.items()
            ):
                continue
            chosen.append((row, doc, metadata))
        refs: set[str] = set()
        writes_of: list[dict] = []
        for row, doc, _ in chosen:
            refs.update(_refs(doc.get("values", {}).values()))
            writes = json.loads(row.writes_json) if row.writes_json else {}
            writes_of.append(writes)
            for task in writes.values():
                refs.update(_refs(slot for _, slot in task["w"].values()))
        contents = self._contents(conn, refs) if refs else {}
        out: list[CheckpointTuple] = []
        for (row, doc, metadata), writes in zip(chosen, writes_of, strict=True):
            checkpoint = self._unfield(doc, "checkpoint")
            checkpoint["id"] = row.checkpoint_id
            checkpoint["channel_values"] = {
                name: self._unslot(slot, contents) for name, slot in doc["values"].items()
            }
            pending = sorted(
                (task.get("path", ""), task_id, int(idx), channel, slot)
                for task_id, task in writes.items()
                for idx, (channel, slot) in task["w"].items()
            )
            conf = {"thread_id": row.thread_id, "checkpoint_ns": row.checkpoint_ns}
            out.append(
                CheckpointTuple(
                    {"configurable": {**conf, "checkpoint_id": row.checkpoint_id}},
                    checkpoint,
                    metadata,
                    {"configurable": {**conf, "checkpoint_id": doc["parent"]}}
                    if doc.get("parent")
                    else None,
                    [(w[1], w[3], self._unslot(w[4], contents)) for w in pending],
                )
            )
        return out

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (its newest when no ``checkpoint_id``)."""
        thread_id, ns = _thread_of(config)
        checkpoint_id = (config.get("configurable") or {}).get("checkpoint_id")
        params: dict[str, Any] = {"run": thread_run_id(thread_id, ns)}
        sql = _SELECT_DOCS + " AND c.run_id = :run"
        if checkpoint_id is not None:
            sql += " AND c.checkpoint_id = :cid"
            params["cid"] = str(checkpoint_id)
        sql += " ORDER BY c.checkpoint_id DESC LIMIT 1"

        def read(conn: Connection) -> CheckpointTuple | None:
            found = self._tuples(conn, self._sql(conn, sql, params).all(), None)
            return found[0] if found else None

        return self.engine.transaction(read, write=False)

    def _page(
        self,
        config: RunnableConfig | None,
        md_filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        after: tuple[str, str] | None,
        size: int,
    ) -> tuple[list[CheckpointTuple], tuple[str, str] | None]:
        """One page of :meth:`list`: matching tuples and the cursor of the next page."""
        sql, params = self._where(config, before, after)
        sql += " ORDER BY c.checkpoint_id DESC, c.run_id DESC LIMIT :size"
        params["size"] = size

        def read(conn: Connection) -> tuple[list[CheckpointTuple], tuple[str, str] | None]:
            rows = self._sql(conn, sql, params).all()
            cursor = (rows[-1].checkpoint_id, rows[-1].run_id) if len(rows) == size else None
            return self._tuples(conn, rows, md_filter), cursor

        return self.engine.transaction(read, write=False)

    @staticmethod
    def _where(
        config: RunnableConfig | None,
        before: RunnableConfig | None,
        after: tuple[str, str] | None,
    ) -> tuple[str, dict[str, Any]]:
        sql, params = _SELECT_DOCS, {}
        conf = dict((config or {}).get("configurable") or {})
        if conf.get("thread_id") is not None and conf.get("checkpoint_ns") is not None:
            # one thread and namespace: one run, read in its index order
            sql += " AND c.run_id = :run"
            params["run"] = thread_run_id(
                str(conf.pop("thread_id")), str(conf.pop("checkpoint_ns"))
            )
        for column, key in (
            ("t.thread_id", "thread_id"),
            ("t.checkpoint_ns", "checkpoint_ns"),
            ("c.checkpoint_id", "checkpoint_id"),
        ):
            if conf.get(key) is not None:
                sql += f" AND {column} = :{key}"
                params[key] = str(conf[key])
        before_id = ((before or {}).get("configurable") or {}).get("checkpoint_id")
        if before_id is not None:
            sql += " AND c.checkpoint_id < :before"
            params["before"] = str(before_id)
        if after is not None:
            sql += (
                " AND (c.checkpoint_id < :after_id OR "
                "(c.checkpoint_id = :after_id AND c.run_id < :after_run))"
            )
            params["after_id"], params["after_run"] = after
        return sql, params

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by checkpoint id), read a page at a time."""
        paging = _Paging(limit, bool(filter))
        while paging.more:
            yield from paging.take(*self._page(config, filter, before, paging.cursor, paging.size))

    # --- deleting and copying ------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread (every namespace): its runs, frames and index rows. Content no
        other run uses is freed by the next ``collect_garbage``."""
        self._forget(self.engine.transaction(lambda conn: _delete_runs(conn, thread_id)))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove from LangGraph's view every checkpoint whose metadata ``run_id`` is listed
        (their frames stay in the thread's history until the thread is deleted)."""
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return
        c = S.lg_checkpoints
        doomed: list[tuple[str, str]] = []
        cursor: tuple[str, str] | None = None
        while True:
            sql, params = self._where(None, None, cursor)
            sql += " ORDER BY c.checkpoint_id DESC, c.run_id DESC LIMIT :size"
            params["size"] = _PAGE

            def read(conn: Connection, q: str = sql, p: dict = params) -> tuple[list, list]:
                rows = self._sql(conn, q, p).all()
                return rows, self._attach(conn, rows)

            rows, attached = self.engine.transaction(read, write=False)
            for row, doc in self._documents(attached):
                metadata = self._unfield(doc, "metadata")
                if isinstance(metadata, dict) and str(metadata.get("run_id")) in wanted:
                    doomed.append((row.run_id, row.checkpoint_id))
            if len(rows) < _PAGE:
                break
            cursor = (rows[-1].checkpoint_id, rows[-1].run_id)

        def work(conn: Connection) -> None:
            for run_id, checkpoint_id in doomed:
                conn.execute(
                    c.delete().where(c.c.run_id == run_id, c.c.checkpoint_id == checkpoint_id)
                )

        if doomed:
            self.engine.transaction(work)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread (every namespace) to another thread id: each target run is a child
        of its source run; frames and index rows are copied, content is shared."""
        t, c, f = S.lg_threads, S.lg_checkpoints, S.frames
        target = str(target_thread_id)

        def work(conn: Connection, frames: list[Frame], outcome: dict[str, Any]) -> None:
            sources = conn.execute(
                sa.select(t.c.run_id, t.c.checkpoint_ns)
                .where(t.c.thread_id == str(source_thread_id))
                .order_by(t.c.checkpoint_ns)
            ).all()
            for src in sources:
                dst = thread_run_id(target, src.checkpoint_ns)
                src_clock = conn.execute(
                    sa.select(S.runs.c.clock).where(S.runs.c.run_id == src.run_id)
                ).scalar_one()
                self._create_run(
                    conn, dst, target, src.checkpoint_ns, frames, (src.run_id, src_clock)
                )
                old = conn.execute(
                    sa.select(f)
                    .where(f.c.run_id == src.run_id, f.c.kind == "checkpoint")
                    .order_by(f.c.frame_no)
                ).all()
                top = self._advance(conn, dst, target, src.checkpoint_ns, len(old), frames).clock
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
                for part in _chunks(copies):
                    conn.execute(f.insert(), [frame_row(x) for x in part])
                frames.extend(copies)
                rows = conn.execute(sa.select(c).where(c.c.run_id == src.run_id)).all()
                for part in _chunks(rows):
                    for row in part:
                        conn.execute(
                            _insert(conn, c)
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

        self._write("", work)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune the checkpoints of threads, as PostgresSaver 3.2 does.

        ``"delete"`` deletes the threads (as :meth:`delete_thread`). ``"keep_latest"`` keeps
        the latest checkpoint of each namespace (plus its parent when it predates checkpoint
        format v4 and the parent has pending sends) with its pending writes, and deletes the
        rest; a kept checkpoint whose parent is deleted is left with no parent, and a subgraph
        call's namespace goes with the root checkpoint it started from (a
        ``checkpointer=True`` subgraph's keeps its latest). Each thread's runs are rewritten
        in one transaction, so the pruned frames go too and the next ``collect_garbage``
        frees the content only they used; do not prune a thread while a graph is writing it.

        Args:
            thread_ids: the threads to prune.
            strategy: ``"keep_latest"`` or ``"delete"``.

        Raises:
            InvalidArgument: ``thread_ids`` is a single str, the strategy is unknown, or
                ``keep_latest`` meets a thread that uses a ``DeltaChannel`` (then nothing is
                pruned: its latest value is rebuilt from older checkpoints).
        """
        from smithers_tt.integrations._langgraph_history import prune

        prune(self, thread_ids, strategy)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """For each channel, the writes of the checkpoint's ancestors since the nearest one
        that stores the channel's value (``seed``), as LangGraph's ``DeltaChannel`` needs;
        the same answer as the base class's walker, in one read transaction that pages
        through the thread's index instead of one ``get_tuple`` per ancestor."""
        from smithers_tt.integrations._langgraph_history import delta_channel_history

        return delta_channel_history(self, config, channels)

    # --- async twins: each runs the sync method in a worker thread ----------------------

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return await asyncio.to_thread(
            self.get_delta_channel_history, config=config, channels=channels
        )

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        paging = _Paging(limit, bool(filter))
        while paging.more:
            page = await asyncio.to_thread(
                self._page, config, filter, before, paging.cursor, paging.size
            )
            for item in paging.take(*page):
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)
