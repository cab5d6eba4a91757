"""What the debugger's timeline reads of a long run: counts of frames per bin, not the frames.

A binned timeline shows one marker per node, kind of frame and bin of frame numbers; reading
every frame of a 100,000-frame run to count them costs more than the rest of the figure.
These reads let the database count in one pass (:func:`frame_bins`), say cheaply whether the
run has more (node, iteration) pairs than rows (:func:`node_level_pairs`), and read frame by
frame only what the figure draws one by one: the frames of the attempt bars (the fields that
matter, :func:`attempt_frames`), a marker that stands for a single frame (a whole
:class:`FrameRow`, :func:`numbered_frames`) and the times of a time axis
(:func:`frame_times`). Each is one read-only transaction of
parameterised SQL, the same on SQLite and PostgreSQL (a list of frame numbers is written as
the dialect says, :meth:`Dialect.any_of`), sent to the driver as written: the counts of a
long run are thousands of rows, which SQLAlchemy's result processing would slow down.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import sqlalchemy as sa

from smithers_tt.store._frames import frame_fields
from smithers_tt.store._records import stored_json
from smithers_tt.store.backend import Engine
from smithers_tt.store.backend import schema as S
from smithers_tt.store.reads._frame_rows import FrameRow

__all__ = [
    "AttemptFrame",
    "FrameBin",
    "attempt_frames",
    "frame_bins",
    "frame_times",
    "node_level_pairs",
    "numbered_frames",
]

_COLUMNS = ", ".join(S.frames.c.keys())
"""Every column of ``tt_frames``, in the order :func:`frame_fields` reads."""


def _bins_sql(iteration: str, times: bool) -> str:
    # Two constant choices (the iteration column or 0, the times joined or not), never data.
    # The bin comes first: frames arrive in frame order, so sorting them for the grouping
    # is cheapest that way; every other column grouped by costs (SQLite sorts to group).
    counts = (
        f"SELECT frame_no / CAST(? AS BIGINT) AS bin, node_id, kind, purpose, {iteration} "  # noqa: S608
        "AS iteration, COUNT(*) AS n, MIN(frame_no) AS first_no, MAX(frame_no) AS last_no "
        "FROM tt_frames WHERE run_id = ? AND frame_no >= 0 AND frame_no <= ? "
        "GROUP BY 1, 2, 3, 4, 5"
    )
    if not times:
        return f"SELECT c.*, NULL FROM ({counts}) c"  # noqa: S608
    return (
        f"SELECT c.*, f.created_at_ms FROM ({counts}) c JOIN tt_frames f "  # noqa: S608
        "ON f.run_id = ? AND f.frame_no = c.last_no"
    )


_BINS = {
    (by_iteration, times): _bins_sql("iteration" if by_iteration else "0", times)
    for by_iteration in (True, False)
    for times in (True, False)
}

_NODE_LEVEL_PAIRS = (
    # The partial index's own predicate, literally: the pairs are read from the index alone.
    "SELECT DISTINCT node_id, iteration FROM tt_frames "  # noqa: S608
    f"WHERE run_id = ? AND frame_no <= ? AND {S.NODE_LEVEL_WHERE.text} LIMIT ?"
)
_ATTEMPT_COLUMNS = "frame_no, kind, node_id, iteration, attempt, state, data_json, created_at_ms"
"""The columns of :class:`AttemptFrame`, in its order."""
_ATTEMPT_FRAMES = (
    f"SELECT {_ATTEMPT_COLUMNS} FROM tt_frames WHERE run_id = ? AND frame_no >= 0 "  # noqa: S608
    f"AND frame_no <= ? AND {S.NODE_LEVEL_WHERE.text} "
    "AND (kind = 'attempt_started' OR kind = 'attempt_finished') AND node_id IS NOT NULL "
    "UNION ALL "
    f"SELECT {_ATTEMPT_COLUMNS} FROM tt_frames WHERE run_id = ? AND frame_no >= 0 "
    f"AND frame_no <= ? AND {S.RUN_LEVEL_WHERE.text} AND kind = 'reset' "
    "ORDER BY frame_no"
)


class AttemptFrame(NamedTuple):
    """The fields of a frame that starts or ends attempts (those of :class:`FrameRow` by the
    same names; the content columns, empty on such frames, are not read)."""

    frame_no: int
    kind: str
    node_id: str | None
    iteration: int | None
    attempt: int | None
    state: str | None
    data: Any
    created_at_ms: int


class FrameBin(NamedTuple):
    """The frames of one bin that agree on node, kind, purpose and (when counted so)
    iteration: how many, the first and the last."""

    bin: int
    """``frame_no // width``."""
    node_id: str | None
    kind: str
    purpose: str | None
    iteration: int | None
    """Their iteration as stored, or 0 for all when not counted by iteration."""
    count: int
    first: int
    """The lowest frame number among them."""
    last: int
    """The highest."""
    last_ms: int | None
    """``created_at_ms`` of frame ``last`` when asked for, else None."""


