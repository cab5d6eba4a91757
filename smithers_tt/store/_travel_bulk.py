"""The set-based reads of time travel: the state at frame N with its refs left in SQL.

:func:`smithers_tt.timetravel.state_at` (the decision) folds the frames other than
checkpoints in Python and asks these statements about the checkpoint frames, which never leave
the database: how many there are per attempt, whether each is well-formed (what ``fold``
checks), and which are visible at frame N (after the last ``reset`` of their node). The refs
stay described by a :class:`StoredRefs` (plain data: the cut per node) that rewind and fork
copy with one ``INSERT ... SELECT`` (see :mod:`smithers_tt.store._travel_write`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.errors import SnapshotInvalid, StoreCorrupt
from smithers_tt.store import _schema as S
from smithers_tt.store._dialect import DIALECTS, Dialect
from smithers_tt.store._frames import Frame, frame_from_row, select_frames
from smithers_tt.store._records import VERIFY_HINT, CheckpointRef

_FLOOR = -(2**62)
"""Below every frame number (base frames of a fork are negative)."""

AttemptKeyT = tuple[str, int, int]
"""``(node_id, iteration, attempt)`` of an attempt."""


def dialect_of(conn: Connection) -> Dialect:
    """The store's dialect object of ``conn``'s database."""
    return DIALECTS[conn.dialect.name]


def run_sql(conn: Connection, sql: str, params: dict[str, Any]) -> Any:
    """Execute ``sql`` (``:name`` placeholders) through the driver and return its cursor.

    Rows come back as plain tuples, without SQLAlchemy's per-row objects: these statements
    read up to a few hundred thousand rows. Placeholders become the driver's own; the SQL is
    written in the store's ``_travel*`` modules (no user input), values are always bound.
    """
    return conn.exec_driver_sql(dialect_of(conn).named(sql), params)


def plain_rows(conn: Connection, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every row of ``sql`` (see :func:`run_sql`) as the driver's own tuples, taken from its
    cursor: no per-row object of SQLAlchemy's (a few microseconds each, on 100,000 rows)."""
    return run_sql(conn, sql, params).cursor.fetchall()


def stored_sizes(conn: Connection, hashes: Sequence[str]) -> dict[str, int]:
    """``{content_hash: size_bytes}`` of the stored contents among ``hashes``."""
    c = S.contents
    found: dict[str, int] = {}
    for part in Dialect.chunks(hashes, 1):
        rows = conn.execute(
            sa.select(c.c.content_hash, c.c.size_bytes).where(c.c.content_hash.in_(list(part)))
        ).all()
        found.update((r.content_hash, r.size_bytes) for r in rows)
    return found


@dataclass
class StoredRefs:
    """The refs visible at ``frame_no`` of ``run_id``, left in its checkpoint frames (what
    the statements below select them by: plain data, no connection)."""

    run_id: str
    frame_no: int
    cut: dict[str, int]
    """Per node: only its checkpoint frames above this number are visible (its last reset,
    or ``frame_no`` for nodes a fork leaves out)."""
    per_attempt: dict[AttemptKeyT, tuple[int, int]] = field(default_factory=dict)
    """Visible refs per attempt: (how many, next sequence)."""

    @property
    def count(self) -> int:
        return sum(n for n, _ in self.per_attempt.values())

    def without(self, nodes: set[str]) -> StoredRefs:
        """The same refs minus those of ``nodes``."""
        cut = dict(self.cut)
        cut.update(dict.fromkeys(nodes, self.frame_no))
        per = {k: v for k, v in self.per_attempt.items() if k[0] not in nodes}
        return StoredRefs(self.run_id, self.frame_no, cut, per)

    def where(self) -> tuple[str, dict[str, Any]]:
        """A condition on ``tt_frames f`` that holds for exactly the visible checkpoint frames
        (one per visible ref), and its parameters."""
        cut, params = self.after_cut()
        sql = "f.run_id = :src_run AND f.kind = 'checkpoint' AND f.frame_no <= :src_upto"
        params.update(src_run=self.run_id, src_upto=self.frame_no)
        return f"{sql} AND {cut}", params

    def after_cut(self) -> tuple[str, dict[str, Any]]:
        """A condition on ``tt_frames f``: the frame comes after its node's cut."""
        params: dict[str, Any] = {}
        whens = []
        for i, (node, cut) in enumerate(sorted(self.cut.items())):
            params[f"cut_node_{i}"] = node
            params[f"cut_no_{i}"] = cut
            whens.append(f"WHEN :cut_node_{i} THEN :cut_no_{i}")
        if not whens:
            return "1 = 1", params
        params["cut_floor"] = _FLOOR
        return f"f.frame_no > CASE f.node_id {' '.join(whens)} ELSE :cut_floor END", params


_REF_SELECT = (
    "SELECT f.node_id, f.iteration, f.attempt, f.sequence, f.content_hash, f.codec, "
    "f.version, f.purpose, f.agent_id, "
)
"""The columns of a visible ref (in :class:`CheckpointRef` field order, no run id); the
``created_at_ms`` expression of the dialect follows."""

_OTHER_COLUMNS = "frame_no, kind, node_id, iteration, attempt, state, data_json, created_at_ms"
"""What the fold reads of frames other than checkpoints (the ref columns are NULL or unused
there)."""


