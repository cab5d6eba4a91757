"""One read transaction of the LangGraph saver (:class:`LangGraphRead`): pages of a
thread's checkpoint index, the documents their frames hold, content by hash, a checkpoint's
stored writes. Every byte handed out is verified against its SHA-256 address."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import content_hash
from smithers_tt.errors import CheckpointCorrupt, CheckpointMissing
from smithers_tt.store.backend import (
    CONTENTS_WHERE,
    FRAME_DOCS,
    LANGGRAPH_DOC_NODE,
    NEWEST_ORDER,
    PAGE_ORDER,
    SELECT_WRITES,
    LangGraphIndexQuery,
    LangGraphSql,
    index_select,
)


class LangGraphDocument(NamedTuple):
    """An index row of a LangGraph checkpoint with its document's verified bytes."""

    run_id: str
    checkpoint_id: str
    writes_json: str | None
    thread_id: str
    checkpoint_ns: str
    content_hash: str
    data: bytes


def _verified(digest: str, data: Any, size: int) -> bytes:
    data = bytes(data)
    if len(data) != size or content_hash(data) != digest:
        raise CheckpointCorrupt(
            f"content {digest[:12]} of a LangGraph checkpoint failed its integrity check; it is "
            "never handed to LangGraph; run verify() and restore from a backup",
            content_hash=digest,
        )
    return data


class LangGraphRead:
    """The store side of one saver read transaction, on ``conn``."""

    __slots__ = ("_sql", "conn")

    def __init__(self, sql: LangGraphSql, conn: Connection) -> None:
        self._sql, self.conn = sql, conn

    def page(self, query: LangGraphIndexQuery, size: int) -> list[Any]:
        """Index rows ``query`` names that have a document, newest first (by checkpoint id,
        then run id), at most ``size``; each has ``run_id``, ``checkpoint_id``, ``frame_no``,
        ``writes_json``, ``thread_id`` and ``checkpoint_ns``."""
        sql, params = index_select(query)
        return self._sql(self.conn, sql + PAGE_ORDER, {**params, "size": size}).all()

    def newest(self, run_id: str, checkpoint_id: str | None = None) -> list[Any]:
        """The index row (as :meth:`page`) of a run's newest checkpoint, or of the one named:
        a list of at most one."""
        query = LangGraphIndexQuery(run_id=run_id, checkpoint_id=checkpoint_id)
        sql, params = index_select(query)
        return self._sql(self.conn, sql + NEWEST_ORDER, params).all()

    def documents(self, rows: Sequence[Any]) -> list[LangGraphDocument]:
        """Index rows with their document frame's verified content. Rows whose frame is gone
        or holds no document (as after a smithers_tt rewind) are left out.

        Raises:
            CheckpointMissing: a frame's content is not stored.
            CheckpointCorrupt: a content's bytes do not match its address.
        """
        by_run: dict[str, list[Any]] = {}
        for row in rows:
            by_run.setdefault(row.run_id, []).append(row)
        found: dict[tuple[str, int], Any] = {}
        for run_id, group in by_run.items():
            for part in self._sql.chunks(group):
                params: dict[str, Any] = {"run": run_id}
                marks = self._sql.in_list("f", [r.frame_no for r in part], params)
                for frame in self._sql(self.conn, f"{FRAME_DOCS}({marks})", params):
                    found[(run_id, frame.frame_no)] = frame
        out: list[LangGraphDocument] = []
        for row in rows:
            frame = found.get((row.run_id, row.frame_no))
            if frame is None or frame.kind != "checkpoint" or frame.node_id != LANGGRAPH_DOC_NODE:
                continue
            if frame.data is None:
                raise CheckpointMissing(
                    f"the document of LangGraph checkpoint {row.checkpoint_id} is not stored"
                )
            out.append(
                LangGraphDocument(
                    row.run_id,
                    row.checkpoint_id,
                    row.writes_json,
                    row.thread_id,
                    row.checkpoint_ns,
                    frame.content_hash,
                    _verified(frame.content_hash, frame.data, frame.size_bytes),
                )
            )
        return out

    def contents(self, hashes: set[str]) -> dict[str, bytes]:
        """Verified bytes of these contents (missing ones are left out)."""
        out: dict[str, bytes] = {}
        for part in self._sql.chunks(sorted(hashes)):
            params: dict[str, Any] = {}
            marks = self._sql.in_list("h", part, params)  # placeholders only: no value inlined
            sql = f"SELECT content_hash, data, size_bytes {CONTENTS_WHERE} IN ({marks})"
            for row in self._sql(self.conn, sql, params):
                out[row.content_hash] = _verified(row.content_hash, row.data, row.size_bytes)
        return out

    def writes_json(self, run_id: str, checkpoint_id: str) -> str | None:
        """A checkpoint's stored writes (None when it has none or no index row)."""
        key = {"run": run_id, "cid": checkpoint_id}
        row = self._sql(self.conn, SELECT_WRITES, key).one_or_none()
        return None if row is None else row.writes_json