def _rows(engine: Engine, sql: str, params: Iterable[object]) -> list[Any]:
    stmt, values = engine.backend.sql(sql), tuple(params)
    return engine.transaction(
        lambda conn: conn.exec_driver_sql(stmt, values).fetchall(), write=False
    )


def frame_bins(
    engine: Engine, run_id: str, *, upto: int, width: int, by_iteration: bool, times: bool = False
) -> list[FrameBin]:
    """Frames 0 to ``upto`` of a run counted per bin of ``width`` frame numbers, node, kind,
    purpose and (with ``by_iteration``) iteration, in no particular order; with ``times``,
    the time of each group's last frame."""
    params: list[object] = [max(1, int(width)), run_id, upto]
    if times:
        params.append(run_id)
    found = _rows(engine, _BINS[(bool(by_iteration), bool(times))], params)
    return list(map(FrameBin._make, found))  # integers from both drivers, as they come


def node_level_pairs(
    engine: Engine, run_id: str, *, upto: int, limit: int
) -> list[tuple[str, int]]:
    """Up to ``limit`` distinct (node, iteration) pairs (a None iteration read as 0) of the
    run's node and attempt frames up to ``upto``: some of the pairs of its frames (all of
    them unless checkpoints or run frames name others), read from an index."""
    found = _rows(engine, _NODE_LEVEL_PAIRS, (run_id, upto, int(limit)))
    return list(dict.fromkeys((str(node), int(it or 0)) for node, it in found))


def attempt_frames(engine: Engine, run_id: str, *, upto: int) -> list[AttemptFrame]:
    """The frames 0 to ``upto`` that start or end attempts: ``attempt_started`` and
    ``attempt_finished`` frames of a node and every ``reset`` frame, in order (each kind read
    through its partial index).

    Raises:
        StoreCorrupt: a frame's data is not JSON.
    """
    found = _rows(engine, _ATTEMPT_FRAMES, (run_id, upto, run_id, upto))
    make = AttemptFrame._make
    return [make((*r[:6], _data(run_id, r[0], r[6]), r[7])) for r in found]


def _data(run_id: str, frame_no: object, text: Any) -> Any:
    if text is None:
        return None
    return stored_json(text, lambda: f"tt_frames.data_json of frame {frame_no} of run {run_id!r}")


def numbered_frames(engine: Engine, run_id: str, frame_nos: Iterable[int]) -> list[FrameRow]:
    """The frames of a run numbered ``frame_nos`` (those that exist), in order."""
    make = FrameRow._make
    found = _numbered(engine, run_id, frame_nos, _COLUMNS)
    return sorted((make(frame_fields(r)) for r in found), key=lambda row: row.frame_no)


def frame_times(engine: Engine, run_id: str, frame_nos: Iterable[int]) -> dict[int, int]:
    """``created_at_ms`` of the frames of a run numbered ``frame_nos`` (those that exist)."""
    found = _numbered(engine, run_id, frame_nos, "frame_no, created_at_ms")
    return {int(n): int(ms) for n, ms in found}


def _numbered(engine: Engine, run_id: str, frame_nos: Iterable[int], columns: str) -> list[Any]:
    wanted = sorted({int(n) for n in frame_nos})
    if not wanted:
        return []
    dialect = engine.backend
    # ``columns`` is one of this module's constants; the numbers are parameters.
    head = dialect.sql(f"SELECT {columns} FROM tt_frames WHERE run_id = ? AND frame_no ")  # noqa: S608

    def read(conn: sa.Connection) -> list[Any]:
        out: list[Any] = []
        for condition, values in dialect.any_of(wanted):
            out.extend(conn.exec_driver_sql(head + condition, (run_id, *values)).fetchall())
        return out

    return engine.transaction(read, write=False)
