"""Copy the threads of a LangGraph SqliteSaver or PostgresSaver database into smithers_tt.

Users who switch to :class:`~smithers_tt.integrations.langgraph.SmithersSaver` keep their
history: every checkpoint of every thread (each namespace, forks included), with its
metadata, parent and pending writes, is read through the source saver's own API and written
through ``SmithersSaver``'s, so each imported thread continues on SmithersSaver where it
stopped (its string channel versions included) and ``get_state_history`` shows what it showed
before.

Usage::

    import smithers_tt as st
    from smithers_tt.integrations.langgraph_import import import_langgraph

    with st.connect("sqlite:///smithers.db") as db:
        report = import_langgraph("sqlite:///checkpoints.sqlite", db)   # or postgresql://...
    print(report.threads, report.checkpoints, report.writes)

or ``smithers-tt import-langgraph sqlite:///checkpoints.sqlite``. The source is only read
(a SQLite file is opened read-only; PostgresSaver's ``setup()`` is never called). Importing
again is safe: checkpoints already in the target are skipped.

Nothing in the source runs: its values are decoded by LangGraph's ``JsonPlusSerializer`` in
strict msgpack mode, and a value that names a type outside LangGraph's strict list (or a
pickle) stops the import with :class:`~smithers_tt.errors.UnsafeValue` naming the thread,
checkpoint, channel and type, before anything is constructed or written; a checkpoint that is
not a mapping stops it with ``StoreCorrupt``. Allow types of your own with
``import_langgraph(url, db, allowed_types=[MyModel, ("pkg.mod", "Name")])`` or
``smithers-tt import-langgraph URL --allow-type pkg.mod.Name`` (see
:mod:`smithers_tt.integrations._langgraph_serde`). A saver you pass instead of a URL decodes
with its own serializer: give it a safe one.

The source saver keeps no task paths in its public records: an imported pending write keeps
its task id, channel, index and value, and the task path of a node's task is found again from
the task id (:mod:`smithers_tt.integrations._langgraph_tasks`), and so is a ``Send``'s task
(its path names its send, whose node the checkpoint holds), so the model calls in its AI
messages are the node's. Other writes get none (LangGraph matches writes to tasks by id, so
resuming is unaffected; only their order within a checkpoint may differ).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from smithers_tt.errors import InvalidArgument, SmithersError, StoreCorrupt
from smithers_tt.integrations._langgraph_serde import (
    AllowedTypes,
    DeferredSerializer,
    GuardedSerializer,
    as_mapping,
    where_of,
)
from smithers_tt.integrations._langgraph_tasks import task_paths
from smithers_tt.integrations.langgraph import SmithersSaver

__all__ = ["ImportReport", "copy_threads", "import_langgraph", "open_source"]


@dataclass(frozen=True)
class ImportReport:
    """What an import copied (checkpoints already in the target are counted as skipped)."""

    threads: int
    checkpoints: int
    writes: int
    skipped: int


def open_source(url: str, *, allowed_types: AllowedTypes = ()) -> Any:
    """A LangGraph saver reading the database at ``url``, closed on exit (a context
    manager). It decodes values under the allow-list (``UnsafeValue`` for any other type).

    Args:
        url: ``sqlite:///path`` (or a plain file path) for a SqliteSaver database,
            ``postgresql://...`` (``postgres://``, ``postgresql+psycopg://``) for PostgresSaver.
        allowed_types: types a value may construct besides LangGraph's strict list.

    Raises:
        InvalidArgument: the URL names neither, the file does not exist, or the saver's
            package (``langgraph-checkpoint-sqlite`` / ``-postgres``) is not installed.
    """
    return _open(url, GuardedSerializer(allowed_types))


@contextlib.contextmanager
def _open(url: str, serde: Any) -> Iterator[BaseCheckpointSaver]:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme in ("sqlite", "file"):
        # sqlite:///relative/path, sqlite:////absolute/path (SQLAlchemy's convention)
        path = Path(rest.removeprefix("/") if sep else url)
        if not path.is_file():
            raise InvalidArgument(f"no SqliteSaver database at {str(path)!r}: give its file")
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError as error:
            raise InvalidArgument(
                "importing a SqliteSaver database needs langgraph-checkpoint-sqlite: "
                "pip install 'smithers-tt[peers]'"
            ) from error
        # read-only: nothing of the source database is ever changed
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            yield SqliteSaver(conn, serde=serde)  # its setup() knows read-only databases
        finally:
            conn.close()
        return
    if scheme.split("+")[0] in ("postgresql", "postgres"):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError as error:
            raise InvalidArgument(
                "importing a PostgresSaver database needs langgraph-checkpoint-postgres: "
                "pip install 'smithers-tt[peers]'"
            ) from error
        with PostgresSaver.from_conn_string(f"postgresql://{rest}") as saver:
            saver.serde = serde
            yield saver
        return
    raise InvalidArgument(
        f"cannot import LangGraph checkpoints from {url!r}: give sqlite:///FILE or "
        "postgresql://USER@HOST/DB"
    )


def _thread_ids(source: BaseCheckpointSaver) -> list[str]:
    seen: dict[str, None] = {}
    try:
        for item in source.list(None):
            seen.setdefault(str(item.config["configurable"]["thread_id"]), None)
    except Exception as error:  # the driver's own errors: no such tables, no access ...
        raise InvalidArgument(
            f"cannot read LangGraph checkpoints from {type(source).__name__}'s database "
            f"({type(error).__name__}: {str(error)[:200]}); is it a LangGraph checkpoint "
            "database, and readable?"
        ) from error
    return list(seen)


def _decoded(item: CheckpointTuple, guard: GuardedSerializer) -> CheckpointTuple:
    """``item`` with what the source left encoded decoded under the allow-list, and its
    checkpoint, metadata and channels checked to be mappings."""
    conf = item.config["configurable"]
    where = where_of(conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"])
    checkpoint = guard.resolve(item.checkpoint, f"{where}, its checkpoint")
    checkpoint = dict(as_mapping(checkpoint, "checkpoint", where))
    values = as_mapping(checkpoint.get("channel_values") or {}, "channel values", where)
    checkpoint["channel_values"] = {
        name: guard.resolve(value, f"{where}, channel {name!r}") for name, value in values.items()
    }
    as_mapping(checkpoint.get("channel_versions") or {}, "channel versions", where)
    metadata = as_mapping(guard.resolve(item.metadata, f"{where}, its metadata"), "metadata", where)
    writes = [
        (task_id, channel, guard.resolve(value, f"{where}, write {channel!r} of task {task_id!r}"))
        for task_id, channel, value in item.pending_writes or []
    ]
    return item._replace(checkpoint=checkpoint, metadata=metadata, pending_writes=writes)


def _copy_one(target: BaseCheckpointSaver, item: CheckpointTuple, paths: Mapping[str, str]) -> int:
    """Copy one (decoded) checkpoint tuple (its writes first, so a crash never leaves a
    checkpoint without them, each task's with its path in ``paths`` when found); returns how
    many writes it had."""
    conf = item.config["configurable"]
    thread = {"thread_id": conf["thread_id"], "checkpoint_ns": conf.get("checkpoint_ns", "")}
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in item.pending_writes or []:
        by_task.setdefault(task_id, []).append((channel, value))
    # the ancestors' checkpoints, which rank a subgraph's task among its thread's
    parents = item.metadata.get("parents")
    config = item.config
    if isinstance(parents, Mapping) and parents:
        config = {"configurable": {**config["configurable"], "checkpoint_map": dict(parents)}}
    for task_id, writes in by_task.items():
        target.put_writes(config, writes, task_id, paths.get(task_id, ""))
    parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    target.put(
        {"configurable": {**thread, "checkpoint_id": parent}},
        item.checkpoint,
        item.metadata,
        dict(item.checkpoint.get("channel_versions") or {}),
    )
    return len(item.pending_writes or [])


def _thread_tuples(source: BaseCheckpointSaver, thread_id: str) -> list[CheckpointTuple]:
    """A thread's checkpoints in the source, oldest first (parents before children)."""
    try:
        return list(reversed(list(source.list({"configurable": {"thread_id": thread_id}}))))
    except SmithersError as error:  # e.g. a pending send the source re-encodes as it reads
        raise type(error)(f"thread {thread_id!r}: {error.message}", **error.details) from None
    except Exception as error:  # the source's own: a checkpoint that is not a mapping ...
        raise StoreCorrupt(
            f"cannot read thread {thread_id!r} of the source ({type(error).__name__}: "
            f"{str(error)[:200]}); its database is damaged or was not written by LangGraph"
        ) from error


def copy_threads(
    source: BaseCheckpointSaver,
    target: BaseCheckpointSaver,
    *,
    thread_ids: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    allowed_types: AllowedTypes = (),
) -> ImportReport:
    """Copy threads (every namespace, oldest checkpoint first) from one saver to another.

    Args:
        source: the saver to read (any LangGraph saver).
        target: the saver to write (usually a :class:`SmithersSaver`).
        thread_ids: the threads to copy (default: every thread of ``source``).
        progress: called with each thread id once it is copied.
        allowed_types: types a value the source left encoded may construct besides
            LangGraph's strict list.

    Returns:
        The counts of threads, checkpoints and writes copied.

    Raises:
        UnsafeValue: a value names a type that is not allowed (nothing of it was built).
        StoreCorrupt: a checkpoint (or its metadata, values) is not a mapping.
    """
    guard = GuardedSerializer(allowed_types)
    threads = thread_ids if thread_ids is not None else _thread_ids(source)
    checkpoints = writes = skipped = 0
    for thread_id in threads:
        config = {"configurable": {"thread_id": thread_id}}
        done = {
            (t.config["configurable"].get("checkpoint_ns", ""), t.checkpoint["id"])
            for t in target.list(config)
        }
        todo = []
        for item in _thread_tuples(source, thread_id):
            conf = item.config["configurable"]
            if (conf.get("checkpoint_ns", ""), conf["checkpoint_id"]) in done:
                skipped += 1
            else:  # all decoded before any is written: a refused value stops the thread whole
                todo.append(_decoded(item, guard))
        paths = task_paths(todo)  # over them all: a node's triggers show after it ran
        for item in todo:
            conf = item.config["configurable"]
            where = (conf.get("checkpoint_ns", ""), conf["checkpoint_id"])
            writes += _copy_one(target, item, paths.get(where, {}))
            checkpoints += 1
        if progress is not None:
            progress(thread_id)
    return ImportReport(len(threads), checkpoints, writes, skipped)


def import_langgraph(
    source: str | BaseCheckpointSaver,
    db: Any,
    *,
    thread_ids: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    allowed_types: AllowedTypes = (),
) -> ImportReport:
    """Copy a SqliteSaver or PostgresSaver database (or any saver) into a smithers_tt store.

    Args:
        source: a database URL (see :func:`open_source`) or an open LangGraph saver (which
            decodes with its own serializer).
        db: the open :class:`smithers_tt.Database` to import into.
        thread_ids: the threads to import (default: all).
        progress: called with each thread id once it is imported.
        allowed_types: types (classes or ``(module, name)`` pairs) a value may construct
            besides LangGraph's strict list; the returned store's saver needs them too.

    Returns:
        An :class:`ImportReport`.

    Raises:
        UnsafeValue: a value names a type that is not allowed; nothing of it was built.
        StoreCorrupt: a checkpoint (or its metadata, values) is not a mapping.
    """
    target = SmithersSaver(db, allowed_types=allowed_types)
    kw: dict[str, Any] = {"thread_ids": thread_ids, "progress": progress}
    if isinstance(source, BaseCheckpointSaver):
        return copy_threads(source, target, allowed_types=allowed_types, **kw)
    # the source hands values back encoded; copy_threads decodes each naming its checkpoint
    with _open(str(source), DeferredSerializer(GuardedSerializer(allowed_types))) as saver:
        return copy_threads(saver, target, allowed_types=allowed_types, **kw)
