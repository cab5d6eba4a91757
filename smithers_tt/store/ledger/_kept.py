"""The live rows a rewind of half a long run takes, kept for its undo (``tt_rewound_nodes``,
``tt_rewound_attempts``, ``tt_rewound_refs``, by ``rewind_id``; since 0021).

Before the rewind deletes or writes over them, :func:`keep_rows` copies the rows it will
change as they are: the nodes and attempts the frames above the cut touch, and every ref
pointing at a frame above the cut (the only refs it deletes: those of the attempts first
seen above the cut point there too). Its undo (:func:`restore_rows`) writes them back as they
were, in a handful of statements whatever the history's length, instead of folding the
frames it shows again and copying each ref from its frame with the frame's content joined.
Nothing between the two can change those rows: a frame written on top of a rewind puts it
out of undo's reach. The kept rows go with their rewind (:func:`drop_kept_rows`, from
``release_rewinds``: undone, collected, or its run deleted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.store.backend import dialect_of
from smithers_tt.store.backend import schema as S

NodeKey = tuple[str, int]
AttemptKey = tuple[str, int, int]


def keep_rows(
    conn: Connection,
    rewind_id: str,
    run_id: str,
    cut: int,
    nodes: Sequence[NodeKey],
    attempts: Sequence[AttemptKey],
) -> None:
    """Copy, under ``rewind_id``, the run's rows of ``nodes`` and ``attempts`` (keys) and its
    refs pointing above ``cut``, as they are now (before the rewind changes them)."""
    r, kr = S.refs, S.rewound_refs
    conn.execute(
        kr.insert().from_select(
            [c.name for c in kr.c],
            sa.select(sa.literal(rewind_id, S.ID), *r.c).where(
                r.c.run_id == run_id, r.c.frame_no > cut
            ),
        )
    )
    dialect = dialect_of(conn)
    for live, kept, names, keys in (
        (S.nodes, S.rewound_nodes, ("node_id", "iteration"), nodes),
        (S.attempts, S.rewound_attempts, ("node_id", "iteration", "attempt"), attempts),
    ):
        dialect.copy_keys(conn, live, kept, rewind_id, run_id, names, keys)


def restore_rows(
    conn: Connection,
    rewind_id: str,
    run_id: str,
    overwrite: Callable[[sa.Table, Sequence[dict[str, Any]]], None],
) -> None:
    """Put back the rows kept under ``rewind_id`` (a rewind of ``run_id``) as they were: the
    nodes it touched replace theirs, the attempts it wrote over are written over again in
    place by ``overwrite`` (a delete would cascade to their refs at or below the cut), those
    it deleted come back, and so do the refs it deleted. Their content is not read: the
    frames above the cut pin it while the rewind is kept (only a hand edit removes it, which
    ``verify`` reports)."""
    n, a, r = S.nodes, S.attempts, S.refs
    kn, ka, kr = S.rewound_nodes, S.rewound_attempts, S.rewound_refs
    touched = sa.select(kn.c.node_id, kn.c.iteration).where(kn.c.rewind_id == rewind_id)
    keys = [tuple(key) for key in conn.execute(touched)]
    dialect_of(conn).delete_keys(conn, n, run_id, ["node_id", "iteration"], keys)
    _put_back(conn, n, kn, rewind_id)
    same = [
        a.c.run_id == ka.c.run_id,
        a.c.node_id == ka.c.node_id,
        a.c.iteration == ka.c.iteration,
        a.c.attempt == ka.c.attempt,
    ]
    split = conn.execute(
        sa.select(*(ka.c[c.name] for c in a.c))
        .join(a, sa.and_(*same))
        .where(ka.c.rewind_id == rewind_id)
    )
    overwrite(a, [dict(row._mapping) for row in split])
    _put_back(conn, a, ka, rewind_id, ~sa.exists().where(*same))
    _put_back(conn, r, kr, rewind_id)


def _put_back(conn: Connection, live: sa.Table, kept: sa.Table, rewind_id: str, *also: Any) -> None:
    """Insert into ``live`` the rows ``kept`` holds under ``rewind_id`` (those ``also``
    holds for), in one ``INSERT ... SELECT``."""
    names = [c.name for c in live.c]
    conn.execute(
        live.insert().from_select(
            names,
            sa.select(*(kept.c[name] for name in names)).where(
                kept.c.rewind_id == rewind_id, *also
            ),
        )
    )


def drop_kept_rows(conn: Connection, rewind_ids: Sequence[str]) -> None:
    """Delete the rows kept under ``rewind_ids`` (their rewinds are released)."""
    for _, kept in S.REWOUND_ROWS:
        conn.execute(kept.delete().where(kept.c.rewind_id.in_(list(rewind_ids))))
