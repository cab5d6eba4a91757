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

This module turns LangGraph's checkpoints, writes and configs into plain data; the SQL that
stores them is the store's (:class:`smithers_tt.store.LangGraphStore`, whose write
transactions share one group commit).

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
* Each ``put``, ``put_writes`` or ``copy_thread`` is one transaction (shared with other
  writes by the store's group committer) and, per run, one write of the store's ledger: the
  run's clock advances once, whatever it stores.

Frames pin every document and value, so ``collect_garbage`` keeps all of a thread's history;
``delete_thread`` deletes its runs (frames, index rows and all) and the next collection frees
the content nobody else uses. ``delete_for_runs`` removes checkpoints from LangGraph's view but
keeps the frames (the history the debugger shows) until the thread is deleted.
``db.rewind`` of a thread's run rewinds LangGraph's view with it: the thread's checkpoints are
those whose frame is at or below the run's clock, the newest of them is what ``get_tuple``,
``graph.get_state`` and the next ``invoke`` start from (with the pending writes stored with it),
and ``db.undo_rewind`` brings the newer ones back. ``db.fork`` of such a run changes only
smithers_tt's view; use LangGraph's own ``update_state``/replay to branch a thread.

``prune(thread_ids, strategy=...)`` does what PostgresSaver 3.2's does (``"keep_latest"`` or
``"delete"``); it rewrites the thread's runs, so the pruned frames go and the next
``collect_garbage`` frees what only they used. ``get_delta_channel_history`` (for LangGraph's
``DeltaChannel``) answers as the base class's walker does, in one read transaction.

Stored values never run code: a value that is not plain JSON is decoded only when every type
it names is in LangGraph's strict msgpack list or in ``allowed_types`` (else ``UnsafeValue``
naming the thread, checkpoint, channel and type; see
:mod:`smithers_tt.integrations._langgraph_serde` and ``docs/langgraph.md``).

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
import json
import random
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

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

from smithers_tt.checkpoint import (
    MAX_CHECKPOINT_BYTES,
    EncodedCheckpoint,
    canonical_envelope,
    content_hash,
    loads,
    validate,
)
from smithers_tt.errors import (
    CheckpointCorrupt,
    CheckpointInvalid,
    CheckpointMissing,
    CheckpointTooLarge,
    InvalidArgument,
)
from smithers_tt.integrations._langgraph_serde import (
    ENCODINGS,
    VALUE,
    AllowedTypes,
    GuardedSerializer,
    as_mapping,
    decode_slot,
    where_of,
)
from smithers_tt.store import (
    LANGGRAPH_DOC_NODE,
    LANGGRAPH_VALUE_NODE,
    LANGGRAPH_WORKFLOW,
    LangGraphDocument,
    LangGraphIndexQuery,
    LangGraphRead,
    LangGraphStore,
    LangGraphWrite,
    ThreadReplaced,
    langgraph_run_id,
)

__all__ = [
    "CHECKPOINT_CODEC",
    "VALUE_CODEC",
    "WORKFLOW",
    "SmithersSaver",
    "thread_run_id",
]

WORKFLOW = LANGGRAPH_WORKFLOW
"""Workflow name of the runs that hold LangGraph threads."""

CHECKPOINT_CODEC = "langgraph.checkpoint"
"""Codec of a checkpoint document: ``{"id", "parent", "checkpoint", "metadata", "values"}``.
``checkpoint`` is the LangGraph checkpoint without id and channel values and ``metadata`` its
metadata, both as plain JSON (or, when they are not, encoded under ``checkpoint_encoded`` /
``metadata_encoded``); ``values`` maps channel name to an encoded value or ``{"ref": sha256}``.
An encoded value is ``{"json": value}`` or ``{"msgpack" | "bytes" | "bytearray": base64}``."""

VALUE_CODEC = "langgraph.value"
"""Codec of one channel (or write) value stored as its own content: an encoded value."""

