"""The writes of time travel: live state replaced from a snapshot, refs copied in SQL, base
frames of a fork, audit rows; all in bulk, a bounded number of statements per thousand rows.

What to write is decided above (:mod:`smithers_tt.timetravel`): rows come down as dicts of
column values, tuples and the store's own records (:class:`Frame`, :class:`CheckpointRef`),
and the refs a snapshot left in the database as a :class:`StoredRefs`.

What materialising a fork by reference writes is computed once, as a :class:`ForkRows`
(:meth:`LiveWrites.fork_rows`): :meth:`LiveWrites.materialize` writes it, and
:meth:`LiveWrites.fork_rows_read` reads the same rows without writing (what the lineage shows
for a fork not materialised yet), the base frames held in the database selected by the
statement that copies them.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import MAX_CHECKPOINT_BYTES, EncodedCheckpoint, canonical_bytes
from smithers_tt.store._frames import (
    FRAME_COLUMNS,
    FRAME_DATA_WRAPPING,
    checkpoint_frame,
    frame_values,
)
from smithers_tt.store._records import CheckpointRef, now_ms
from smithers_tt.store.backend import Dialect, dialect_of
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger._publish import REF_COLUMNS, insert_content
from smithers_tt.store.reads import StoredRefs, run_sql, stored_sizes


class Refold(Exception):
    """The set-based copy met something only the full fold decides (missing or oversized
    content, a ref key bound twice): roll the transaction back and redo it with the fold."""


def chunks(rows: Sequence[Any], columns: int, limit: int = 1000) -> Iterable[Sequence[Any]]:
    """Slices of ``rows`` small enough for one multi-row statement."""
    return Dialect.chunks(rows, columns, limit)


def insert_rows(conn: Connection, table: sa.Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows with one statement per chunk of up to 1,000 rows (not one per row).

    Every row must have the keys of the first; see :func:`insert_tuples`.
    """
    if not rows:
        return
    names = [c.name for c in table.columns if c.name in rows[0]]
    insert_tuples(conn, table, names, [tuple([row[n] for n in names]) for row in rows])


