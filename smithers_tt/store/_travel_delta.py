"""The statements of a rewind (or its undo) that changes only what the frames it removes (or
puts back) touched: those frames read by number, the frames before the cut that decide the
state of the touched rows found by a backward search, and the touched rows of ``tt_nodes``,
``tt_attempts`` and ``tt_checkpoint_refs`` written by key.

What is touched and what the rows become is decided in :mod:`smithers_tt.timetravel._delta`;
rows come down as dicts of column values and keys as tuples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.errors import StoreCorrupt
from smithers_tt.store import _schema as S
from smithers_tt.store._frames import Frame, frame_from_row, select_frames
from smithers_tt.store._records import stored_json
from smithers_tt.store._travel_bulk import corrupt_frame
from smithers_tt.store._travel_write import chunks, insert_rows

NodeKey = tuple[str, int]
AttemptKey = tuple[str, int, int]
RefKey = tuple[str, int, int, int]

_KEYS_PER_STATEMENT = 200
"""Keys matched by one ``OR`` of equalities (``_keys``)."""


def _frames(conn: Connection, run_id: str, stmt: sa.Select) -> list[Frame]:
    frames = []
    for row in conn.execute(stmt):
        try:
            frames.append(frame_from_row(row))
        except StoreCorrupt as error:  # data_json that is not JSON at all
            raise corrupt_frame(run_id, row.frame_no, row.kind, error.__cause__) from error
    return frames


def _keys(columns: Sequence[sa.Column], keys: Sequence[tuple[Any, ...]]) -> Any:
    """``columns`` equal one of ``keys``: an ``OR`` of equalities, which both databases
    evaluate row by row cheaply and match against a primary key (a row-value ``IN`` makes
    SQLite scan)."""
    return sa.or_(*(sa.and_(*(c == v for c, v in zip(columns, key, strict=True))) for key in keys))


class DeltaStatements:
    """Reads and writes by key of one time-travel transaction (mixed into
    :class:`~._travel.Travel`)."""

    _conn: Connection

    def first_frame_no(self, run_id: str) -> int | None:
        """The lowest frame number of the run (below 0 for a fork), one index seek."""
        f = S.frames
        return self._conn.execute(
            sa.select(sa.func.min(f.c.frame_no)).where(f.c.run_id == run_id)
        ).scalar_one_or_none()

    def frames_after(self, run_id: str, after: int) -> list[Frame]:
        """The run's frames above ``after``, in order (read by number: O(frames read)).

        Raises:
            SnapshotInvalid: a frame's data is not JSON at all.
        """
        return _frames(self._conn, run_id, select_frames(run_id, after=after))

    def node_history(self, run_id: str, upto: int, pairs: Sequence[NodeKey]) -> list[Frame]:
        """Every frame at or below ``upto`` that changed a node or an attempt of the
        ``(node_id, iteration)`` pairs, and every ``reset`` at or below ``upto``, in frame
        order: what those nodes and attempts were at ``upto`` folds from them alone.

        Reads the partial indexes ``tt_frames_node_level`` (one range per pair: a few frames
        per attempt) and ``tt_frames_run_level`` (resets are rare), never the checkpoints.

        Raises:
            SnapshotInvalid: a frame's data is not JSON at all.
        """
        f = S.frames
        found = _frames(
            self._conn,
            run_id,
            select_frames(run_id, upto=upto).where(S.RUN_LEVEL_WHERE, f.c.kind == "reset"),
        )
        for node_id, iteration in sorted(set(pairs)):
            found += _frames(
                self._conn,
                run_id,
                select_frames(run_id, upto=upto).where(
                    S.NODE_LEVEL_WHERE, f.c.node_id == node_id, f.c.iteration == iteration
                ),
            )
        found.sort(key=lambda frame: frame.frame_no)
        return found

    def live_by_key(
        self, run_id: str, nodes: Sequence[NodeKey], attempts: Sequence[AttemptKey]
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The run's live rows of these keys, by primary key: nodes as ``(node_id,
        iteration, state, last_attempt, output)`` (the output parsed), attempts as
        ``(node_id, iteration, attempt, state, resumed_from, error, error_code,
        discard_resume, started_at_ms, finished_at_ms)`` (``resumed_from`` a 5-tuple or
        ``None``): the fields of the fold's node and attempt views.

        Raises:
            StoreCorrupt: a stored output is not JSON.
        """
        n, a = S.nodes, S.attempts
        found_nodes: list[tuple[Any, ...]] = []
        found_attempts: list[tuple[Any, ...]] = []
        for part in chunks(nodes, 2, _KEYS_PER_STATEMENT):
            found_nodes += self.live_rows(run_id, _keys([n.c.node_id, n.c.iteration], part))[0]
        for part in chunks(attempts, 3, _KEYS_PER_STATEMENT):
            where = _keys([a.c.node_id, a.c.iteration, a.c.attempt], part)
            found_attempts += self.live_rows(run_id, None, where)[1]
        return found_nodes, found_attempts

    def live_rows(
        self, run_id: str, nodes: Any = None, attempts: Any = None
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The run's live node rows where ``nodes`` holds and attempt rows where ``attempts``
        holds (conditions on ``tt_nodes`` and ``tt_attempts``; None reads none), as
        :meth:`live_by_key` gives them.

        Raises:
            StoreCorrupt: a stored output is not JSON.
        """
        conn = self._conn
        n, a = S.nodes, S.attempts
        found_nodes: list[tuple[Any, ...]] = []
        found_attempts: list[tuple[Any, ...]] = []
        if nodes is not None:
            for row in conn.execute(
                sa.select(
                    n.c.node_id, n.c.iteration, n.c.state, n.c.last_attempt, n.c.output_json
                ).where(n.c.run_id == run_id, nodes)
            ):
                where = f"tt_nodes.output_json of {row[0]!r} in run {run_id!r}"
                found_nodes.append((*row[:4], stored_json(row[4], where)))
        resumed = [a.c.resumed_run_id, a.c.resumed_node_id, a.c.resumed_iteration,
                   a.c.resumed_attempt, a.c.resumed_sequence]  # fmt: skip
        if attempts is not None:
            for row in conn.execute(
                sa.select(
                    a.c.node_id, a.c.iteration, a.c.attempt, a.c.state, *resumed, a.c.error,
                    a.c.error_code, a.c.discard_resume, a.c.started_at_ms, a.c.finished_at_ms,
                ).where(a.c.run_id == run_id, attempts)
            ):  # fmt: skip
                src = None if row[4] is None else tuple(row[4:9])
                found_attempts.append((*row[:4], src, row[9], row[10], bool(row[11]), *row[12:]))
        return found_nodes, found_attempts

    def write_delta(
        self,
        run_id: str,
        *,
        nodes: Sequence[NodeKey],
        node_rows: Sequence[dict[str, Any]],
        attempts_gone: Sequence[AttemptKey],
        attempt_rows: Sequence[dict[str, Any]],
        refs_gone: Sequence[RefKey],
        refs_above: int | None,
        ref_rows: Sequence[tuple[Any, ...]],
    ) -> None:
        """Change the live rows of ``run_id`` by key, nothing else:

        * ``nodes`` (keys) lose their rows and get ``node_rows`` (rows of ``tt_nodes``);
        * ``attempts_gone`` lose their rows (and, cascading, their refs); ``attempt_rows``
          (rows of ``tt_attempts``) are written over the rows of the same keys, or inserted;
        * ``refs_gone`` lose their ref, only if it points at a frame above ``refs_above``
          (any frame when ``None``); ``ref_rows`` (``(node_id, iteration, attempt, sequence,
          frame_no)``) are inserted, replacing a ref of the same key;
        * the ``next_sequence`` of each attempt of ``attempt_rows`` becomes one more than its
          highest live ref's sequence (0 without refs), as a full replace computes it.
        """
        conn = self._conn
        n, a, r = S.nodes, S.attempts, S.refs
        self._delete(n, run_id, [n.c.node_id, n.c.iteration], nodes)
        insert_rows(conn, n, node_rows)
        self._delete(a, run_id, [a.c.node_id, a.c.iteration, a.c.attempt], attempts_gone)
        rkey = [r.c.node_id, r.c.iteration, r.c.attempt, r.c.sequence]
        above = None if refs_above is None else r.c.frame_no > refs_above
        self._delete(r, run_id, rkey, refs_gone, above)
        self._delete(r, run_id, rkey, [row[:4] for row in ref_rows])
        self._put_attempts(run_id, attempt_rows)
        names = ("node_id", "iteration", "attempt", "sequence", "frame_no")
        insert_rows(
            conn, r, [{"run_id": run_id, **dict(zip(names, row, strict=True))} for row in ref_rows]
        )
        self._renumber(run_id, [(x["node_id"], x["iteration"], x["attempt"]) for x in attempt_rows])

    def _delete(
        self,
        table: sa.Table,
        run_id: str,
        columns: Sequence[sa.Column],
        keys: Sequence[tuple[Any, ...]],
        also: Any = None,
    ) -> None:
        """Delete the run's rows of ``table`` whose ``columns`` are one of ``keys`` (and that
        ``also`` holds for), by primary key."""
        if not keys:
            return
        stmt = table.delete().where(
            table.c.run_id == run_id,
            *(c == sa.bindparam(f"k_{c.name}") for c in columns),
        )
        if also is not None:
            stmt = stmt.where(also)
        names = [f"k_{c.name}" for c in columns]
        self._conn.execute(stmt, [dict(zip(names, key, strict=True)) for key in keys])

    def _put_attempts(self, run_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Write ``rows`` over the attempts of the same keys (kept rows keep their refs: a
        delete would cascade to them), inserting those that are not there."""
        if not rows:
            return
        conn = self._conn
        a = S.attempts
        keys = [(row["node_id"], row["iteration"], row["attempt"]) for row in rows]
        present: set[tuple[Any, ...]] = set()
        for part in chunks(keys, 3, _KEYS_PER_STATEMENT):
            present.update(
                tuple(k)
                for k in conn.execute(
                    sa.select(a.c.node_id, a.c.iteration, a.c.attempt).where(
                        a.c.run_id == run_id,
                        _keys([a.c.node_id, a.c.iteration, a.c.attempt], part),
                    )
                )
            )
        fresh = [row for row, key in zip(rows, keys, strict=True) if key not in present]
        kept = [row for row, key in zip(rows, keys, strict=True) if key in present]
        insert_rows(conn, a, fresh)
        self._overwrite(a, kept)

    def _overwrite(self, table: sa.Table, rows: Sequence[dict[str, Any]]) -> None:
        """Write ``rows`` (rows of ``table``, all with the same keys) over the rows of the
        same primary key, in place (a delete would cascade to rows that refer to them)."""
        if not rows:
            return
        key = [c.name for c in table.primary_key.columns]
        names = [name for name in rows[0] if name not in key]
        stmt = (
            table.update()
            .where(*(table.c[name] == sa.bindparam(f"k_{name}") for name in key))
            .values({name: sa.bindparam(name) for name in names})
        )
        self._conn.execute(
            stmt,
            [
                {**{f"k_{name}": row[name] for name in key}, **{n: row[n] for n in names}}
                for row in rows
            ],
        )

    def _renumber(self, run_id: str, keys: Sequence[AttemptKey]) -> None:
        """Set each attempt's ``next_sequence`` past its highest live ref."""
        if not keys:
            return
        a, r = S.attempts, S.refs
        top = (
            sa.select(sa.func.coalesce(sa.func.max(r.c.sequence) + 1, 0))
            .where(
                r.c.run_id == a.c.run_id,
                r.c.node_id == a.c.node_id,
                r.c.iteration == a.c.iteration,
                r.c.attempt == a.c.attempt,
            )
            .scalar_subquery()
        )
        self._conn.execute(
            a.update()
            .where(
                a.c.run_id == run_id,
                a.c.node_id == sa.bindparam("k_node"),
                a.c.iteration == sa.bindparam("k_iteration"),
                a.c.attempt == sa.bindparam("k_attempt"),
            )
            .values(next_sequence=top),
            [{"k_node": k[0], "k_iteration": k[1], "k_attempt": k[2]} for k in keys],
        )
