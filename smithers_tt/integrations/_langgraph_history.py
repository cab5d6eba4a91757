"""SmithersSaver's ``prune`` and its fast ``get_delta_channel_history`` (see
:mod:`smithers_tt.integrations.langgraph`, whose methods call these)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, CheckpointTuple
from langgraph.constants import TASKS

from smithers_tt.errors import InvalidArgument
from smithers_tt.integrations._langgraph_format import PAGE, slot_refs, thread_of, thread_run_id
from smithers_tt.integrations._langgraph_saver import SaverCore
from smithers_tt.store.for_langgraph import LangGraphRead, LangGraphWrite

try:  # the sentinel of a DeltaChannel snapshot (langgraph-checkpoint 4.x)
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
except ImportError:  # pragma: no cover - older LangGraph: no DeltaChannel at all
    _DeltaSnapshot = None

STRATEGIES = ("keep_latest", "delete")
_DELTA_METADATA = ("counters_since_delta_snapshot", "delta_writes_versioned")

# --- prune ---------------------------------------------------------------------------------


def _uses_delta(item: CheckpointTuple) -> bool:
    if any(key in (item.metadata or {}) for key in _DELTA_METADATA):
        return True
    values = item.checkpoint.get("channel_values") or {}
    return _DeltaSnapshot is not None and any(
        isinstance(v, _DeltaSnapshot) for v in values.values()
    )


def _kept(saver: SaverCore, thread_id: str) -> list[CheckpointTuple]:
    """The checkpoints ``keep_latest`` keeps of a thread, oldest first (PostgresSaver 3.2's
    rule): each namespace's latest, plus its parent when the latest predates checkpoint
    format v4 and the parent has pending sends; a subgraph call's namespace (a task id after
    a ":") goes with the root checkpoint it started from when that one is not kept."""
    items = list(saver.list({"configurable": {"thread_id": thread_id}}))
    if any(_uses_delta(item) for item in items):
        raise InvalidArgument(
            f"keep_latest cannot prune thread {thread_id!r}: it uses a DeltaChannel, whose "
            "latest value is rebuilt from older checkpoints; nothing was pruned (use "
            "strategy='delete', or leave the thread as it is)"
        )
    by_ns: dict[str, list[CheckpointTuple]] = {}
    for item in items:  # newest first
        by_ns.setdefault(item.config["configurable"]["checkpoint_ns"], []).append(item)
    keep: dict[str, list[CheckpointTuple]] = {}
    for ns, group in by_ns.items():
        head = group[0]
        keep[ns] = [head]
        parent = (head.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        if int(head.checkpoint.get("v", 4)) < 4 and parent is not None:
            before = next((g for g in group if g.checkpoint["id"] == parent), None)
            if before is not None and any(w[1] == TASKS for w in before.pending_writes or []):
                keep[ns].append(before)
    roots = {item.checkpoint["id"] for item in by_ns.get("", [])}
    kept_roots = {item.checkpoint["id"] for item in keep.get("", [])}
    out: list[CheckpointTuple] = []
    for ns, group in keep.items():
        root = ((group[0].metadata or {}).get("parents") or {}).get("")
        if ":" in ns and root in roots and root not in kept_roots:
            continue  # a finished subgraph call of a pruned root checkpoint
        out.extend(reversed(group))
    return out


def _raw_writes(saver: SaverCore, items: Sequence[CheckpointTuple]) -> list[dict]:
    """Each checkpoint's stored writes with their task paths and values decoded:
    ``{task_id: (path, [(idx, channel, value), ...])}``."""

    def read(rx: LangGraphRead) -> list[dict]:
        stored = []
        for item in items:
            conf = item.config["configurable"]
            run_id = thread_run_id(conf["thread_id"], conf["checkpoint_ns"])
            text = rx.writes_json(run_id, conf["checkpoint_id"])
            stored.append(json.loads(text) if text else {})
        hashes = {
            ref
            for writes in stored
            for task in writes.values()
            for ref in slot_refs(slot for _, slot in task["w"].values())
        }
        contents = rx.contents(hashes) if hashes else {}
        return [
            {
                task_id: (
                    task.get("path", ""),
                    sorted(
                        (int(idx), channel, saver._unslot(slot, contents))
                        for idx, (channel, slot) in task["w"].items()
                    ),
                )
                for task_id, task in writes.items()
            }
            for writes in stored
        ]

    return saver.tables.read(read)


def prune(saver: SaverCore, thread_ids: Sequence[str], strategy: str) -> None:
    """See :meth:`SmithersSaver.prune`."""
    if isinstance(thread_ids, str):
        raise InvalidArgument("thread_ids must be a sequence of thread ids, not a str")
    if strategy not in STRATEGIES:
        raise InvalidArgument(f"unknown prune strategy {strategy!r}: use one of {STRATEGIES}")
    threads = list(dict.fromkeys(str(t) for t in thread_ids))
    if strategy == "delete":
        for thread_id in threads:
            saver.delete_thread(thread_id)
        return
    plans = [(t, _kept(saver, t)) for t in threads]  # refuses before anything is pruned
    for thread_id, kept in plans:
        _rewrite(saver, thread_id, kept)


def _rewrite(saver: SaverCore, thread_id: str, kept: list[CheckpointTuple]) -> None:
    """Replace a thread's runs by new ones holding only ``kept`` (and their writes), in one
    transaction: the old frames go, so ``collect_garbage`` frees what only they pinned."""
    writes = _raw_writes(saver, kept)
    ids = {(t.config["configurable"]["checkpoint_ns"], t.checkpoint["id"]) for t in kept}
    runs = {thread_run_id(thread_id, t.config["configurable"]["checkpoint_ns"]) for t in kept}
    saver._forget(list(runs))  # nothing this process cached of the old runs may be reused
    works: list[Any] = []
    for item, by_task in zip(kept, writes, strict=True):
        conf = item.config["configurable"]
        parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        if (conf["checkpoint_ns"], parent) not in ids:
            parent = None  # its parent is pruned: it becomes the first of its thread
        thread = {"thread_id": thread_id, "checkpoint_ns": conf["checkpoint_ns"]}
        config: RunnableConfig = {"configurable": {**thread, "checkpoint_id": parent}}
        _, _, put = saver._prepare_put(config, item.checkpoint, item.metadata, {})
        works.append(put(None))
        for task_id, (path, entries) in by_task.items():
            regular = [(c, v) for idx, c, v in entries if idx >= 0]
            special = [[(c, v)] for idx, c, v in entries if idx < 0 and c in WRITES_IDX_MAP]
            for group in ([regular] if regular else []) + special:
                works.append(saver._writes_work(item.config, group, task_id, path)[1])

    def work(tx: LangGraphWrite) -> None:
        tx.delete_runs(thread_id)
        for unit in works:
            unit(tx)
        tx.cache_nothing()  # what the units cached belongs to several runs

    saver._write("", work)
    saver._forget(list(runs))


# --- delta channel history -----------------------------------------------------------------


def delta_channel_history(
    saver: SaverCore, config: RunnableConfig, channels: Sequence[str]
) -> Mapping[str, dict[str, Any]]:
    """See :meth:`SmithersSaver.get_delta_channel_history`."""
    if not channels:
        return {}
    thread_id, ns = thread_of(config)
    run_id = thread_run_id(thread_id, ns)
    wanted = list(dict.fromkeys(channels))
    target = (config.get("configurable") or {}).get("checkpoint_id")

    def read(rx: LangGraphRead) -> dict[str, dict[str, Any]]:
        wanted_id = None if target is None else str(target)
        head = saver._documents(rx.documents(rx.newest(run_id, wanted_id)))
        collected: dict[str, list[tuple]] = {ch: [] for ch in wanted}
        seeds: dict[str, Any] = {}
        remaining = set(wanted)
        cursor = head[0][1].get("parent") if head else None
        page: dict[str, tuple[Any, dict]] = {}
        after: tuple[str, str] | None = None
        scoped = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
        before = {"configurable": {"checkpoint_id": head[0][0].checkpoint_id}} if head else None
        while cursor is not None and remaining:
            if cursor not in page:
                if after is not None and cursor > after[0]:
                    break  # an ancestor older ids skipped past: it is gone (pruned, deleted)
                rows = rx.page(saver._where(scoped, before, after), PAGE)
                if not rows:
                    break
                after = (rows[-1].checkpoint_id, rows[-1].run_id)
                page = {
                    row.checkpoint_id: (row, doc)
                    for row, doc in saver._documents(rx.documents(rows))
                }
                continue
            row, doc = page[cursor]
            writes = json.loads(row.writes_json) if row.writes_json else {}
            pending = sorted(
                (task.get("path", ""), task_id, int(idx), channel, slot)
                for task_id, task in writes.items()
                for idx, (channel, slot) in task["w"].items()
            )
            for channel in remaining:
                mine = [(w[1], w[3], w[4]) for w in pending if w[3] == channel]
                collected[channel].append(mine)
            for channel in list(remaining):
                if channel in doc["values"]:
                    seeds[channel] = doc["values"][channel]
                    remaining.discard(channel)
            cursor = doc.get("parent")
        slots = [w[2] for groups in collected.values() for g in groups for w in g]
        contents = rx.contents(set(slot_refs([*slots, *seeds.values()])))
        result: dict[str, dict[str, Any]] = {}
        for channel in wanted:
            entry: dict[str, Any] = {
                "writes": [
                    (task_id, ch, saver._unslot(slot, contents))
                    for group in reversed(collected[channel])
                    for task_id, ch, slot in group
                ]
            }
            if channel in seeds:
                entry["seed"] = saver._unslot(seeds[channel], contents)
            result[channel] = entry
        return result

    return saver.tables.read(read)
