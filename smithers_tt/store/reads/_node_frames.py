"""Where one node's frames are, found through the partial indexes, not by reading a history.

A click on a task in the debugger's graph selects that task's newest frame at or before the
selected one; opening a failure from the triage view shows the frame where the failed attempt
ended. Walking every frame of the run in Python answered both (the whole history read for one
click); here each is a few index probes. The frames that start, end or change a node
(``attempt_started``, ``attempt_finished``, ``node_state``, ``cache_hit``) are listed by node
in the partial index ``tt_frames_node_level``, and those of the run that name a node (a
``reset``) in ``tt_frames_run_level``. Checkpoint frames, one a publish, are in neither; but a
checkpoint is published only while an attempt is in progress, after the node's newest
``attempt_started``, so only the frames after that one are scanned, and only when that
attempt had not finished by the frame asked about.

Only visible frames count: 0 and later (a fork's base frames restate its parent).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from smithers_tt.store.backend import Engine
from smithers_tt.store.backend import schema as S

__all__ = ["attempt_span", "node_frame_near"]


def _max(conn: Any, *where: Any) -> int | None:
    found = conn.execute(sa.select(sa.func.max(S.frames.c.frame_no)).where(*where)).scalar()
    return None if found is None else int(found)


def _min(conn: Any, *where: Any) -> int | None:
    found = conn.execute(sa.select(sa.func.min(S.frames.c.frame_no)).where(*where)).scalar()
    return None if found is None else int(found)


def node_frame_near(
    engine: Engine, run_id: str, node_id: str, frame_no: int, *, upto: int | None = None
) -> int | None:
    """The newest visible frame at or before ``frame_no`` that names ``node_id`` (its
    attempts, checkpoints, states, resets); when it has none there, its first frame after
    (at most ``upto``, when given); None when it has neither."""
    f = S.frames
    node_level, run_level = S.NODE_LEVEL_WHERE, S.RUN_LEVEL_WHERE
    node = (f.c.run_id == run_id, f.c.node_id == node_id)
    iterations = sa.select(f.c.iteration).where(*node, node_level).distinct()

    def read(conn: Any) -> int | None:
        # naming the node's iterations lets SQLite seek its partial index by frame number;
        # with the node only, it would rather scan the run's frames by the primary key
        its = (f.c.iteration.in_(list(conn.execute(iterations).scalars())), node_level)
        before = (*node, f.c.frame_no >= 0, f.c.frame_no <= frame_no)
        found = [_max(conn, *before, *its), _max(conn, *before, run_level)]
        started = _max(conn, *before, *its, f.c.kind == "attempt_started")
        finished = _max(conn, *before, *its, f.c.kind == "attempt_finished")
        if started is not None and (finished is None or finished < started):
            published = (
                sa.select(f.c.frame_no)
                .where(*before, f.c.frame_no > started, f.c.kind == "checkpoint")
                .order_by(f.c.frame_no.desc())
                .limit(1)
            )
            found.append(conn.execute(published).scalar())
        newest = max((n for n in found if n is not None), default=None)
        if newest is not None:
            return int(newest)
        after = [*node, f.c.frame_no > max(frame_no, -1)]
        if upto is not None:
            after.append(f.c.frame_no <= upto)
        first = [_min(conn, *after, *its), _min(conn, *after, run_level)]
        return min((n for n in first if n is not None), default=None)

    result: int | None = engine.transaction(read, write=False)
    return result


def attempt_span(
    engine: Engine, run_id: str, node_id: str, iteration: int, attempt: int
) -> tuple[int | None, int | None]:
    """The visible frames where an attempt started and where it finished (None for one it
    does not have: an attempt still in progress, or one from before a fork's frame 0)."""
    f = S.frames
    where = (
        f.c.run_id == run_id,
        f.c.node_id == node_id,
        f.c.iteration == iteration,
        f.c.frame_no >= 0,
        S.NODE_LEVEL_WHERE,
        f.c.attempt == attempt,
    )

    def read(conn: Any) -> tuple[int | None, int | None]:
        return (
            _min(conn, *where, f.c.kind == "attempt_started"),
            _max(conn, *where, f.c.kind == "attempt_finished"),
        )

    result: tuple[int | None, int | None] = engine.transaction(read, write=False)
    return result
