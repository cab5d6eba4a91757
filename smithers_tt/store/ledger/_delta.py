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

from smithers_tt.store.backend import dialect_of
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger._kept import keep_rows, restore_rows
from smithers_tt.store.ledger._live import chunks, insert_rows
from smithers_tt.store.reads import KEYS_PER_STATEMENT, keys_match

NodeKey = tuple[str, int]
AttemptKey = tuple[str, int, int]
RefKey = tuple[str, int, int, int]


class DeltaWrites:
    """The writes by key of one time-travel transaction: a rewind (or its undo) that changes
    only the live rows the frames it removes touched (part of :class:`~..._travel.Travel`;
    the reads by key are :class:`~...reads._travel.TravelReads`')."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

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

    def write_wide(
        self,
        run_id: str,
        cut: int,
        *,
        nodes_gone: Sequence[NodeKey],
        node_rows: Sequence[dict[str, Any]],
        attempts_gone: Sequence[AttemptKey],
        kept_attempts: Sequence[dict[str, Any]],
        kept_as: str,
    ) -> None:
        """Change the live rows of ``run_id`` for a rewind to ``cut``, with a statement per
        thousand rows or fewer, nothing read into Python:

        * the rows it deletes or writes over are kept first, as they are, under ``kept_as``
          (the rewind's id) for :meth:`restore_kept`;
        * every ref pointing at a frame above ``cut`` is deleted;
        * ``attempts_gone`` and ``nodes_gone`` (keys) lose their rows;
        * ``node_rows`` are inserted, ``kept_attempts`` written over the rows of the same
          keys (in place: their refs stay), each ``next_sequence`` one more than its highest
          live ref's sequence.
        """
        conn = self._conn
        n, a, r = S.nodes, S.attempts, S.refs
        dialect = dialect_of(conn)
        keys = [(x["node_id"], x["iteration"], x["attempt"]) for x in kept_attempts]
        keep_rows(conn, kept_as, run_id, cut, nodes_gone, [*attempts_gone, *keys])
        conn.execute(r.delete().where(r.c.run_id == run_id, r.c.frame_no > cut))
        dialect.delete_keys(conn, a, run_id, ["node_id", "iteration", "attempt"], attempts_gone)
        dialect.delete_keys(conn, n, run_id, ["node_id", "iteration"], nodes_gone)
        insert_rows(conn, n, node_rows)
        self._overwrite(a, kept_attempts)
        self._renumber(run_id, keys)

    def restore_kept(self, run_id: str, rewind_id: str) -> None:
        """Put back the live rows of ``run_id`` its rewind ``rewind_id`` kept (see
        :mod:`._kept`), as they were before it."""
        restore_rows(self._conn, rewind_id, run_id, self._overwrite)

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
        for part in chunks(keys, 3, KEYS_PER_STATEMENT):
            present.update(
                tuple(k)
                for k in conn.execute(
                    sa.select(a.c.node_id, a.c.iteration, a.c.attempt).where(
                        a.c.run_id == run_id,
                        keys_match([a.c.node_id, a.c.iteration, a.c.attempt], part),
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
