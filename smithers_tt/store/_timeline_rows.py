"""What the debugger's timeline reads of a long run: counts of frames per bin, not the frames.

A binned timeline shows one marker per node, kind of frame and bin of frame numbers; reading
every frame of a 100,000-frame run to count them costs more than the rest of the figure.
These reads let the database count: :func:`node_pairs` (the timeline's rows),
:func:`frame_bins` (the markers), and, as full :class:`FrameRow`, only the frames the figure
shows one by one: :func:`attempt_frames` (the attempt bars), :func:`numbered_frames` (a
marker that stands for a single frame) and :func:`frame_times` (a time axis). Each is one
read-only transaction of parameterised SQL, the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import NamedTuple

import sqlalchemy as sa

from smithers_tt.store import _schema as S
from smithers_tt.store._engine import Engine
from smithers_tt.store._frames import frame_fields, select_frames
from smithers_tt.store._frames_columns import FrameRow

__all__ = [
    "FrameBin",
    "attempt_frames",
    "frame_bins",
    "frame_times",
    "node_pairs",
    "numbered_frames",
]

_PAIRS = sa.text(
    "SELECT node_id, COALESCE(iteration, 0) AS iteration, MIN(frame_no) AS first_no "
    "FROM tt_frames WHERE run_id = :run_id AND frame_no <= :upto AND node_id IS NOT NULL "
    "GROUP BY node_id, COALESCE(iteration, 0) ORDER BY first_no"
)


def _bins_sql(iteration: str) -> sa.TextClause:
    # ``iteration`` is one of two constant expressions below, never data.
    return sa.text(
        "SELECT kind, purpose, later, node_id, iteration, bin, COUNT(*), MIN(frame_no), "  # noqa: S608
        "MAX(frame_no) FROM (SELECT kind, purpose, "
        "CASE WHEN attempt > 1 THEN 1 ELSE 0 END AS later, node_id, "
        f"{iteration} AS iteration, frame_no / CAST(:width AS BIGINT) AS bin, frame_no "
        "FROM tt_frames WHERE run_id = :run_id AND frame_no >= 0 AND frame_no <= :upto) b "
        "GROUP BY kind, purpose, later, node_id, iteration, bin"
    )


_BINS = {True: _bins_sql("COALESCE(iteration, 0)"), False: _bins_sql("0")}


class FrameBin(NamedTuple):
    """The frames of one bin that agree on everything a timeline marker depends on."""

    kind: str
    purpose: str | None
    later: bool
    """Whether they belong to a later attempt than the first (``attempt > 1``)."""
    node_id: str | None
    iteration: int
    """Their iteration (None read as 0), or 0 for all when not counted by iteration."""
    bin: int
    """``frame_no // width``."""
    count: int
    first: int
    """The lowest frame number among them."""
    last: int
    """The highest."""


def node_pairs(engine: Engine, run_id: str, *, upto: int) -> list[tuple[str, int]]:
    """Every distinct (node, iteration) of the run's frames up to ``upto`` (base frames
    below 0 included; a None iteration read as 0), in the order of their first frame."""
    params = {"run_id": run_id, "upto": upto}
    found = engine.transaction(lambda conn: conn.execute(_PAIRS, params).all(), write=False)
    return [(node_id, iteration) for node_id, iteration, _ in found]


def frame_bins(
    engine: Engine, run_id: str, *, upto: int, width: int, by_iteration: bool
) -> list[FrameBin]:
    """Frames 0 to ``upto`` of a run counted per bin of ``width`` frame numbers and per kind,
    purpose, later attempt or not, node and (with ``by_iteration``) iteration, in no
    particular order."""
    params = {"run_id": run_id, "upto": upto, "width": max(1, int(width))}
    stmt = _BINS[bool(by_iteration)]
    found = engine.transaction(lambda conn: conn.execute(stmt, params).all(), write=False)
    return [
        FrameBin(kind, purpose, bool(later), node_id, int(iteration), int(b), int(n), first, last)
        for kind, purpose, later, node_id, iteration, b, n, first, last in found
    ]


def attempt_frames(engine: Engine, run_id: str, *, upto: int) -> list[FrameRow]:
    """The frames 0 to ``upto`` that start or end attempts: ``attempt_started`` and
    ``attempt_finished`` frames of a node and every ``reset`` frame, in order (each kind read
    through its partial index)."""
    f = S.frames
    visible = select_frames(run_id, after=-1, upto=upto)
    node_level = visible.where(
        S.NODE_LEVEL_WHERE,
        f.c.kind.in_(("attempt_started", "attempt_finished")),
        f.c.node_id.is_not(None),
    )
    resets = visible.where(S.RUN_LEVEL_WHERE, f.c.kind == "reset")
    make = FrameRow._make

    def read(conn: sa.Connection) -> list[FrameRow]:
        ends = [make(frame_fields(r)) for r in conn.execute(node_level).fetchall()]
        gone = [make(frame_fields(r)) for r in conn.execute(resets).fetchall()]
        return list(heapq.merge(ends, gone, key=lambda row: row.frame_no))

    return engine.transaction(read, write=False)


def numbered_frames(engine: Engine, run_id: str, frame_nos: Iterable[int]) -> list[FrameRow]:
    """The frames of a run numbered ``frame_nos`` (those that exist), in order."""
    wanted = sorted(set(frame_nos))
    if not wanted:
        return []
    make = FrameRow._make
    f = S.frames

    def read(conn: sa.Connection) -> list[FrameRow]:
        out: list[FrameRow] = []
        for part in engine.backend.chunks(wanted, 1):
            stmt = select_frames(run_id).where(f.c.frame_no.in_(part))
            out.extend(make(frame_fields(r)) for r in conn.execute(stmt).fetchall())
        return sorted(out, key=lambda row: row.frame_no)

    return engine.transaction(read, write=False)


def frame_times(engine: Engine, run_id: str, frame_nos: Iterable[int]) -> dict[int, int]:
    """``created_at_ms`` of the frames of a run numbered ``frame_nos`` (those that exist)."""
    wanted = sorted(set(frame_nos))
    if not wanted:
        return {}
    f = S.frames

    def read(conn: sa.Connection) -> dict[int, int]:
        out: dict[int, int] = {}
        for part in engine.backend.chunks(wanted, 1):
            stmt = sa.select(f.c.frame_no, f.c.created_at_ms).where(
                f.c.run_id == run_id, f.c.frame_no.in_(part)
            )
            out.update((int(n), ms) for n, ms in conn.execute(stmt).all())
        return out

    return engine.transaction(read, write=False)
