"""When a live checkpoint ref agrees with its frame: the one rule ``verify()`` reports by and
every read that follows a ref refuses by.

A live ref (``tt_checkpoint_refs``) holds its key and the number of its checkpoint frame; the
frame holds the ref's content hash, codec, version, purpose, agent and time. The ref *agrees*
with its frame when the run has that frame, the frame is a ``checkpoint`` frame, and it records
the ref's own node, iteration, attempt and sequence. The store writes both in one transaction,
so only rows changed behind its back disagree; a read that followed such a ref would hand an
agent another node's or an older checkpoint, skip the ref, or start fresh. So the reads select
the ref's own key, its frame number and :func:`agreement` (an outer join on the frame's primary
key: no extra round trip) and build refs with :func:`checked_ref`, which raises
:class:`~smithers_tt.errors.StoreCorrupt` for a ref that disagrees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from smithers_tt.errors import InvalidArgument, StoreCorrupt
from smithers_tt.store._records import VERIFY_HINT, CheckpointRef
from smithers_tt.store.backend import schema as S

__all__ = [
    "AGREEMENT_SQL",
    "LIVE_REF_COLUMNS",
    "LIVE_REF_FROM",
    "agreement",
    "agrees",
    "checked_ref",
    "frame_of",
]


def frame_of(r: Any, f: Any) -> sa.ColumnElement[bool]:
    """``f`` is the frame ref ``r`` names (the join of a ref to its frame)."""
    return sa.and_(f.c.run_id == r.c.run_id, f.c.frame_no == r.c.frame_no)


def agrees(r: Any, f: Any) -> sa.ColumnElement[bool]:
    """Ref ``r`` agrees with frame ``f``: ``f`` is its frame, a checkpoint of its key."""
    return sa.and_(
        frame_of(r, f),
        f.c.kind == "checkpoint",
        f.c.node_id == r.c.node_id,
        f.c.iteration == r.c.iteration,
        f.c.attempt == r.c.attempt,
        f.c.sequence == r.c.sequence,
    )


def agreement(r: Any, f: Any) -> sa.ColumnElement[int]:
    """1 when ref ``r`` agrees with ``f``, else 0 (also when an outer join found no frame)."""
    return sa.case((agrees(r, f), 1), else_=0)


_r, _f = S.refs.alias("r"), S.frames.alias("f")
AGREEMENT_SQL = str(agreement(_r, _f).compile(compile_kwargs={"literal_binds": True}))
""":func:`agreement` as SQL text on a ref ``r`` and its frame ``f``, for statements written as
text (the same on both databases)."""

LIVE_REF_COLUMNS = (
    "r.node_id, r.iteration, r.attempt, r.sequence, f.content_hash, f.codec, f.version, "
    "f.purpose, f.agent_id, {created}, r.frame_no, " + AGREEMENT_SQL
)
"""What a text statement selects of a live ref for :func:`checked_ref` (``{created}``: the
dialect's :attr:`~smithers_tt.store.backend._dialect.Dialect.ref_created`)."""

LIVE_REF_FROM = (
    "FROM tt_checkpoint_refs r LEFT JOIN tt_frames f "
    "ON f.run_id = r.run_id AND f.frame_no = r.frame_no"
)
"""Live refs with their frames, kept when the frame is gone (so that the read refuses)."""


def checked_ref(run_id: str, row: Sequence[Any]) -> CheckpointRef:
    """The ref of ``run_id`` a row of :data:`LIVE_REF_COLUMNS` describes (its ten fields,
    the frame number, the agreement).

    Raises:
        StoreCorrupt: the ref does not agree with its frame.
    """
    if not row[11]:
        node_id, iteration, attempt, sequence = row[:4]
        raise StoreCorrupt(
            f"checkpoint ref {node_id}[{iteration}] attempt {attempt} sequence {sequence} of "
            f"run {run_id!r} names frame {row[10]}, which is missing or not that ref's "
            f"checkpoint frame, so its checkpoint cannot be told; nothing was read from it; "
            f"{VERIFY_HINT}",
            run_id=run_id,
            ref=[node_id, iteration, attempt, sequence],
            frame_no=row[10],
        )
    return CheckpointRef(run_id, *row[:10])


def ref_key(ref: CheckpointRef) -> tuple[str, str, int, int, int]:
    """A ref's key, the primary key of ``tt_checkpoint_refs``."""
    return (ref.run_id, ref.node_id, ref.iteration, ref.attempt, ref.sequence)


def check_purpose(purpose: str) -> str:
    """Validate a ref purpose."""
    if purpose not in S.PURPOSES:
        raise InvalidArgument(f"purpose must be one of {list(S.PURPOSES)}, got {purpose!r}")
    return purpose


def select_refs(purpose: str | None = None) -> Any:
    """Live refs as :func:`ref_from_row` reads them: ``tt_checkpoint_refs`` with the
    checkpoint frames that hold their hash, codec, version, purpose, agent and time, kept when
    the frame is gone, and whether each agrees with its frame (see :mod:`._ref_frame`).

    With ``purpose``, only refs of that purpose, and those that disagree with their frame
    (whose purpose cannot be told: reading them refuses).
    """
    r, f = S.refs, S.frames
    stmt = sa.select(
        r.c.run_id,
        r.c.node_id,
        r.c.iteration,
        r.c.attempt,
        r.c.sequence,
        f.c.content_hash,
        f.c.codec,
        f.c.version,
        f.c.purpose,
        f.c.agent_id,
        f.c.created_at_ms,
        r.c.frame_no,
        agreement(r, f).label("agrees"),
    ).select_from(r.outerjoin(f, frame_of(r, f)))
    if purpose is None:
        return stmt
    return stmt.where(sa.or_(f.c.purpose == check_purpose(purpose), agreement(r, f) == 0))


def ref_from_row(row: Any) -> CheckpointRef:
    """Build a :class:`CheckpointRef` from a row of :func:`select_refs`.

    Raises:
        StoreCorrupt: the ref does not agree with its frame.
    """
    return checked_ref(row[0], row[1:])
