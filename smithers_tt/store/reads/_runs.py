"""The Store's reads: runs, nodes, attempts, frames, refs and verified content, each in one
read-only transaction (the engine's and a user's questions, through :class:`~.._store.Store`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt._labels import check_labels
from smithers_tt.checkpoint import AgentCheckpoint, content_hash, loads
from smithers_tt.errors import (
    AttemptNotFound,
    CheckpointCorrupt,
    CheckpointMissing,
    HistoryExhausted,
    RunNotFound,
)
from smithers_tt.store._frames import PAUSE_KINDS, frame_from_row, select_frames
from smithers_tt.store._records import (
    AttemptKey,
    AttemptRecord,
    CheckpointRef,
    Frame,
    NodeRecord,
    Page,
    RunRecord,
    check_limit,
    decode_cursor,
    encode_cursor,
    run_from_row,
    stored_json,
)
from smithers_tt.store._ref_frame import ref_from_row, select_refs
from smithers_tt.store.backend import Engine
from smithers_tt.store.backend import schema as S
from smithers_tt.store.reads._labels import CHUNK, carrying, labels_of
from smithers_tt.store.reads._run_ids import resolve_run_id, short_run_ids

HISTORY_SCAN_BOUND = 1000
"""How many refs of a node a resume scan looks at before raising HistoryExhausted."""


def attempt_from_row(row: Any) -> AttemptRecord:
    resumed = None
    if row.resumed_run_id is not None:
        resumed = (
            row.resumed_run_id,
            row.resumed_node_id,
            row.resumed_iteration,
            row.resumed_attempt,
            row.resumed_sequence,
        )
    return AttemptRecord(
        AttemptKey(row.run_id, row.node_id, row.iteration, row.attempt),
        row.state,
        row.owner_epoch,
        row.next_sequence,
        bool(row.discard_resume),
        row.error,
        row.error_code,
        resumed,
        row.started_at_ms,
        row.finished_at_ms,
    )


def attempt_where(key: AttemptKey) -> sa.ColumnElement[bool]:
    a = S.attempts
    return (
        (a.c.run_id == key.run_id)
        & (a.c.node_id == key.node_id)
        & (a.c.iteration == key.iteration)
        & (a.c.attempt == key.attempt)
    )


class RunReads:
    """The Store's reads on one engine (see :class:`~smithers_tt.store.Store`, which offers
    them by name)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _read(self, stmt: sa.Executable) -> list[Any]:
        return self.engine.transaction(lambda conn: conn.execute(stmt).all(), write=False)

    def get_run(self, run_id: str) -> RunRecord:
        """The run with this id.

        Raises:
            RunNotFound: there is none.
        """
        rows, labels = self._runs(sa.select(S.runs).where(S.runs.c.run_id == run_id))
        if not rows:
            raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
        return run_from_row(rows[0], labels.get(run_id))

    def get_runs(self, run_ids: Sequence[str]) -> dict[str, RunRecord]:
        """The runs with these ids that exist, by id, read in one transaction (a statement
        per 500 ids, not one per run: what a bulk action or a group's retry reads first)."""
        ids = sorted(set(run_ids))
        r = S.runs

        def read(conn: Connection) -> dict[str, RunRecord]:
            found: dict[str, RunRecord] = {}
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start : start + CHUNK]
                rows = conn.execute(sa.select(r).where(r.c.run_id.in_(chunk))).all()
                labels = labels_of(conn, [row.run_id for row in rows]) if rows else {}
                found.update(
                    (row.run_id, run_from_row(row, labels.get(row.run_id))) for row in rows
                )
            return found

        return self.engine.transaction(read, write=False) if ids else {}

    def _runs(self, stmt: sa.Select) -> tuple[list[Any], dict[str, dict[str, str]]]:
        """The ``tt_runs`` rows ``stmt`` selects and their labels, in one read."""

        def read(conn: Connection) -> tuple[list[Any], dict[str, dict[str, str]]]:
            rows = conn.execute(stmt).all()
            return rows, labels_of(conn, [row.run_id for row in rows]) if rows else {}

        return self.engine.transaction(read, write=False)

    def list_runs(
        self,
        *,
        limit: int = 100,
        cursor: str | None = None,
        status: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Page[RunRecord]:
        """Runs oldest first, a page at a time; only those with ``status`` and carrying
        every one of ``labels`` (``{"case": "retry"}``) when given."""
        check_limit(limit)
        r = S.runs
        stmt = sa.select(r).order_by(r.c.run_id).limit(limit + 1)
        if status is not None:
            stmt = stmt.where(r.c.status == status)
        if labels:
            stmt = stmt.where(*carrying(check_labels(labels)))  # type: ignore[arg-type]
        if cursor is not None:
            (after,) = decode_cursor("runs", cursor, (str,))
            stmt = stmt.where(r.c.run_id > after)
        rows, found = self._runs(stmt)
        items = [run_from_row(row, found.get(row.run_id)) for row in rows[:limit]]
        more = len(rows) > limit
        return Page(items, encode_cursor("runs", [items[-1].run_id]) if more else None)

    def resolve_run_id(self, text: str) -> str:
        """The full id of the run ``text`` names (its id, or a unique prefix of at least 6
        characters); see :func:`~._run_ids.resolve_run_id`."""
        return resolve_run_id(self.engine, text)

    def short_run_ids(self, run_ids: Sequence[str]) -> dict[str, str]:
        """Each id shortened to its shortest unique prefix among the stored runs (at least 8
        characters); see :func:`~._run_ids.short_run_ids`."""
        return short_run_ids(self.engine, run_ids)

    def list_nodes(self, run_id: str) -> list[NodeRecord]:
        """Every node of a run with its state, last attempt and output."""
        n = S.nodes
        rows = self._read(
            sa.select(n).where(n.c.run_id == run_id).order_by(n.c.node_id, n.c.iteration)
        )
        return [
            NodeRecord(
                r.node_id,
                r.iteration,
                r.state,
                r.last_attempt,
                stored_json(
                    r.output_json,
                    f"tt_nodes.output_json of node {r.node_id!r} (iteration {r.iteration}) of "
                    f"run {r.run_id!r}",
                ),
                run_id=r.run_id,
            )
            for r in rows
        ]

    def get_attempt(self, key: AttemptKey) -> AttemptRecord:
        """The attempt with this key.

        Raises:
            AttemptNotFound: there is none.
        """
        rows = self._read(sa.select(S.attempts).where(attempt_where(key)))
        if not rows:
            raise AttemptNotFound(f"no attempt {key}")
        return attempt_from_row(rows[0])

    def list_attempts(self, run_id: str, node_id: str | None = None) -> list[AttemptRecord]:
        """Attempts of a run (optionally one node), in key order."""
        a = S.attempts
        stmt = sa.select(a).where(a.c.run_id == run_id)
        if node_id is not None:
            stmt = stmt.where(a.c.node_id == node_id)
        rows = self._read(stmt.order_by(a.c.node_id, a.c.iteration, a.c.attempt))
        return [attempt_from_row(r) for r in rows]

    def frames(
        self, run_id: str, *, after: int | None = None, upto: int | None = None
    ) -> list[Frame]:
        """Frames of a run in order, optionally only ``after < frame_no <= upto``."""
        return [frame_from_row(r) for r in self._read(select_frames(run_id, after, upto))]

    def read_content(self, content_hash_: str) -> bytes:
        """The canonical bytes stored under a hash, verified against hash and size.

        Raises:
            CheckpointMissing: nothing is stored under this hash.
            CheckpointCorrupt: the bytes do not hash to their address or have the wrong size.
        """
        c = S.contents
        row = self.engine.transaction(
            lambda conn: conn.execute(
                sa.select(c.c.data, c.c.size_bytes).where(c.c.content_hash == content_hash_)
            ).one_or_none(),
            write=False,
        )
        if row is None:
            raise CheckpointMissing(f"no checkpoint content {content_hash_[:12]} is stored")
        data = bytes(row.data)
        if len(data) != row.size_bytes or content_hash(data) != content_hash_:
            raise CheckpointCorrupt(
                f"checkpoint content {content_hash_[:12]} failed its integrity check "
                f"({len(data)} bytes, recorded {row.size_bytes}); it is never handed to an "
                "agent; run verify() and restore from a backup",
                content_hash=content_hash_,
            )
        return data

    def load(self, ref: CheckpointRef) -> AgentCheckpoint:
        """The verified checkpoint a ref points at, as a fresh object."""
        data = self.read_content(ref.content_hash)
        checkpoint = AgentCheckpoint.from_json(loads(data))
        if (checkpoint.codec, checkpoint.version) != (ref.codec, ref.version):
            raise CheckpointCorrupt(
                f"ref says {ref.codec} v{ref.version} but content {ref.short_hash} holds "
                f"{checkpoint.codec} v{checkpoint.version}",
                content_hash=ref.content_hash,
            )
        return checkpoint

    def list_refs(
        self,
        run_id: str,
        *,
        node_id: str | None = None,
        iteration: int | None = None,
        attempt: int | None = None,
        purpose: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[CheckpointRef]:
        """Refs of a run in (node, iteration, attempt, sequence) order, a page at a time."""
        check_limit(limit)
        f = S.refs
        key = (f.c.node_id, f.c.iteration, f.c.attempt, f.c.sequence)
        stmt = select_refs(purpose).where(f.c.run_id == run_id).order_by(*key).limit(limit + 1)
        for column, value in (
            (f.c.node_id, node_id),
            (f.c.iteration, iteration),
            (f.c.attempt, attempt),
        ):
            if value is not None:
                stmt = stmt.where(column == value)
        if cursor is not None:
            after = decode_cursor("refs", cursor, (str, int, int, int))
            stmt = stmt.where(sa.tuple_(*key) > sa.tuple_(*after))
        rows = self.engine.transaction(lambda conn: conn.execute(stmt).all(), write=False)
        items = [ref_from_row(r) for r in rows[:limit]]
        nxt = None
        if len(rows) > limit:
            last = items[-1]
            nxt = encode_cursor("refs", [last.node_id, last.iteration, last.attempt, last.sequence])
        return Page(items, nxt)

    def newest_ref(
        self,
        run_id: str,
        node_id: str,
        iteration: int = 0,
        *,
        before: tuple[int, int] | None = None,
    ) -> CheckpointRef | None:
        """The newest ref of a node, optionally strictly before ``(attempt, sequence)``."""
        for ref in self.iter_refs_newest_first(
            run_id, node_id, iteration, before=before, page=1, bound=1
        ):
            return ref
        return None

    def iter_refs_newest_first(
        self,
        run_id: str,
        node_id: str,
        iteration: int = 0,
        *,
        before: tuple[int, int] | None = None,
        page: int = 100,
        bound: int = HISTORY_SCAN_BOUND,
        skip_discarded: bool = False,
    ) -> Iterator[CheckpointRef]:
        """Refs of a node newest first, in pages; stops with HistoryExhausted past ``bound``.

        ``skip_discarded`` leaves out refs of attempts that asked to discard their state.
        """
        f, a = S.refs, S.attempts
        seen = 0
        cursor = before
        while True:
            stmt = (
                select_refs()
                .where(f.c.run_id == run_id, f.c.node_id == node_id, f.c.iteration == iteration)
                .order_by(f.c.attempt.desc(), f.c.sequence.desc())
                .limit(page)
            )
            if cursor is not None:
                stmt = stmt.where(sa.tuple_(f.c.attempt, f.c.sequence) < sa.tuple_(*cursor))
            if skip_discarded:
                stmt = stmt.join(
                    a,
                    (a.c.run_id == f.c.run_id)
                    & (a.c.node_id == f.c.node_id)
                    & (a.c.iteration == f.c.iteration)
                    & (a.c.attempt == f.c.attempt),
                ).where(~a.c.discard_resume)
            rows = self.engine.transaction(lambda conn, s=stmt: conn.execute(s).all(), write=False)
            for row in rows:
                if seen >= bound:
                    raise HistoryExhausted(
                        f"scanned {bound} checkpoint refs of {node_id}[{iteration}] in run "
                        f"{run_id} without finding a usable one; refusing to start fresh "
                        "silently: reset the node to start over",
                        bound=bound,
                    )
                seen += 1
                yield ref_from_row(row)
            if len(rows) < page:
                return
            cursor = (rows[-1].attempt, rows[-1].sequence)

    def pause_frames(self, run_id: str) -> list[Frame]:
        """The frames that say where a run paused and how it went on (``run_paused``,
        ``run_continued``) and its breakpoints (frame 0, ``breakpoints_set``), in order.

        A fork starts with the breakpoints its parent had at the fork point: a frame
        ``breakpoints_set`` numbered -1 (not stored: read from the parent's history, data
        ``{"breakpoints": ..., "inherited_from": [parent, frame]}``) comes first when the
        parent had any (and still exists). What the parent passed and was answered is not
        inherited.
        """
        f = S.frames
        stmt = (
            sa.select(f)
            .where(f.c.run_id == run_id, f.c.kind.in_(PAUSE_KINDS))
            .order_by(f.c.frame_no)
        )
        own = [frame_from_row(r) for r in self._read(stmt)]
        run = self.get_run(run_id)
        if run.parent_run_id is None or run.parent_frame_no is None:
            return own
        try:
            parent = self.pause_frames(run.parent_run_id)
        except RunNotFound:  # the parent was deleted: the fork keeps only its own
            return own
        marks = [
            p
            for p in parent
            if p.frame_no <= run.parent_frame_no
            and isinstance(p.data, dict)
            and "breakpoints" in p.data
        ]
        if not marks:
            return own
        data = {
            "breakpoints": marks[-1].data["breakpoints"],
            "inherited_from": [run.parent_run_id, run.parent_frame_no],
        }
        return [Frame(run_id, -1, "breakpoints_set", data=data), *own]

    def watch_run(self, run_id: str, after: int) -> tuple[RunRecord, list[Frame]]:
        """The run, and its ``breakpoints_set`` frames numbered above ``after`` (in order),
        in one read: what a running executor polls.

        One statement (the run's row joined to those frames, one row each, or one row without
        a frame), so both come from one snapshot: every such frame up to the run's ``clock``
        is among them. On PostgreSQL it is its own transaction, one round trip.

        Raises:
            RunNotFound: there is none.
        """
        params = {"run_id": run_id, "after": after}
        rows = self.engine.transaction(
            lambda conn: conn.execute(_WATCH, params).all(), write=False, alone=True
        )
        if not rows:
            raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
        width = len(S.runs.c)
        marks = [frame_from_row(tuple(row)[width:]) for row in rows if row.f_run_id is not None]
        return run_from_row(rows[0]), marks


def _watch() -> sa.Select:
    """:meth:`RunReads.watch_run`'s statement: every column of the run ``:run_id``, then
    every column of one of its ``breakpoints_set`` frames numbered above ``:after`` (each
    labelled ``f_`` and its name; all NULL when there is none), in frame order."""
    r, f = S.runs, S.frames
    on = (
        (f.c.run_id == r.c.run_id)
        & (f.c.frame_no > sa.bindparam("after"))
        & (f.c.kind == "breakpoints_set")
    )
    return (
        sa.select(r, *(c.label(f"f_{c.name}") for c in f.c))
        .select_from(r.outerjoin(f, on))
        .where(r.c.run_id == sa.bindparam("run_id"))
        .order_by(f.c.frame_no)
    )


_WATCH = _watch()
