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
again is safe: checkpoints already in the target are skipped. Values are decoded by
LangGraph's ``JsonPlusSerializer`` with pickle disabled, so a source that holds pickled
values fails with a clear error instead of unpickling untrusted bytes.

The source saver keeps no task paths in its public records, so imported pending writes keep
their task id, channel, index and value but not their task path (LangGraph matches writes to
tasks by id, so resuming is unaffected; only their order within a checkpoint may differ).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from smithers_tt.errors import InvalidArgument
from smithers_tt.integrations.langgraph import SmithersSaver

__all__ = ["ImportReport", "copy_threads", "import_langgraph", "open_source"]


@dataclass(frozen=True)
class ImportReport:
    """What an import copied (checkpoints already in the target are counted as skipped)."""

    threads: int
    checkpoints: int
    writes: int
    skipped: int


@contextlib.contextmanager
def open_source(url: str) -> Iterator[BaseCheckpointSaver]:
    """A LangGraph saver reading the database at ``url``, closed on exit.

    Args:
        url: ``sqlite:///path`` (or a plain file path) for a SqliteSaver database,
            ``postgresql://...`` (``postgres://``, ``postgresql+psycopg://``) for PostgresSaver.

    Raises:
        InvalidArgument: the URL names neither, the file does not exist, or the saver's
            package (``langgraph-checkpoint-sqlite`` / ``-postgres``) is not installed.
    """
    serde = JsonPlusSerializer(pickle_fallback=False)
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


def _copy_one(target: BaseCheckpointSaver, item: CheckpointTuple) -> int:
    """Copy one checkpoint tuple (its writes first, so a crash never leaves a checkpoint
    without them); returns how many writes it had."""
    conf = item.config["configurable"]
    thread = {"thread_id": conf["thread_id"], "checkpoint_ns": conf.get("checkpoint_ns", "")}
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in item.pending_writes or []:
        by_task.setdefault(task_id, []).append((channel, value))
    for task_id, writes in by_task.items():
        target.put_writes(item.config, writes, task_id)
    parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    target.put(
        {"configurable": {**thread, "checkpoint_id": parent}},
        item.checkpoint,
        item.metadata,
        dict(item.checkpoint.get("channel_versions") or {}),
    )
    return len(item.pending_writes or [])


def copy_threads(
    source: BaseCheckpointSaver,
    target: BaseCheckpointSaver,
    *,
    thread_ids: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ImportReport:
    """Copy threads (every namespace, oldest checkpoint first) from one saver to another.

    Args:
        source: the saver to read (any LangGraph saver).
        target: the saver to write (usually a :class:`SmithersSaver`).
        thread_ids: the threads to copy (default: every thread of ``source``).
        progress: called with each thread id once it is copied.

    Returns:
        The counts of threads, checkpoints and writes copied.
    """
    threads = thread_ids if thread_ids is not None else _thread_ids(source)
    checkpoints = writes = skipped = 0
    for thread_id in threads:
        config = {"configurable": {"thread_id": thread_id}}
        done = {
            (t.config["configurable"].get("checkpoint_ns", ""), t.checkpoint["id"])
            for t in target.list(config)
        }
        for item in reversed(list(source.list(config))):  # oldest first: parents exist
            key = (item.config["configurable"].get("checkpoint_ns", ""), item.checkpoint["id"])
            if key in done:
                skipped += 1
                continue
            writes += _copy_one(target, item)
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
) -> ImportReport:
    """Copy a SqliteSaver or PostgresSaver database (or any saver) into a smithers_tt store.

    Args:
        source: a database URL (see :func:`open_source`) or an open LangGraph saver.
        db: the open :class:`smithers_tt.Database` to import into.
        thread_ids: the threads to import (default: all).
        progress: called with each thread id once it is imported.

    Returns:
        An :class:`ImportReport`.
    """
    target = SmithersSaver(db)
    if isinstance(source, BaseCheckpointSaver):
        return copy_threads(source, target, thread_ids=thread_ids, progress=progress)
    with open_source(str(source)) as saver:
        return copy_threads(saver, target, thread_ids=thread_ids, progress=progress)