DOC_NODE = LANGGRAPH_DOC_NODE
VALUE_NODE = LANGGRAPH_VALUE_NODE
_PAGE = 100
# Bytes a value adds to a content envelope beyond its own encoding.
_ENVELOPE_OVERHEAD = len(canonical_envelope(VALUE_CODEC, 1, None)) - len(b"null")

thread_run_id = langgraph_run_id


def _thread_of(config: RunnableConfig) -> tuple[str, str]:
    conf = config.get("configurable") or {}
    if conf.get("thread_id") is None:
        raise InvalidArgument("a LangGraph config needs configurable.thread_id")
    return str(conf["thread_id"]), str(conf.get("checkpoint_ns") or "")


def _payload(data: bytes, codec: str, digest: str) -> Any:
    """The payload of verified canonical bytes (written by this module) of ``codec``."""
    envelope = loads(data)
    if type(envelope) is not dict or envelope.get("codec") != codec or "payload" not in envelope:
        raise CheckpointCorrupt(f"content {digest[:12]} is not a {codec} document")
    return envelope["payload"]


def _refs(slots: Any) -> Iterator[str]:
    for slot in slots:
        if type(slot) is dict and "ref" in slot:
            yield slot["ref"]


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
        serde: LangGraph serializer for values that are not plain JSON; default LangGraph's
            ``JsonPlusSerializer`` in strict msgpack mode, without pickle. A serializer with
            pickle enabled is refused. Whatever the serializer, a stored value is decoded
            only when every type it names is allowed (else ``UnsafeValue``).
        allowed_types: types (classes or ``(module, name)`` pairs) a stored value may
            construct besides LangGraph's own strict list (messages, ``Send``, datetimes ...):
            e.g. the pydantic models or dataclasses your graph's state holds.
        inline_max_bytes: channel and write values whose encoding is at most this long are
            kept inside the checkpoint document instead of as content of their own (0: every
            value is content).
    """

    def __init__(
        self,
        db: Any,
        *,
        serde: Any | None = None,
        allowed_types: AllowedTypes = (),
        inline_max_bytes: int = 64,
    ) -> None:
        self._guard = GuardedSerializer(allowed_types)
        serde = serde if serde is not None else self._guard
        if getattr(serde, "pickle_fallback", False):
            raise InvalidArgument("SmithersSaver never stores pickles: turn pickle_fallback off")
        if type(inline_max_bytes) is not int or inline_max_bytes < 0:
            raise InvalidArgument(f"inline_max_bytes must be an int >= 0, not {inline_max_bytes!r}")
        super().__init__(serde=serde)
        self.db = db
        self.engine = db.engine
        self.store = db.store
        self.inline_max_bytes = inline_max_bytes
        self.tables = LangGraphStore(db.engine, db.store)
        # (run_id, checkpoint_id) -> what this process stored of a recent checkpoint
        self._recent: OrderedDict[tuple[str, str], _Recent] = OrderedDict()
        self._recent_lock = threading.Lock()

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
        if kind not in ENCODINGS:
            raise InvalidArgument(f"serializer produced {kind!r}; only {ENCODINGS} are stored")
        return {kind: base64.b64encode(data).decode("ascii")}

    def _field(self, name: str, value: Any) -> dict[str, Any]:
        """A document field: ``{name: value}`` when plain JSON, else ``{name + "_encoded":
        encoded value}``."""
        encoded = self._encode(value)
        return {name: value} if "json" in encoded else {f"{name}_encoded": encoded}

    def _unfield(self, doc: dict[str, Any], name: str, where: str = VALUE) -> Any:
        if name in doc:
            return doc[name]
        return self._decode(doc.get(f"{name}_encoded"), f"{where}, its {name}")

    def _decode(self, encoded: Any, where: str = VALUE) -> Any:
        """An encoded value decoded, constructing only allowed types (``where``, the thread,
        checkpoint and channel, names it in errors)."""
        guard = self.serde if isinstance(self.serde, GuardedSerializer) else self._guard
        return decode_slot(guard, self.serde, encoded, where)

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

    def _unslot(self, slot: Any, contents: dict[str, bytes], where: str = VALUE) -> Any:
        if type(slot) is dict and set(slot) == {"ref"}:
            data = contents.get(slot["ref"])
            if data is None:
                raise CheckpointMissing(f"LangGraph value {str(slot['ref'])[:12]} is not stored")
            return self._decode(_payload(data, VALUE_CODEC, slot["ref"]), where)
        return self._decode(slot, where)

    # --- transactions ------------------------------------------------------------------

    def _forget(self, run_ids: Sequence[str]) -> None:
        gone = set(run_ids)
        self.tables.forget(list(gone))
        with self._recent_lock:
            for key in [k for k in self._recent if k[0] in gone]:
                del self._recent[key]

    def _write(self, run_id: str, work: Any) -> Any:
        """Run ``work(tx)`` (a :class:`~smithers_tt.store.LangGraphWrite`) in a write
        transaction; once it committed, keep the checkpoint it stored (``tx.outcome``) for its
        children to reuse."""
        result, outcome = self.tables.write(run_id, work)
        if "recent" in outcome:
            with self._recent_lock:
                self._recent[(run_id, outcome["checkpoint_id"])] = outcome["recent"]
                while len(self._recent) > 1024:
                    self._recent.popitem(last=False)
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
            with self._recent_lock:
                previous = self._recent.get((run_id, str(parent)))
        try:
            self._write(run_id, put(previous))
        except ThreadReplaced:  # the thread was deleted and created again: encode everything
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
        """The transaction body of a put (``work(tx)``)."""
        document, blobs, values = build(previous)

        def work(tx: LangGraphWrite) -> None:
            expect = None if previous is None else previous.token  # its slots are that run's
            token = tx.put_checkpoint(
                run_id, (thread_id, ns), checkpoint_id, document, blobs, expect
            )
            tx.outcome["recent"] = _Recent(token, dict(versions), values)
            tx.outcome["checkpoint_id"] = checkpoint_id

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

        def merge(stored_json: str | None) -> str:
            stored = json.loads(stored_json) if stored_json else {}
            task = stored.setdefault(task_id, {"path": task_path, "w": {}})
            for idx, channel, slot in encoded:
                if replace or idx not in task["w"]:
                    task["w"][idx] = [channel, slot]
            return json.dumps(stored, ensure_ascii=False, separators=(",", ":"))

        def work(tx: LangGraphWrite) -> None:
            tx.update_writes(run_id, (thread_id, ns), checkpoint_id, blobs, merge)

        return run_id, work

    # --- reading -------------------------------------------------------------------------

    def _documents(self, rows: Sequence[LangGraphDocument]) -> list[tuple[Any, dict]]:
        """The document of each index row (rows whose frame holds another checkpoint, as
        after a smithers_tt rewind, are skipped)."""
        out: list[tuple[Any, dict]] = []
        for row in rows:
            doc = _payload(row.data, CHECKPOINT_CODEC, row.content_hash)
            if type(doc) is not dict:
                raise CheckpointCorrupt(f"content {row.content_hash[:12]} is not a checkpoint")
            if doc.get("id") == row.checkpoint_id:
                out.append((row, doc))
        return out

    def _tuples(self, rx: LangGraphRead, rows: Sequence[Any], md_filter: dict | None) -> list:
        chosen: list[tuple[Any, dict, Any]] = []
        for row, doc in self._documents(rx.documents(rows)):
            where = where_of(row.thread_id, row.checkpoint_ns, row.checkpoint_id)
            metadata = as_mapping(self._unfield(doc, "metadata", where), "metadata", where)
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
        contents = rx.contents(refs) if refs else {}
        out: list[CheckpointTuple] = []
        for (row, doc, metadata), writes in zip(chosen, writes_of, strict=True):
            where = where_of(row.thread_id, row.checkpoint_ns, row.checkpoint_id)
            checkpoint = as_mapping(self._unfield(doc, "checkpoint", where), "checkpoint", where)
            checkpoint["id"] = row.checkpoint_id
            checkpoint["channel_values"] = {
                name: self._unslot(slot, contents, f"{where}, channel {name!r}")
                for name, slot in doc["values"].items()
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
                    [
                        (w[1], w[3], self._unslot(w[4], contents, f"{where}, write {w[3]!r}"))
                        for w in pending
                    ],
                )
            )
        return out

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (its newest when no ``checkpoint_id``)."""
        thread_id, ns = _thread_of(config)
        checkpoint_id = (config.get("configurable") or {}).get("checkpoint_id")
        run_id = thread_run_id(thread_id, ns)
        wanted = None if checkpoint_id is None else str(checkpoint_id)

        def read(rx: LangGraphRead) -> CheckpointTuple | None:
            found = self._tuples(rx, rx.newest(run_id, wanted), None)
            return found[0] if found else None

        return self.tables.read(read)

    def _page(
        self,
        config: RunnableConfig | None,
        md_filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        after: tuple[str, str] | None,
        size: int,
    ) -> tuple[list[CheckpointTuple], tuple[str, str] | None]:
        """One page of :meth:`list`: matching tuples and the cursor of the next page."""
        query = self._where(config, before, after)

        def read(rx: LangGraphRead) -> tuple[list[CheckpointTuple], tuple[str, str] | None]:
            rows = rx.page(query, size)
            cursor = (rows[-1].checkpoint_id, rows[-1].run_id) if len(rows) == size else None
            return self._tuples(rx, rows, md_filter), cursor

        return self.tables.read(read)

    @staticmethod
    def _where(
        config: RunnableConfig | None,
        before: RunnableConfig | None,
        after: tuple[str, str] | None,
    ) -> LangGraphIndexQuery:
        """The index rows a ``list`` config, ``before`` and page cursor name."""
        conf = dict((config or {}).get("configurable") or {})
        run_id = None
        if conf.get("thread_id") is not None and conf.get("checkpoint_ns") is not None:
            # one thread and namespace: one run, read in its index order
            run_id = thread_run_id(str(conf.pop("thread_id")), str(conf.pop("checkpoint_ns")))
        keys = [conf.get(k) for k in ("thread_id", "checkpoint_ns", "checkpoint_id")]
        before_id = ((before or {}).get("configurable") or {}).get("checkpoint_id")
        return LangGraphIndexQuery(
            run_id,
            *(None if v is None else str(v) for v in keys),
            None if before_id is None else str(before_id),
            after,
        )

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
        self._forget(self.tables.delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove from LangGraph's view every checkpoint whose metadata ``run_id`` is listed
        (their frames stay in the thread's history until the thread is deleted)."""
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return
        doomed: list[tuple[str, str]] = []
        cursor: tuple[str, str] | None = None
        while True:
            query = self._where(None, None, cursor)

            def read(rx: LangGraphRead, q: LangGraphIndexQuery = query) -> tuple[list, list]:
                rows = rx.page(q, _PAGE)
                return rows, rx.documents(rows)

            rows, attached = self.tables.read(read)
            for row, doc in self._documents(attached):
                metadata = self._unfield(
                    doc, "metadata", where_of(row.thread_id, row.checkpoint_ns, row.checkpoint_id)
                )
                if isinstance(metadata, dict) and str(metadata.get("run_id")) in wanted:
                    doomed.append((row.run_id, row.checkpoint_id))
            if len(rows) < _PAGE:
                break
            cursor = (rows[-1].checkpoint_id, rows[-1].run_id)
        if doomed:
            self.tables.delete_checkpoints(doomed)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread (every namespace) to another thread id: each target run is a child
        of its source run; frames and index rows are copied, content is shared."""
        self._write("", lambda tx: tx.copy_thread(source_thread_id, target_thread_id))

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
