"""The statements of a rewind that keeps what stays: the live rows at or below the cut are
left where they are, only what the frames above it added goes.

A rewind to the middle of a long run used to delete every live ref and attempt and copy the
refs visible at the cut back from their frames (100,000 deleted, 50,000 copied for a
100,000-ref run). Without a ``reset`` above the cut, the live refs that point at a frame at
or below the cut *are* the refs visible there (refs are immutable and only a reset removes
them), so here the refs above the cut are deleted and the refs left are checked against
the history instead of rewritten: one aggregate join says whether they are exactly the
visible ones, each with stored content within the ceiling (what the copy's join checked).
If not, :class:`Refold`: the caller redoes the rewind with the full fold and full replace.
The attempts and nodes first seen above the cut are deleted by key, and of the others only
those the cut splits (whose rows differ from the fold's) are written.

What the rows become is decided in :mod:`smithers_tt.timetravel` (the fold); rows come down
as dicts of column values.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import sqlalchemy as sa

from smithers_tt.checkpoint import MAX_CHECKPOINT_BYTES
from smithers_tt.store.backend import dialect_of
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger._delta import DeltaWrites
from smithers_tt.store.ledger._live import Refold, insert_rows
from smithers_tt.store.reads import StoredRefs, plain_rows, run_sql

_UNCOMPARED = {
    "tt_attempts": frozenset({"run_id", "owner_epoch"}),
    "tt_nodes": frozenset({"run_id", "updated_at_ms"}),
}
"""Columns a kept row is not rewritten for: the run (the same), the epoch an attempt was
written under (a full replace writes 0; every owner is fenced by the run's new epoch) and
the time a node row was written."""


class CutStatements(DeltaWrites):
    """The statements of a rewind that keeps the rows at or below its cut (part of
    :class:`~..._travel.Travel`)."""

    def reset_after(self, run_id: str, frame_no: int) -> bool:
        """Whether a ``reset`` frame of the run lies above ``frame_no`` (one probe of the
        partial index ``tt_frames_run_level``; the frame itself is not read)."""
        f = S.frames
        stmt = (
            sa.select(sa.literal(1))
            .where(f.c.run_id == run_id, f.c.frame_no > frame_no, S.RUN_LEVEL_WHERE)
            .where(f.c.kind == "reset")
            .limit(1)
        )
        return self._conn.execute(stmt).first() is not None

    def cut_live_state(
        self,
        stored: StoredRefs,
        nodes: Sequence[dict[str, Any]],
        attempts: Sequence[dict[str, Any]],
    ) -> None:
        """Put the live state of ``stored.run_id`` back to frame ``stored.frame_no`` (the
        cut), no ``reset`` frame lying above it: the refs pointing at a frame above the cut
        go and the refs left are checked to be exactly the visible ones; then the run's
        attempts and nodes are made ``attempts`` and ``nodes`` (rows of ``tt_attempts`` and
        ``tt_nodes``, the state at the cut) by primary key: those first seen above the cut
        are deleted (by key, whatever the planner knows of the tables), and only the rows
        that differ are written.

        Raises:
            Refold: the refs left are not exactly ``stored``'s, each with stored content
                within the ceiling: the caller rolls back and rewinds with the full fold.
        """
        conn, run_id, cut = self._conn, stored.run_id, stored.frame_no
        r = S.refs
        conn.execute(r.delete().where(r.c.run_id == run_id, r.c.frame_no > cut))
        if not self._refs_are(stored):
            raise Refold("the live refs are not those the history shows at the cut")
        self._sync(S.attempts, run_id, attempts, _UNCOMPARED["tt_attempts"])
        self._sync(S.nodes, run_id, nodes, _UNCOMPARED["tt_nodes"])

    def _refs_are(self, stored: StoredRefs) -> bool:
        """Whether the run's live refs are exactly the refs ``stored`` describes: as many as
        there are visible checkpoint frames, and each of those frames has the live ref of
        its key pointing at it and its content stored within the ceiling (a ref key is
        unique, so no two frames share one)."""
        conn, run_id = self._conn, stored.run_id
        r = S.refs
        live = conn.execute(sa.select(sa.func.count()).where(r.c.run_id == run_id)).scalar_one()
        if live != stored.count:
            return False
        where, params = stored.where()
        # Driven by the visible frames (the planner's estimate of them is sound), each
        # probing its ref by key and its content by hash.
        visible, pointed, whole = run_sql(
            conn,
            "SELECT count(*), count(r.frame_no), count(c.content_hash) FROM tt_frames f "  # noqa: S608
            "LEFT JOIN tt_checkpoint_refs r ON r.run_id = f.run_id AND r.node_id = f.node_id "
            "AND r.iteration = f.iteration AND r.attempt = f.attempt "
            "AND r.sequence = f.sequence AND r.frame_no = f.frame_no "
            "LEFT JOIN tt_checkpoint_contents c ON c.content_hash = f.content_hash "
            f"AND c.size_bytes <= :max_bytes WHERE {where}",
            dict(params, max_bytes=MAX_CHECKPOINT_BYTES),
        ).one()
        return visible == pointed == whole == live

    def _sync(
        self,
        table: sa.Table,
        run_id: str,
        rows: Sequence[dict[str, Any]],
        uncompared: frozenset[str],
    ) -> None:
        """Make the run's rows of ``table`` exactly ``rows``, by primary key: rows that are
        not among them are deleted, missing ones inserted, and those whose columns (but
        ``uncompared``) differ written over."""
        conn = self._conn
        key = [c.name for c in table.primary_key.columns if c.name != "run_id"]
        names = key + [c.name for c in table.c if c.name not in uncompared and c.name not in key]
        width = len(key)
        live = {
            row[:width]: row
            for row in plain_rows(
                conn,
                f"SELECT {', '.join(names)} FROM {table.name} WHERE run_id = :run",  # noqa: S608
                {"run": run_id},
            )
        }  # driver values: a bool may come back as 0 or 1, which compares equal to it
        values = itemgetter(*names)
        wanted = {values(row)[:width]: row for row in rows}
        # Those first seen above the cut (an attempt's refs go with it).
        gone = [k for k in live if k not in wanted]
        dialect_of(conn).delete_keys(conn, table, run_id, key, gone)
        insert_rows(conn, table, [row for k, row in wanted.items() if k not in live])
        changed = [row for k, row in wanted.items() if k in live and live[k] != values(row)]
        self._overwrite(table, changed)  # in place: an attempt's refs stay
