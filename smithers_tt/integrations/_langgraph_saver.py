"""The primitives of the LangGraph saver (see :mod:`smithers_tt.integrations.langgraph`):
values encoded into documents, and each LangGraph call as one transaction of the store's
:class:`~smithers_tt.store.for_langgraph.LangGraphStore`."""

from __future__ import annotations

import base64
import json
import random
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
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
from langgraph.constants import TASKS

from smithers_tt.checkpoint import (
    MAX_CHECKPOINT_BYTES,
    EncodedCheckpoint,
    canonical_envelope,
    content_hash,
    validate,
)
from smithers_tt.errors import (
    CheckpointCorrupt,
    CheckpointInvalid,
    CheckpointMissing,
    CheckpointTooLarge,
    InvalidArgument,
)
from smithers_tt.integrations._langgraph_calls import START, calls_in_writes, node_of, task_rank
from smithers_tt.integrations._langgraph_format import (
    CHECKPOINT_CODEC,
    ENVELOPE_OVERHEAD,
    PAGE,
    VALUE_CODEC,
    Paging,
    Recent,
    payload,
    slot_refs,
    thread_of,
    thread_run_id,
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
from smithers_tt.store.for_langgraph import (
    LangGraphCalls,
    LangGraphDocument,
    LangGraphIndexQuery,
    LangGraphRead,
    LangGraphStore,
    LangGraphWrite,
    ThreadReplaced,
)


class SaverCore(BaseCheckpointSaver[int | str]):
    """The primitives of :class:`~smithers_tt.integrations.langgraph.SmithersSaver`: encoding,
    put, put_writes, get_tuple, list, delete and copy, each one store transaction. The saver
    adds what is derived from them (``prune``, ``get_delta_channel_history``) and the async
    twins; its docstring lists the arguments."""

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
        self._recent: OrderedDict[tuple[str, str], Recent] = OrderedDict()
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
        if len(data) - ENVELOPE_OVERHEAD <= self.inline_max_bytes:
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
            return self._decode(payload(data, VALUE_CODEC, slot["ref"]), where)
        return self._decode(slot, where)

    # --- transactions ------------------------------------------------------------------

    def _forget(self, run_ids: Sequence[str]) -> None:
        gone = set(run_ids)
        self.tables.forget(list(gone))
        with self._recent_lock:
            for key in [k for k in self._recent if k[0] in gone]:
                del self._recent[key]

    def _write(self, run_id: str, work: Any) -> Any:
        """Run ``work(tx)`` (a :class:`~smithers_tt.store.for_langgraph.LangGraphWrite`) in a write
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
        thread_id, ns = thread_of(config)
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
        thread_id, ns = thread_of(config)
        parent = (config.get("configurable") or {}).get("checkpoint_id")
        rest = dict(checkpoint)
        checkpoint_id = str(rest.pop("id"))
        channel_values = rest.pop("channel_values", None) or {}
        versions = rest.get("channel_versions") or {}
        metadata = get_serializable_checkpoint_metadata(config, metadata)
        run_id = thread_run_id(thread_id, ns)
        fields = {**self._field("checkpoint", rest), **self._field("metadata", metadata)}

        def build(
            previous: Recent | None,
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
            body = {
                "id": checkpoint_id,
                "parent": None if parent is None else str(parent),
                **fields,
                "values": values,
            }
            data = canonical_envelope(CHECKPOINT_CODEC, 1, body)
            if len(data) > MAX_CHECKPOINT_BYTES:
                raise CheckpointTooLarge(
                    f"LangGraph checkpoint {checkpoint_id} encodes to {len(data)} bytes, above "
                    f"the ceiling of {MAX_CHECKPOINT_BYTES}",
                    size=len(data),
                    limit=MAX_CHECKPOINT_BYTES,
                )
            return EncodedCheckpoint(CHECKPOINT_CODEC, 1, data, content_hash(data)), blobs, values

        sends = channel_values.get(TASKS)
        step = (
            None if parent is None else str(parent),
            [str(getattr(send, "node", "")) for send in sends]
            if isinstance(sends, list | tuple)
            else [],
        )

        def put(previous: Recent | None) -> Any:
            keys = (run_id, thread_id, ns, checkpoint_id)
            return self._put_work(keys, versions, build, previous, step)

        return run_id, parent, put

    def _put_work(
        self,
        keys: tuple[str, str, str, str],
        versions: ChannelVersions,
        build: Any,
        previous: Recent | None,
        step: tuple[str | None, list[str]],
    ) -> Any:
        """The transaction body of a put (``work(tx)``) of checkpoint ``keys`` (run, thread,
        namespace, checkpoint id); ``step``: its parent's id and its sends' nodes."""
        run_id, thread_id, ns, checkpoint_id = keys
        document, blobs, values = build(previous)

        def work(tx: LangGraphWrite) -> None:
            expect = None if previous is None else previous.token  # its slots are that run's
            token = tx.put_checkpoint(
                run_id, (thread_id, ns), checkpoint_id, document, blobs, expect, step
            )
            tx.outcome["recent"] = Recent(token, dict(versions), values)
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
        thread_id, ns = thread_of(config)
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
        node, found = node_of(task_path), calls_in_writes(writes)
        calls = None
        if found and node != START:
            rank = task_rank(config.get("configurable") or {}, checkpoint_id, task_id)
            calls = LangGraphCalls(thread_id, checkpoint_id, node, rank, found)

        def merge(stored_json: str | None) -> str:
            stored = json.loads(stored_json) if stored_json else {}
            task = stored.setdefault(task_id, {"path": task_path, "w": {}})
            for idx, channel, slot in encoded:
                if replace or idx not in task["w"]:
                    task["w"][idx] = [channel, slot]
            return json.dumps(stored, ensure_ascii=False, separators=(",", ":"))

        def work(tx: LangGraphWrite) -> None:
            tx.update_writes(run_id, (thread_id, ns), checkpoint_id, blobs, merge, calls)

        return run_id, work

    # --- reading -------------------------------------------------------------------------

    def _documents(self, rows: Sequence[LangGraphDocument]) -> list[tuple[Any, dict]]:
        """The document of each index row (rows whose frame holds another checkpoint, as
        after a smithers_tt rewind, are skipped)."""
        out: list[tuple[Any, dict]] = []
        for row in rows:
            doc = payload(row.data, CHECKPOINT_CODEC, row.content_hash)
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
            refs.update(slot_refs(doc.get("values", {}).values()))
            writes = json.loads(row.writes_json) if row.writes_json else {}
            writes_of.append(writes)
            for task in writes.values():
                refs.update(slot_refs(slot for _, slot in task["w"].values()))
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
        thread_id, ns = thread_of(config)
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
        paging = Paging(limit, bool(filter))
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
                rows = rx.page(q, PAGE)
                return rows, rx.documents(rows)

            rows, attached = self.tables.read(read)
            for row, doc in self._documents(attached):
                metadata = self._unfield(
                    doc, "metadata", where_of(row.thread_id, row.checkpoint_ns, row.checkpoint_id)
                )
                if isinstance(metadata, dict) and str(metadata.get("run_id")) in wanted:
                    doomed.append((row.run_id, row.checkpoint_id))
            if len(rows) < PAGE:
                break
            cursor = (rows[-1].checkpoint_id, rows[-1].run_id)
        if doomed:
            self.tables.delete_checkpoints(doomed)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread (every namespace) to another thread id: each target run is a child
        of its source run; frames and index rows are copied, content is shared."""
        self._write("", lambda tx: tx.copy_thread(source_thread_id, target_thread_id))
