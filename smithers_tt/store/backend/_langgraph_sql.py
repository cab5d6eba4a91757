"""The LangGraph saver's layout in the store and its statements, with what differs between
SQLite and PostgreSQL left to the store's dialect (:class:`LangGraphSql`).

A LangGraph thread (``thread_id`` + ``checkpoint_ns``) is one run of workflow
:data:`LANGGRAPH_WORKFLOW` whose id is :func:`langgraph_run_id` of the pair; the run has two
nodes, :data:`LANGGRAPH_DOC_NODE` (one frame per checkpoint document) and
:data:`LANGGRAPH_VALUE_NODE` (one frame per value the thread uses for the first time, which
pins it). ``tt_lg_threads`` maps a run back to its thread; ``tt_lg_checkpoints`` indexes the
document frames by ``(run, checkpoint_id)`` and holds each checkpoint's pending writes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from sqlalchemy.engine import Connection

from smithers_tt.store.backend._dialect import Dialect

LANGGRAPH_WORKFLOW = "langgraph"
"""Workflow name of the runs that hold LangGraph threads."""

LANGGRAPH_DOC_NODE = "checkpoints"
"""Node of a LangGraph thread's run whose frames hold its checkpoint documents."""

LANGGRAPH_VALUE_NODE = "values"
"""Node of a LangGraph thread's run whose frames pin the values it stores by hash."""

AGENT = "langgraph"
"""Agent id of the saver's frames."""
CHUNK = 500
"""Values per IN list (or per :meth:`LangGraphSql.pinned` statement)."""


def langgraph_run_id(thread_id: str, checkpoint_ns: str = "") -> str:
    """The id of the run that holds a LangGraph thread (and namespace)."""
    key = json.dumps([str(thread_id), str(checkpoint_ns)], ensure_ascii=False)
    return "lg" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


class LangGraphIndexQuery(NamedTuple):
    """Which rows of a LangGraph checkpoint index to read; every field set narrows it.

    ``run_id`` is one thread and namespace; ``thread_id``/``checkpoint_ns`` match the thread's
    own keys; ``before`` keeps checkpoint ids below it; ``after`` is the keyset cursor
    ``(checkpoint_id, run_id)`` of the previous page.
    """

    run_id: str | None = None
    thread_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_id: str | None = None
    before: str | None = None
    after: tuple[str, str] | None = None


class LangGraphSql:
    """Runs the saver's hot-path statements: driver SQL written once with ``:name``
    parameters (building SQLAlchemy Core statements costs more than running these; cold
    paths use Core), each put in the driver's style by the store's :class:`Dialect` once and
    kept; the saver's writes are the ledger's prebuilt statements
    (:class:`~smithers_tt.store.backend._statements.Statements`). What differs between databases
    (placeholders, chunk sizes) is the dialect's."""

    __slots__ = ("_texts", "backend")

    def __init__(self, backend: Dialect) -> None:
        self.backend = backend
        self._texts: dict[str, str] = {}

    def __call__(self, conn: Connection, sql: str, params: dict[str, Any] | None = None) -> Any:
        text = self._texts.get(sql)
        if text is None:
            text = self._texts[sql] = self.backend.named(sql)
        return conn.exec_driver_sql(text, params or {})

    def chunks(self, items: Sequence[Any]) -> Iterable[Sequence[Any]]:
        """``items`` in slices of at most :data:`CHUNK` (IN lists)."""
        return self.backend.chunks(items, 1, CHUNK)

    def pinned(self, count: int) -> str:
        """Driver SQL of one row: for each of ``count`` hashes, whether a frame of the run
        has it (parameters: run id and hash, in turn; at most :data:`CHUNK` hashes)."""
        return self.backend.sql("SELECT " + ", ".join([PINNED] * count))

    @staticmethod
    def in_list(name: str, values: Sequence[Any], params: dict[str, Any]) -> str:
        """``:name0, :name1, ...`` for an IN list, adding the values to ``params``."""
        keys = [f"{name}{n}" for n in range(len(values))]
        params.update(zip(keys, values, strict=True))
        return ", ".join(f":{k}" for k in keys)


PINNED = "EXISTS (SELECT 1 FROM tt_frames WHERE run_id = ? AND content_hash = ?)"
SELECT_WRITES = (
    "SELECT writes_json FROM tt_lg_checkpoints WHERE run_id = :run AND checkpoint_id = :cid"
)
CONTENTS_WHERE = "FROM tt_checkpoint_contents WHERE content_hash"
SELECT_DOCS = (
    "SELECT c.run_id, c.checkpoint_id, c.frame_no, c.writes_json, t.thread_id, t.checkpoint_ns "
    "FROM tt_lg_checkpoints c JOIN tt_lg_threads t ON t.run_id = c.run_id "
    "JOIN tt_runs r ON r.run_id = c.run_id WHERE c.frame_no <= r.clock"
)
"""Index rows that have a document at or below their run's clock: a smithers_tt rewind keeps
the rows of the checkpoints it cut (``undo_rewind`` brings their frames back), and LangGraph
must not see them meanwhile. Their frames and contents are read by primary key in a second
statement (a join lets PostgreSQL, before statistics exist, scan a run's frames once per
row)."""
FRAME_DOCS = (
    "SELECT f.frame_no, f.kind, f.node_id, f.content_hash, d.data, d.size_bytes FROM tt_frames f "
    "LEFT JOIN tt_checkpoint_contents d ON d.content_hash = f.content_hash WHERE f.run_id = :run "
    "AND f.frame_no IN "
)
PAGE_ORDER = " ORDER BY c.checkpoint_id DESC, c.run_id DESC LIMIT :size"
NEWEST_ORDER = " ORDER BY c.checkpoint_id DESC LIMIT 1"


def index_select(query: LangGraphIndexQuery) -> tuple[str, dict[str, Any]]:
    """The SELECT (without ORDER BY) of the index rows ``query`` names, and its parameters."""
    sql, params = SELECT_DOCS, {}
    if query.run_id is not None:
        sql += " AND c.run_id = :run"
        params["run"] = query.run_id
    for column, key, value in (
        ("t.thread_id", "thread_id", query.thread_id),
        ("t.checkpoint_ns", "checkpoint_ns", query.checkpoint_ns),
        ("c.checkpoint_id", "checkpoint_id", query.checkpoint_id),
    ):
        if value is not None:
            sql += f" AND {column} = :{key}"
            params[key] = value
    if query.before is not None:
        sql += " AND c.checkpoint_id < :before"
        params["before"] = query.before
    if query.after is not None:
        sql += (
            " AND (c.checkpoint_id < :after_id OR "
            "(c.checkpoint_id = :after_id AND c.run_id < :after_run))"
        )
        params["after_id"], params["after_run"] = query.after
    return sql, params
