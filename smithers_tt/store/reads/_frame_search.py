"""Frames found by what they are, for the debugger's frame table, without reading a history.

The table filters a run's frames by node, kind and purpose. Walking the frames in Python
needs all of them in memory: 1.5 s to read at 100,000 frames, before the table can show its
first page. These queries answer from the database instead: :func:`frame_choices` (the values
each filter can take, in the order they first appear), :func:`find_frames` (the numbers of the
frames matching the filters) and :func:`frames_at` (the rows of the frames one page shows).

Only visible frames count: 0 and later (a fork's base frames, below 0, restate its parent and
are not shown); ``after < frame_no <= upto`` when given (``upto``: what a debugger has loaded
so far; ``after``: what it has already asked about, when frames arrive). The answers are the
same, value for value and in the same order, on SQLite and PostgreSQL; only how the values'
first frames are found differs (:attr:`Dialect.choice_block`: the fastest way for each).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from smithers_tt.store._frames import frame_fields, select_frames
from smithers_tt.store.backend import Engine
from smithers_tt.store.backend import schema as S
from smithers_tt.store.reads._frame_rows import FrameRow
from smithers_tt.store.reads._timeline import FrameBin

__all__ = ["FrameChoices", "choices_of_bins", "find_frames", "frame_choices", "frames_at"]

_IN_CHUNK = 500
"""Frame numbers asked for in one ``IN`` list (far below either database's limit)."""


@dataclass(frozen=True)
class FrameChoices:
    """The distinct node ids, kinds and purposes of a run's visible frames, each in the order
    of the first frame that has it (frames without a node or a purpose add none)."""

    nodes: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    purposes: tuple[str, ...] = ()


def _visible(run_id: str, after: int | None, upto: int | None) -> list[sa.ColumnElement[bool]]:
    f = S.frames
    where = [f.c.run_id == run_id, f.c.frame_no >= 0]
    if after is not None:
        where.append(f.c.frame_no > after)
    if upto is not None:
        where.append(f.c.frame_no <= upto)
    return where


def frame_choices(
    engine: Engine, run_id: str, *, after: int | None = None, upto: int | None = None
) -> FrameChoices:
    """The values the frame table's filters can take, each in the order of its first frame.

    One query groups the frames by (kind, node, purpose) with each group's first frame; a
    value's first frame is that of its first group, so walking the groups in order of first
    frame meets every value first where the history does. Where the database would sort
    every frame to group them, only the frames of the blocks where groups start are grouped
    (:func:`_starting_blocks`, :attr:`Dialect.choice_block`).
    """
    f = S.frames
    visible = _visible(run_id, after, upto)
    first = sa.func.min(f.c.frame_no).label("first")
    stmt = sa.select(f.c.kind, f.c.node_id, f.c.purpose, first)
    block = engine.backend.choice_block
    if block is None:
        stmt = stmt.where(*visible)
    else:
        starts = _starting_blocks(visible, block)
        in_start = sa.and_(
            *visible,
            f.c.frame_no >= starts.c.block * block,
            f.c.frame_no < (starts.c.block + 1) * block,
        )
        stmt = stmt.select_from(starts.join(f, in_start))
    stmt = stmt.group_by(f.c.kind, f.c.node_id, f.c.purpose).order_by(first)
    groups = engine.transaction(lambda conn: conn.execute(stmt).all(), write=False)
    return _choices(groups)


def choices_of_bins(bins: Iterable[FrameBin]) -> FrameChoices:
    """What :func:`frame_choices` answers for the frames that :func:`frame_bins` counted
    (the visible frames up to its ``upto``), from those counts: a value's first frame is
    the first frame of its first group, in whatever bins they were counted. The debugger's
    timeline counts them anyway; the frame table then need not group every frame again."""
    ordered = sorted(bins, key=lambda b: b.first)
    return _choices((b.kind, b.node_id, b.purpose, b.first) for b in ordered)


def _choices(groups: Iterable[Any]) -> FrameChoices:
    """The choices of (kind, node, purpose, first frame) groups in order of first frame."""
    nodes: dict[str, None] = {}
    kinds: dict[str, None] = {}
    purposes: dict[str, None] = {}
    for kind, node_id, purpose, _ in groups:
        kinds.setdefault(kind, None)
        if node_id is not None:
            nodes.setdefault(node_id, None)
        if purpose is not None:
            purposes.setdefault(purpose, None)
    return FrameChoices(tuple(nodes), tuple(kinds), tuple(purposes))


def _starting_blocks(visible: list[sa.ColumnElement[bool]], block: int) -> sa.Subquery:
    """The blocks (frame numbers ``// block``) where some (kind, node, purpose) group has its
    first frame.

    SQLite groups by sorting every row (0.15 s at 100,000 frames), but keeps the distinct
    (block, kind, node, purpose) in a small index as it scans: they are few, and give each
    group's first block. Grouping only the frames of those blocks (most groups start in the
    first) finds every group, each with its first frame: no frame of a group lies in a block
    before its first one.
    """
    f = S.frames
    per_block = (
        sa.select((f.c.frame_no // block).label("block"), f.c.kind, f.c.node_id, f.c.purpose)
        .where(*visible)
        .distinct()
        .subquery("per_block")
    )
    first_block = (
        sa.select(sa.func.min(per_block.c.block).label("block"))
        .group_by(per_block.c.kind, per_block.c.node_id, per_block.c.purpose)
        .subquery("first_block")
    )
    return sa.select(first_block.c.block).distinct().subquery("starts")


def find_frames(
    engine: Engine,
    run_id: str,
    *,
    node: str | None = None,
    kind: str | None = None,
    purpose: str | None = None,
    after: int | None = None,
    upto: int | None = None,
) -> list[int]:
    """The numbers, in order, of the visible frames with every one of the node id, kind and
    purpose given (None: any)."""
    f = S.frames
    where = _visible(run_id, after, upto)
    for column, value in ((f.c.node_id, node), (f.c.kind, kind), (f.c.purpose, purpose)):
        if value is not None:
            where.append(column == value)
    stmt = sa.select(f.c.frame_no).where(*where).order_by(f.c.frame_no)
    return engine.transaction(lambda conn: list(conn.execute(stmt).scalars()), write=False)


def frames_at(engine: Engine, run_id: str, frame_nos: Iterable[int]) -> list[FrameRow]:
    """The frames of a run with these numbers, in order, read in one transaction (numbers
    the run does not have are left out): the rows :func:`frame_rows` reads for them."""
    wanted = sorted(set(frame_nos))
    if not wanted:
        return []
    make = FrameRow._make
    parts = [wanted[i : i + _IN_CHUNK] for i in range(0, len(wanted), _IN_CHUNK)]
    stmts = [select_frames(run_id).where(S.frames.c.frame_no.in_(part)) for part in parts]

    def read(conn: sa.Connection) -> list[FrameRow]:
        return [make(frame_fields(r)) for s in stmts for r in conn.execute(s).fetchall()]

    return engine.transaction(read, write=False)