def insert_tuples(
    conn: Connection, table: sa.Table, names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Insert rows given as tuples of the columns ``names``, a few multi-row statements (see
    :meth:`Dialect.insert_tuples`: multi-row ``VALUES`` on SQLite, ``unnest`` arrays on
    PostgreSQL)."""
    if rows:
        dialect_of(conn).insert_tuples(conn, table, names, rows)


AUDIT_COLUMNS = (
    "audit_id",
    "run_id",
    "operation",
    "frame_no",
    "actor",
    "detail_json",
    "created_at_ms",
)
"""The columns of an :func:`audit_row`, in the order :attr:`Statements.insert_audit` takes."""


def audit_row(
    run_id: str,
    operation: str,
    frame_no: int | None,
    actor: str | None,
    detail: dict[str, Any],
    stamp: int,
) -> dict[str, Any]:
    """The ``tt_audit`` row of one time-travel operation (or one pruned run)."""
    return {
        "audit_id": secrets.token_hex(16),
        "run_id": run_id,
        "operation": operation,
        "frame_no": frame_no,
        "actor": actor,
        "detail_json": canonical_bytes(detail).decode(),
        "created_at_ms": stamp,
    }


def copy_refs(
    conn: Connection, where: str, params: dict[str, Any], run_id: str, expected: int
) -> None:
    """Insert, as live refs of ``run_id``, the refs of the checkpoint frames ``f`` of that run
    that ``where`` selects (each ref points at its frame), in one statement; ``expected`` is
    how many there are.

    The statement joins each ref's content (it must be stored and within the checkpoint
    ceiling): if it wrote fewer than ``expected`` rows, or the database refused a row (a ref
    key bound twice), the frames need the full fold and :class:`Refold` says so (the caller
    rolls the transaction back).
    """
    try:
        written = run_sql(
            conn,
            "INSERT INTO tt_checkpoint_refs (run_id, node_id, iteration, attempt, sequence, "  # noqa: S608
            "frame_no) SELECT f.run_id, f.node_id, f.iteration, f.attempt, f.sequence, "
            "f.frame_no FROM tt_frames f "
            "JOIN tt_checkpoint_contents c ON c.content_hash = f.content_hash "
            f"WHERE {where} AND f.run_id = :dst_run AND c.size_bytes <= :max_bytes",
            dict(params, dst_run=run_id, max_bytes=MAX_CHECKPOINT_BYTES),
        ).rowcount
    except sa.exc.IntegrityError as error:
        raise Refold("a ref key is bound twice") from error
    if written != expected:
        raise Refold(f"{written} of {expected} refs copied")


def _ref_rows(conn: Connection, run_id: str, refs: Iterable[CheckpointRef]) -> list[tuple]:
    """The ``tt_checkpoint_refs`` rows of ``refs`` (refs of ``run_id``): each points at the
    newest checkpoint frame of the run that records it (the one with the ref's time first).

    Raises:
        Refold: a ref has no checkpoint frame in the run.
    """
    refs = list(refs)
    if not refs:
        return []
    found: dict[tuple[Any, ...], int] = {}
    for row in run_sql(
        conn,
        "SELECT node_id, iteration, attempt, sequence, content_hash, codec, version, "
        "purpose, created_at_ms, frame_no FROM tt_frames "
        "WHERE run_id = :run AND kind = 'checkpoint' ORDER BY frame_no",
        {"run": run_id},
    ):
        found[tuple(row[:8])] = row[9]
        found[tuple(row[:9])] = row[9]
    rows = []
    for ref in refs:
        key = (ref.node_id, ref.iteration, ref.attempt, ref.sequence)
        same = (*key, ref.content_hash, ref.codec, ref.version, ref.purpose)
        no = found.get((*same, ref.created_at_ms), found.get(same))
        if no is None:
            raise Refold(f"ref {key} of run {run_id} has no checkpoint frame")
        rows.append((run_id, *key, no))
    return rows


_NO_REF = (None, None, None, None, None)
"""``content_hash``, ``codec``, ``version``, ``purpose`` and ``agent_id`` of other frames."""


class LiveWrites:
    """The bulk writes of one time-travel transaction (part of :class:`~..._travel.Travel`):
    live state replaced from a snapshot, content, base frames of a fork, audit rows."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def insert_content(self, encoded: EncodedCheckpoint, created_at_ms: int) -> None:
        """Store content under its hash unless present (see the publish path)."""
        insert_content(self._conn, encoded, created_at_ms)

    def audit(
        self,
        run_id: str,
        operation: str,
        frame_no: int | None,
        actor: str | None,
        detail: dict[str, Any],
    ) -> None:
        """Record one time-travel operation in ``tt_audit`` (``detail`` as JSON)."""
        row = audit_row(run_id, operation, frame_no, actor, detail, now_ms())
        self._conn.execute(S.audit.insert().values(**row))

    def replace_live_state(
        self,
        run_id: str,
        nodes: Sequence[dict[str, Any]],
        attempts: Sequence[dict[str, Any]],
        refs: Iterable[CheckpointRef],
        stored: StoredRefs | None,
        *,
        refs_from_base: bool = False,
    ) -> None:
        """Delete a run's live nodes, attempts and refs and write these instead.

        ``nodes`` and ``attempts`` are rows of ``tt_nodes`` and ``tt_attempts``; ``refs``
        become live refs of ``run_id``. Refs left in the database (``stored``) are copied from
        their checkpoint frames by one ``INSERT ... SELECT``; they never pass through Python.
        With ``refs_from_base``, every ref (``refs`` and ``stored``) is copied from the run's
        own base frames instead (a fork just wrote them with :meth:`write_base_frames`: they
        restate exactly those refs).

        Raises:
            Refold: fewer refs were copied than are visible (see :func:`copy_refs`).
        """
        conn = self._conn
        for table in (S.refs, S.attempts, S.nodes):
            conn.execute(table.delete().where(table.c.run_id == run_id))
        insert_rows(conn, S.nodes, nodes)
        insert_rows(conn, S.attempts, attempts)
        if refs_from_base:
            expected = len(list(refs)) + (0 if stored is None else stored.count)
            where = "f.kind = 'checkpoint' AND f.frame_no < 0"
            copy_refs(conn, where, {}, run_id, expected)
            return
        if stored is not None:
            where, params = stored.where()
            copy_refs(conn, where, params, run_id, stored.count)
        insert_tuples(conn, S.refs, REF_COLUMNS, _ref_rows(conn, run_id, refs))

    def base_frames(
        self,
        run_id: str,
        attempts: Sequence[tuple[Any, ...]],
        stored: StoredRefs | None,
        refs: Sequence[CheckpointRef],
        nodes: Sequence[tuple[Any, ...]],
    ) -> BaseFrames:
        """The frames numbered below 0 that restate a snapshot as the starting history of
        ``run_id`` (frame 0 is the fork's, see :meth:`Travel.fork_run`), not written yet.

        In the order given, numbered densely up to -1: ``attempts`` (``(node_id, iteration,
        attempt, state, data, started_at_ms)``, an ``attempt_started`` frame each), the refs
        left in the database (``stored``), ``refs``, then ``nodes`` (``(node_id, iteration,
        last_attempt, state, output)``, a ``node_state`` frame each). Stored refs stay in the
        database: their frames are one ``SELECT`` of their checkpoint frames (numbered in
        the order they were published), keeping each one's ``data`` and stamping the frame
        with the ref's ``created_at_ms``, so folding the child gives the very same ref
        (``fold`` reads ``data.created_at_ms``, else the frame's stamp). The other rows are
        built here, as tuples.
        """
        copied = 0 if stored is None else stored.count
        total = len(attempts) + copied + len(refs) + len(nodes)
        no = -total
        rows: list[tuple[Any, ...]] = []
        for node_id, iteration, attempt, state, data, started_at_ms in attempts:
            data_json = canonical_bytes(data).decode()
            key = (node_id, iteration, attempt)
            rows.append(
                (
                    run_id,
                    no,
                    "attempt_started",
                    *key,
                    None,
                    state,
                    *_NO_REF,
                    data_json,
                    started_at_ms,
                    None,
                )
            )
            no += 1
        first_copied = no
        no += copied
        sizes = stored_sizes(self._conn, list({r.content_hash for r in refs}))
        for r in refs:
            frame = checkpoint_frame(
                r, run_id, no, {"created_at_ms": r.created_at_ms}, r.created_at_ms
            )
            rows.append((*frame_values(frame)[:-1], sizes.get(r.content_hash)))
            no += 1
        stamp = now_ms()
        for node_id, iteration, last_attempt, state, output in nodes:
            data_json = (
                None
                if output is None
                else canonical_bytes({"output": output}, wrapping=FRAME_DATA_WRAPPING).decode()
            )
            key = (node_id, iteration, last_attempt)
            rows.append(
                (run_id, no, "node_state", *key, None, state, *_NO_REF, data_json, stamp, None)
            )
            no += 1
        return BaseFrames(run_id, tuple(rows), stored if copied else None, first_copied, total)

    def write_base_frames(self, frames: BaseFrames) -> int:
        """Write ``frames`` (see :meth:`base_frames`); return how many there are."""
        insert_tuples(self._conn, S.frame_rows, FRAME_COLUMNS, frames.rows)
        if frames.copied is not None:  # never through Python: one INSERT ... SELECT
            sql, params = _copied_frames(self._conn, frames)
            run_sql(
                self._conn, f"INSERT INTO tt_frame_rows ({', '.join(FRAME_COLUMNS)}) {sql}", params
            )
        return frames.count

    def fork_rows(
        self,
        frames: BaseFrames,
        nodes: Sequence[dict[str, Any]],
        attempts: Sequence[dict[str, Any]],
    ) -> ForkRows:
        """What materialising the fork by reference ``frames.run_id`` writes: its base frames
        (:meth:`base_frames`) and its live ``nodes`` and ``attempts`` (rows of ``tt_nodes``
        and ``tt_attempts``); a live ref for each checkpoint base frame goes with them.
        :meth:`materialize` writes them; :meth:`fork_rows_read` reads them without writing."""
        return ForkRows(frames.run_id, frames, tuple(nodes), tuple(attempts))

    def materialize(self, fork: ForkRows) -> None:
        """Write ``fork`` (see :meth:`fork_rows`): the run's base frames (those below 0, the
        edited checkpoints of a fork by reference, are restated with the rest) and its live
        nodes, attempts and refs (each ref copied from its base frame by one
        ``INSERT ... SELECT``). The caller marks the run as no longer inheriting.

        Raises:
            Refold: fewer refs were copied than there are checkpoint base frames, or a ref key
                is bound twice (see :func:`copy_refs`).
        """
        conn, run_id = self._conn, fork.run_id
        f = S.frame_rows
        conn.execute(f.delete().where(f.c.run_id == run_id, f.c.frame_no < 0))
        self.write_base_frames(fork.frames)
        for table in (S.refs, S.attempts, S.nodes):
            conn.execute(table.delete().where(table.c.run_id == run_id))
        insert_rows(conn, S.nodes, fork.nodes)
        insert_rows(conn, S.attempts, fork.attempts)
        where = "f.kind = 'checkpoint' AND f.frame_no < 0"
        copy_refs(conn, where, {}, run_id, fork.frames.checkpoints)

    def fork_rows_read(self, fork: ForkRows) -> dict[str, list[dict[str, Any]]]:
        """The rows :meth:`materialize` would write for ``fork``, by table (``tt_frames``,
        ``tt_nodes``, ``tt_attempts``, ``tt_checkpoint_refs``), read without writing: the
        base frames the database holds (stored refs) are selected by the very statement
        the write inserts them with.

        Raises:
            Refold: the stored refs are not what the write would copy (fewer, or a key bound
                twice): only the full fold can tell.
        """
        frames = list(fork.frames.rows)
        copied = fork.frames.copied
        if copied is not None:
            sql, params = _copied_frames(self._conn, fork.frames)
            found = [tuple(row) for row in run_sql(self._conn, sql, params)]
            if len(found) != copied.count:
                raise Refold(f"{len(found)} of {copied.count} refs found")
            frames += found
        frames.sort(key=lambda row: row[1])
        rows = [dict(zip(FRAME_COLUMNS, row, strict=True)) for row in frames]
        refs = [
            {name: row[name] for name in REF_COLUMNS} for row in rows if row["kind"] == "checkpoint"
        ]
        if len({tuple(r[name] for name in REF_COLUMNS[:5]) for r in refs}) != len(refs):
            raise Refold("a ref key is bound twice")
        return {
            "tt_frames": rows,
            "tt_nodes": [dict(row) for row in fork.nodes],
            "tt_attempts": [dict(row) for row in fork.attempts],
            "tt_checkpoint_refs": refs,
        }


@dataclass(frozen=True, slots=True)
class BaseFrames:
    """The frames numbered below 0 that restate a snapshot as a run's starting history
    (:meth:`LiveWrites.base_frames`), not written yet."""

    run_id: str
    rows: tuple[tuple[Any, ...], ...]
    """Frames built in Python (attempts, refs the snapshot holds, nodes), ``tt_frames``
    columns in order."""
    copied: StoredRefs | None
    """Refs left in the database: their frames are copies of their checkpoint frames."""
    first_copied: int
    """The number of the first copied frame (the others follow, densely)."""
    count: int
    """How many base frames there are."""

    @property
    def checkpoints(self) -> int:
        """How many of them are checkpoint frames (one per ref)."""
        built = sum(1 for row in self.rows if row[2] == "checkpoint")
        return built + (0 if self.copied is None else self.copied.count)


@dataclass(frozen=True, slots=True)
class ForkRows:
    """What materialising a fork by reference writes (:meth:`LiveWrites.fork_rows`)."""

    run_id: str
    frames: BaseFrames
    nodes: tuple[dict[str, Any], ...]
    attempts: tuple[dict[str, Any], ...]


def _copied_frames(conn: Connection, frames: BaseFrames) -> tuple[str, dict[str, Any]]:
    """The ``SELECT`` of the base frames of ``frames`` that copy the checkpoint frames of the
    refs left in the database (``tt_frames`` columns in order), and its parameters."""
    assert frames.copied is not None
    where, params = frames.copied.where()
    sql = (
        "SELECT CAST(:dst_run AS TEXT), :offset + ROW_NUMBER() OVER (ORDER BY f.frame_no), "  # noqa: S608
        "'checkpoint', f.node_id, f.iteration, f.attempt, f.sequence, NULL, f.content_hash, "
        "f.codec, f.version, f.purpose, f.agent_id, f.data_json, "
        f"{dialect_of(conn).ref_created}, f.size_bytes FROM tt_frames f "
        f"WHERE {where} ORDER BY f.frame_no"
    )
    return sql, dict(params, dst_run=frames.run_id, offset=frames.first_copied - 1)
