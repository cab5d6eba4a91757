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
stores them is the store's (:class:`smithers_tt.store.for_langgraph.LangGraphStore`, whose write
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
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from smithers_tt.integrations._langgraph_format import (  # noqa: F401  (importable here)
    CHECKPOINT_CODEC,
    DOC_NODE,
    VALUE_CODEC,
    VALUE_NODE,
    WORKFLOW,
    Paging,
    thread_run_id,
)
from smithers_tt.integrations._langgraph_history import delta_channel_history, prune
from smithers_tt.integrations._langgraph_saver import SaverCore

__all__ = [
    "CHECKPOINT_CODEC",
    "VALUE_CODEC",
    "WORKFLOW",
    "SmithersSaver",
    "thread_run_id",
]


class SmithersSaver(SaverCore):
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
        prune(self, thread_ids, strategy)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """For each channel, the writes of the checkpoint's ancestors since the nearest one
        that stores the channel's value (``seed``), as LangGraph's ``DeltaChannel`` needs;
        the same answer as the base class's walker, in one read transaction that pages
        through the thread's index instead of one ``get_tuple`` per ancestor."""
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
        paging = Paging(limit, bool(filter))
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