def corrupt_frame(run_id: str, frame_no: int, kind: str, why: object) -> SnapshotInvalid:
    """The error for a frame whose ``data_json`` is not JSON at all."""
    return SnapshotInvalid(
        f"frame {frame_no} ({kind}) of run {run_id} is corrupt: its data is not JSON "
        f"({why}); nothing was changed; {VERIFY_HINT}",
        run_id=run_id,
        frame_no=frame_no,
    )


class BulkReads:
    """The reads of one time-travel transaction (mixed into :class:`~._travel.Travel`)."""

    _conn: Connection

    def content_sizes(self, hashes: Sequence[str]) -> dict[str, int]:
        """``{content_hash: size_bytes}`` of the stored contents among ``hashes``."""
        return stored_sizes(self._conn, hashes)

    def frames(self, run_id: str, upto: int | None = None) -> list[Frame]:
        """Every frame of ``run_id`` up to ``upto``, in order, as the full fold reads them.

        Raises:
            SnapshotInvalid: a frame's data is not JSON at all.
        """
        frames = []
        for row in self._conn.execute(select_frames(run_id, upto=upto)):
            try:
                frames.append(frame_from_row(row))
            except StoreCorrupt as error:  # data_json that is not JSON at all
                raise corrupt_frame(run_id, row.frame_no, row.kind, error.__cause__) from error
        return frames

    def frame_span(self, run_id: str, upto: int) -> tuple[int, int | None]:
        """How many frames ``run_id`` has at or below ``upto``, and the lowest number."""
        count, low = run_sql(
            self._conn,
            "SELECT count(*), min(frame_no) FROM tt_frames "
            "WHERE run_id = :run AND frame_no <= :upto",
            {"run": run_id, "upto": upto},
        ).one()
        return count, low

    def other_frames(self, run_id: str, upto: int) -> Iterator[tuple[Any, ...]]:
        """Every frame at or below ``upto`` except checkpoints, in order, as plain tuples
        ``(frame_no, kind, node_id, iteration, attempt, state, data, created_at_ms)`` with
        ``data`` parsed (no per-row objects: a large run has many of them).

        Each row's data is parsed as it is taken, so a fold that fails on an earlier frame
        reports that frame first.

        Raises:
            SnapshotInvalid: a frame's data is not JSON at all.
        """
        rows = plain_rows(
            self._conn,
            f"SELECT {_OTHER_COLUMNS} FROM tt_frames WHERE run_id = :run "  # noqa: S608
            "AND frame_no <= :upto AND kind <> 'checkpoint' ORDER BY frame_no",
            {"run": run_id, "upto": upto},
        )
        loads = orjson.loads
        for row in rows:
            data = row[6]
            if data is not None:
                try:
                    data = loads(data)
                except ValueError as error:
                    raise corrupt_frame(run_id, row[0], row[1], error) from error
            yield (*row[:6], data, row[7])

    def checkpoint_groups(self, refs: StoredRefs) -> list[tuple[Any, ...]] | None:
        """One pass over the checkpoint frames of ``refs.run_id`` up to ``refs.frame_no``,
        per attempt: ``(node_id, iteration, attempt, frames, malformed, visible, top
        sequence visible)``. A frame is malformed when it lacks what ``fold`` needs of it
        (fields, a 64-digit hash, ``data`` it can read); visible when after its node's cut.

        ``None`` when PostgreSQL could not read some ``data_json`` as JSON (the fold names it).
        """
        conn = self._conn
        dialect = dialect_of(conn)
        visible, params = refs.after_cut()
        return dialect.unless_cast_fails(
            conn,
            lambda: run_sql(
                conn,
                "SELECT f.node_id, f.iteration, f.attempt, count(*), "  # noqa: S608
                "sum(CASE WHEN f.node_id IS NULL OR f.iteration IS NULL "
                "OR f.attempt IS NULL OR f.sequence IS NULL OR f.content_hash IS NULL "
                "OR f.codec IS NULL OR f.version IS NULL OR f.purpose IS NULL "
                "OR length(f.content_hash) <> 64 OR f.version = 0 OR f.purpose = '' "
                f"OR {dialect.frame_data_ok} = 0 THEN 1 ELSE 0 END), "
                f"sum(CASE WHEN {visible} THEN 1 ELSE 0 END), "
                f"max(CASE WHEN {visible} THEN f.sequence END) FROM tt_frames f "
                "WHERE f.run_id = :run AND f.kind = 'checkpoint' AND f.frame_no <= :upto "
                "GROUP BY f.node_id, f.iteration, f.attempt",
                dict(params, run=refs.run_id, upto=refs.frame_no),
            ).fetchall(),
        )

    def stored_ref_rows(self, refs: StoredRefs) -> list[tuple[Any, ...]]:
        """The visible refs as tuples in :class:`CheckpointRef` field order (no run id)."""
        where, params = refs.where()
        return run_sql(
            self._conn,
            f"{_REF_SELECT}{dialect_of(self._conn).ref_created} FROM tt_frames f WHERE {where}",
            params,
        ).fetchall()

    def newest_stored_ref(self, refs: StoredRefs, node_id: str) -> CheckpointRef | None:
        """The node's newest visible ref (highest iteration, then attempt, then sequence)."""
        where, params = refs.where()
        row = run_sql(
            self._conn,
            f"{_REF_SELECT}{dialect_of(self._conn).ref_created} "
            f"FROM tt_frames f WHERE {where} AND f.node_id = :newest_node "
            "ORDER BY f.iteration DESC, f.attempt DESC, f.sequence DESC LIMIT 1",
            dict(params, newest_node=node_id),
        ).first()
        return None if row is None else CheckpointRef(refs.run_id, *row)
