"""A run's newest state read a page at a time from its live tables, for the debugger to open
on a long run without reading its history.

The live tables (``tt_nodes``, ``tt_attempts``, ``tt_checkpoint_refs``) are the projection of
a run's history at its clock: for a run that reads nothing from a parent (not a fork by
reference), they hold exactly what the fold of every frame makes visible at the newest frame.
A person looking at that frame sees one page of checkpoint refs and of nodes, so these reads
return a page (keys in the order Python sorts them: text in code-point order on both
databases), a count, or one ref; a ref's fields are read from its checkpoint frame as the fold
takes them (:attr:`Dialect.ref_created`), and a ref that disagrees with its frame is refused
(:mod:`._ref_frame`).

:func:`node_frame_rows` reads the frames that decide what some nodes are at a frame (theirs,
and those of the run as a whole), so that a diff of two nearby frames folds a few nodes, not
the whole history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from smithers_tt.store._frames import frame_fields, select_frames
from smithers_tt.store._records import CheckpointRef
from smithers_tt.store._ref_frame import LIVE_REF_COLUMNS, LIVE_REF_FROM, checked_ref
from smithers_tt.store.backend import Engine, dialect_of
from smithers_tt.store.backend import schema as S
from smithers_tt.store.reads._frame_rows import FrameRow
from smithers_tt.store.reads._travel import TravelReads, run_sql

__all__ = [
    "frame_span",
    "live_checkpointed_nodes",
    "live_node_keys",
    "live_node_rows",
    "live_node_states",
    "live_ref",
    "live_ref_count",
    "live_ref_page",
    "live_ref_rank",
    "live_top_iteration",
    "newest_live_ref",
    "node_frame_rows",
    "seen_node_ids",
]

RefKey = tuple[str, int, int, int]
NodeKey = tuple[str, int]


def _columns(conn: Any) -> str:
    """What the reads select of a live ref, for :func:`checked_ref`."""
    return LIVE_REF_COLUMNS.format(created=dialect_of(conn).ref_created)


def _refs_sql(conn: Any, where: str = "", tail: str = "") -> str:
    """Live refs of ``:run_id`` as :func:`checked_ref` reads them."""
    return f"SELECT {_columns(conn)} {LIVE_REF_FROM} WHERE r.run_id = :run_id{where} {tail}"


def _read(engine: Engine, work: Any) -> Any:
    return engine.transaction(work, write=False)


def frame_span(engine: Engine, run_id: str, upto: int) -> tuple[int, int | None]:
    """How many frames the run has at or below ``upto``, and the lowest frame number."""
    result: tuple[int, int | None] = _read(
        engine, lambda conn: TravelReads(conn).frame_span(run_id, upto)
    )
    return result


def live_ref_count(engine: Engine, run_id: str) -> int:
    """How many refs the run has at its newest frame."""
    return int(
        _read(
            engine,
            lambda conn: run_sql(
                conn,
                "SELECT count(*) FROM tt_checkpoint_refs WHERE run_id = :run_id",
                {"run_id": run_id},
            ).scalar_one(),
        )
    )


def live_ref_page(engine: Engine, run_id: str, offset: int, limit: int) -> list[CheckpointRef]:
    """Refs ``offset`` to ``offset + limit`` (exclusive) of the run's newest state, in key
    order (the keys are paged first, then only the page's frames are read).

    The node ids (a few) are counted and put in code-point order here; each node's refs are
    then read in the order of the primary key, which within one node is key order on both
    databases. Sorting every ref in code-point order instead, as PostgreSQL must (no index
    has that order), costs 0.15 s at 64,000 refs."""

    def read(conn: Any) -> list[CheckpointRef]:
        counts = run_sql(
            conn,
            "SELECT node_id, count(*) FROM tt_checkpoint_refs WHERE run_id = :run_id "
            "GROUP BY node_id",
            {"run_id": run_id},
        ).fetchall()
        sql = (
            f"SELECT {_columns(conn)} FROM (SELECT * FROM "  # noqa: S608 (constants)
            "tt_checkpoint_refs r WHERE r.run_id = :run_id AND r.node_id = :node_id "
            f"{_IN_NODE} LIMIT :limit OFFSET :offset) r LEFT JOIN tt_frames f ON "
            f"f.run_id = r.run_id AND f.frame_no = r.frame_no {_IN_NODE}"
        )
        out: list[CheckpointRef] = []
        skip = offset
        for node_id, count in sorted(counts):
            if len(out) >= limit:
                break
            if skip >= count:
                skip -= count
                continue
            params = {"run_id": run_id, "node_id": node_id, "limit": limit - len(out)}
            rows = run_sql(conn, sql, {**params, "offset": skip}).fetchall()
            out.extend(checked_ref(run_id, row) for row in rows)
            skip = 0
        return out

    return list(_read(engine, read))


_IN_NODE = "ORDER BY r.iteration, r.attempt, r.sequence"
"""Key order within one node."""


def live_ref_rank(engine: Engine, run_id: str, key: RefKey) -> int | None:
    """How many refs come before ``key`` in key order, or None when the run has no such
    ref."""

    def read(conn: Any) -> int | None:
        params = {"run_id": run_id, "n": key[0], "i": key[1], "a": key[2], "s": key[3]}
        found = run_sql(
            conn,
            "SELECT 1 FROM tt_checkpoint_refs WHERE run_id = :run_id AND node_id = :n "
            "AND iteration = :i AND attempt = :a AND sequence = :s",
            params,
        ).first()
        if found is None:
            return None
        c = dialect_of(conn).code_point_order
        return int(
            run_sql(
                conn,
                "SELECT count(*) FROM tt_checkpoint_refs r WHERE r.run_id = :run_id AND "  # noqa: S608 (a collation)
                f"(r.node_id{c} < :n{c} OR (r.node_id = :n AND (r.iteration < :i OR "
                "(r.iteration = :i AND (r.attempt < :a OR (r.attempt = :a AND "
                "r.sequence < :s))))))",
                params,
            ).scalar_one()
        )

    result: int | None = _read(engine, read)
    return result


def live_ref(engine: Engine, run_id: str, key: RefKey) -> CheckpointRef | None:
    """The ref of ``key`` at the run's newest frame, or None."""
    where = " AND r.node_id = :n AND r.iteration = :i AND r.attempt = :a AND r.sequence = :s"
    params = {"run_id": run_id, "n": key[0], "i": key[1], "a": key[2], "s": key[3]}

    def read(conn: Any) -> CheckpointRef | None:
        row = run_sql(conn, _refs_sql(conn, where), params).first()
        return None if row is None else checked_ref(run_id, row)

    result: CheckpointRef | None = _read(engine, read)
    return result


def newest_live_ref(
    engine: Engine, run_id: str, node: NodeKey | None = None
) -> CheckpointRef | None:
    """The run's newest ref: of ``node`` (node id, iteration) the highest attempt and
    sequence; of the whole run, the latest ``created_at_ms`` (the later published of two in
    the same millisecond)."""

    def read(conn: Any) -> CheckpointRef | None:
        if node is None:
            return _newest_of_run(conn, run_id)
        else:
            sql = _refs_sql(
                conn,
                " AND r.node_id = :n AND r.iteration = :i",
                "ORDER BY r.attempt DESC, r.sequence DESC LIMIT 1",
            )
            params = {"run_id": run_id, "n": node[0], "i": node[1]}
        row = run_sql(conn, sql, params).first()
        return None if row is None else checked_ref(run_id, row)

    result: CheckpointRef | None = _read(engine, read)
    return result


_CANDIDATES = 16
"""Checkpoint frames tried, newest first, before the newest ref is looked for among all."""


def _newest_of_run(conn: Any, run_id: str) -> CheckpointRef | None:
    """The live ref of the latest ``created_at_ms`` (then frame): among the newest checkpoint
    frames first, found without a join (a reset may have taken their refs away); among every
    live ref when none of those is live."""
    created = dialect_of(conn).ref_created
    params: dict[str, Any] = {"run_id": run_id, "limit": _CANDIDATES}
    newest = [
        row[0]
        for row in run_sql(
            conn,
            "SELECT f.frame_no FROM tt_frames f WHERE f.run_id = :run_id AND "  # noqa: S608 (constants)
            f"f.kind = 'checkpoint' ORDER BY {created} DESC, f.frame_no DESC LIMIT :limit",
            params,
        ).fetchall()
    ]
    if newest:
        numbers = {f"f{i}": n for i, n in enumerate(newest)}
        listed = ", ".join(f":{name}" for name in numbers)
        live = {
            row[10]: row
            for row in run_sql(
                conn, _refs_sql(conn, f" AND r.frame_no IN ({listed})"), {**params, **numbers}
            ).fetchall()
        }
        for frame_no in newest:
            if frame_no in live:
                return checked_ref(run_id, live[frame_no])
    sql = _refs_sql(conn, tail=f"ORDER BY {created} DESC, r.frame_no DESC LIMIT 1")
    row = run_sql(conn, sql, params).first()
    return None if row is None else checked_ref(run_id, row)


def _distinct(conn: Any, column: Any, *where: Any, least: Any = None) -> list[Any]:
    """The distinct values of a text column where ``where`` holds, in the column's order:
    a loose scan, one index seek per value (a run has a few node ids against thousands of
    rows naming them), all in one recursive statement (one round trip, not one per value).
    With ``least``, (value, lowest ``least`` among its rows) pairs instead."""
    text = sa.Text()  # both terms of the recursion alike (PostgreSQL: varchar(n) is not text)
    found = (
        sa.select(sa.cast(sa.func.min(column), text).label("v"))
        .where(*where)
        .cte("found", recursive=True)
    )
    following = sa.select(sa.cast(sa.func.min(column), text)).where(*where, column > found.c.v)
    found = found.union_all(sa.select(following.scalar_subquery()).where(found.c.v.is_not(None)))
    columns = [found.c.v]
    if least is not None:
        lowest = sa.select(sa.func.min(least)).where(*where, column == found.c.v)
        columns.append(lowest.scalar_subquery())
    rows = conn.execute(sa.select(*columns).where(found.c.v.is_not(None))).all()
    return [r[0] for r in rows] if least is None else [(r[0], r[1]) for r in rows]


def live_checkpointed_nodes(engine: Engine, run_id: str) -> list[str]:
    """The node ids with a ref at the newest frame, sorted."""
    r = S.refs
    return sorted(_read(engine, lambda conn: _distinct(conn, r.c.node_id, r.c.run_id == run_id)))


def live_top_iteration(engine: Engine, run_id: str, node_id: str) -> int | None:
    """The highest iteration of ``node_id`` with a ref at the newest frame, or None."""
    r = S.refs
    stmt = sa.select(sa.func.max(r.c.iteration)).where(r.c.run_id == run_id, r.c.node_id == node_id)
    found: int | None = _read(engine, lambda conn: conn.execute(stmt).scalar())
    return found


def live_node_states(engine: Engine, run_id: str) -> dict[str, str]:
    """Each node's state at the newest frame: that of its node row of the highest iteration
    (one row per node id, however many iterations a loop ran)."""
    stmt = (
        "SELECT n.node_id, n.state FROM tt_nodes n JOIN (SELECT node_id, max(iteration) AS top "
        "FROM tt_nodes WHERE run_id = :run_id GROUP BY node_id) m "
        "ON n.node_id = m.node_id AND n.iteration = m.top WHERE n.run_id = :run_id"
    )
    found: dict[str, str] = _read(
        engine, lambda conn: dict(run_sql(conn, stmt, {"run_id": run_id}).fetchall())
    )
    return found


def live_node_keys(engine: Engine, run_id: str, limit: int) -> tuple[list[NodeKey], int]:
    """The (node id, iteration) pairs with a node row or an attempt at the newest frame that
    the nodes table shows, in order, and how many there are: all of them when at most
    ``limit``, else each node's newest iterations, a turn at a time (every node's newest,
    then every node's one before, ...; the last turn that does not fit whole by node id)."""

    def read(conn: Any) -> tuple[list[NodeKey], int]:
        union = (
            "SELECT node_id, iteration FROM tt_nodes WHERE run_id = :run_id UNION "
            "SELECT node_id, iteration FROM tt_attempts WHERE run_id = :run_id"
        )
        params = {"run_id": run_id, "limit": limit}
        c = dialect_of(conn).code_point_order
        # the union made once: its size rides on every row of the first ones
        turns = (
            "SELECT node_id, iteration, count(*) OVER () AS total, row_number() OVER "  # noqa: S608 (constants)
            f"(PARTITION BY node_id ORDER BY iteration DESC) AS turn FROM ({union}) k"
        )
        first = (
            f"SELECT node_id, iteration, total FROM ({turns}) t "  # noqa: S608 (constants)
            f"ORDER BY turn, node_id{c} LIMIT :limit"
        )
        rows = run_sql(conn, first, params).fetchall()
        if not rows:  # none at all, or none asked for
            total = run_sql(conn, f"SELECT count(*) FROM ({union}) k", params).scalar_one()  # noqa: S608 (constants)
            return [], int(total)
        return sorted((r[0], r[1]) for r in rows), int(rows[0][2])

    result: tuple[list[NodeKey], int] = _read(engine, read)
    return result


def live_node_rows(
    engine: Engine, run_id: str, keys: Sequence[NodeKey]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The node rows and every attempt of the (node id, iteration) ``keys`` at the newest
    frame, as the fold's node and attempt views hold them (see
    :meth:`TravelReads.live_by_key`), in no particular order.

    Raises:
        StoreCorrupt: a stored output is not JSON.
    """
    wanted = set(keys)
    spans: dict[str, tuple[int, int]] = {}
    for node_id, iteration in wanted:
        low, high = spans.get(node_id, (iteration, iteration))
        spans[node_id] = (min(low, iteration), max(high, iteration))
    n, a = S.nodes, S.attempts

    def read(conn: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        nodes: list[tuple[Any, ...]] = []
        attempts: list[tuple[Any, ...]] = []
        travel = TravelReads(conn)
        for node_id, (low, high) in sorted(spans.items()):
            found = travel.live_rows(
                run_id,
                sa.and_(n.c.node_id == node_id, n.c.iteration.between(low, high)),
                sa.and_(a.c.node_id == node_id, a.c.iteration.between(low, high)),
            )
            nodes += [row for row in found[0] if (row[0], row[1]) in wanted]
            attempts += [row for row in found[1] if (row[0], row[1]) in wanted]
        return nodes, attempts

    result: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] = _read(engine, read)
    return result


def node_frame_rows(
    engine: Engine, run_id: str, node_ids: Sequence[str], upto: int
) -> list[FrameRow]:
    """In order, the frames ``0 <= frame_no <= upto`` of a run-level kind (what the run's
    status, input, output and error are; resets) or naming one of ``node_ids``: what the
    fold of those nodes and of the run's own state reads. The first are listed by a partial
    index however long the history.

    Raises:
        StoreCorrupt: a frame's data is not JSON.
    """
    f = S.frames
    statements = [select_frames(run_id, -1, upto).where(S.RUN_LEVEL_WHERE)]
    if node_ids:
        statements.append(
            select_frames(run_id, -1, upto).where(
                f.c.node_id.in_(list(dict.fromkeys(node_ids))), f.c.kind.not_in(S.RUN_LEVEL_KINDS)
            )
        )

    def read(conn: Any) -> list[FrameRow]:
        rows = [r for stmt in statements for r in conn.execute(stmt).fetchall()]
        rows.sort(key=lambda r: r[1])
        return [FrameRow._make(frame_fields(tuple(r))) for r in rows]

    return list(_read(engine, read))


def seen_node_ids(engine: Engine, run_id: str) -> list[str]:
    """The node ids the run's frames name, in the order of their first frame (every node's
    first frame is of a node-level or a run-level kind: a checkpoint comes after its
    attempt started), read through the two partial indexes that list those frames.

    They are read from the table the indexes are on, hidden frames too, and a node whose
    first frame lies above the run's clock (a rewind hid every frame of it) is left out: a
    bound on ``frame_no`` in the seeks (the view's) makes SQLite range over the primary key
    instead, 1.4 against 40 ms on a 155,000-frame run."""
    f = S.frame_rows
    clock = sa.select(S.runs.c.clock).where(S.runs.c.run_id == run_id)

    def read(conn: Any) -> list[str]:
        first: dict[str, int] = {}
        shown = conn.execute(clock).scalar()
        if shown is None:  # no such run
            return []
        for kinds in (S.NODE_LEVEL_WHERE, S.RUN_LEVEL_WHERE):
            where = (f.c.run_id == run_id, kinds, f.c.node_id.is_not(None))
            for node_id, frame_no in _distinct(conn, f.c.node_id, *where, least=f.c.frame_no):
                if frame_no <= shown:
                    first[node_id] = min(frame_no, first.get(node_id, frame_no))
        return sorted(first, key=first.__getitem__)

    result: list[str] = _read(engine, read)
    return result
