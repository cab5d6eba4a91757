"""Writing a snapshot back into the live tables, in bulk, after checking it is whole."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import MAX_CHECKPOINT_BYTES
from smithers_tt.checkpoint._json import canonical_bytes
from smithers_tt.errors import CheckpointMissing, SnapshotInvalid
from smithers_tt.store import Frame
from smithers_tt.store import _schema as S
from smithers_tt.store._frames import FRAME_DATA_WRAPPING, checkpoint_frame, frame_row
from smithers_tt.store._publish import ref_row
from smithers_tt.store._records import now_ms
from smithers_tt.timetravel._bulk import Refold, created_expr, run_sql
from smithers_tt.timetravel._snapshot import Snapshot

_MAX_PARAMS = 30_000  # below SQLite's 32,766 and PostgreSQL's 65,535 bind parameters
_PG_ROWS = 10_000  # rows per unnest(...) insert on PostgreSQL: one array parameter per column


def chunks(rows: Sequence[Any], columns: int, limit: int = 1000) -> Iterable[Sequence[Any]]:
    """Slices of ``rows`` small enough for one multi-row statement."""
    size = max(1, min(limit, _MAX_PARAMS // max(1, columns)))
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


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
    """Insert rows given as tuples of the columns ``names``, one statement per chunk.

    The statement is written here rather than with ``table.insert().values([...])``:
    SQLAlchemy compiles every bound value of a multi-row ``VALUES`` in Python (about 50 us
    each, so seconds per 10,000 rows, minutes for a 100,000-ref rewind). On SQLite it is a
    multi-row ``VALUES`` with the driver's placeholders; on PostgreSQL an ``INSERT ... SELECT
    * FROM unnest(...)`` with one array per column, a fixed handful of parameters whatever the
    number of rows. Values are plain Python values the driver adapts (str, int, bool, bytes,
    None).
    """
    if not rows:
        return
    columns = [table.c[name] for name in names]
    prep = conn.dialect.identifier_preparer
    # Identifiers come from the schema module, never from user input; values are bound.
    head = (
        f"INSERT INTO {prep.format_table(table)} "
        f"({', '.join(prep.quote(c.name) for c in columns)}) "
    )
    if conn.dialect.name == "postgresql":
        arrays = ", ".join(f"%s::{c.type.compile(dialect=conn.dialect)}[]" for c in columns)
        sql = f"{head}SELECT * FROM unnest({arrays})"  # noqa: S608
        for part in chunks(rows, 1, limit=_PG_ROWS):
            conn.exec_driver_sql(sql, tuple([row[i] for row in part] for i in range(len(names))))
        return
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    one = f"({', '.join([mark] * len(columns))})"
    for part in chunks(rows, len(columns)):
        conn.exec_driver_sql(
            f"{head}VALUES {', '.join([one] * len(part))}",
            tuple([value for row in part for value in row]),
        )


def check_contents(conn: Connection, snap: Snapshot) -> None:
    """Every content the snapshot refers to is stored and within the size ceiling.

    Raises:
        CheckpointMissing: some content is gone (nothing is changed).
        SnapshotInvalid: some content is larger than any checkpoint may be.
    """
    hashes = sorted({ref.content_hash for ref in snap.refs.values()})
    c = S.contents
    found: dict[str, int] = {}
    for part in chunks(hashes, 1):
        rows = conn.execute(
            sa.select(c.c.content_hash, c.c.size_bytes).where(c.c.content_hash.in_(list(part)))
        ).all()
        found.update((r.content_hash, r.size_bytes) for r in rows)
    missing = [h for h in hashes if h not in found]
    if missing:
        raise CheckpointMissing(
            f"{len(missing)} checkpoint content(s) of run {snap.run_id} at frame "
            f"{snap.frame_no} are not stored (first {missing[0][:12]}); nothing was changed",
            missing=missing[:20],
        )
    oversized = [h for h, size in found.items() if size > MAX_CHECKPOINT_BYTES]
    if oversized:
        raise SnapshotInvalid(
            f"content {oversized[0][:12]} is larger than the 16 MiB checkpoint ceiling; "
            "refusing to restore it; nothing was changed"
        )
    for key in snap.refs:
        if key[:3] not in snap.attempts:
            raise SnapshotInvalid(
                f"checkpoint ref {key} of run {snap.run_id} belongs to no attempt visible at "
                f"frame {snap.frame_no}; nothing was changed"
            )


def live_rows(snap: Snapshot, run_id: str) -> tuple[list[dict[str, Any]], ...]:
    """Rows of ``tt_nodes``, ``tt_attempts`` and ``tt_checkpoint_refs`` for a snapshot.

    Attempts keep the state they had at the frame, exactly. One that was in progress stays
    ``in_progress`` under epoch 0, which no owner holds (the run's epoch only grows), so
    nothing can publish into it; the next claim ends it as ``interrupted`` with a frame, as it
    does after a crash, so later snapshots agree with the live tables.
    """
    stamp = now_ms()
    nodes = [
        {
            "run_id": run_id,
            "node_id": n.node_id,
            "iteration": n.iteration,
            "state": n.state,
            "last_attempt": n.last_attempt,
            "updated_at_ms": stamp,
            "output_json": None if n.output is None else canonical_bytes(n.output).decode(),
        }
        for n in snap.nodes.values()
    ]
    next_seq: dict[tuple[str, int, int], int] = {}
    if snap.stored_refs is not None:
        next_seq.update((k, v[1]) for k, v in snap.stored_refs.per_attempt.items())
    for node_id, iteration, attempt, sequence in snap.refs:
        key = (node_id, iteration, attempt)
        next_seq[key] = max(next_seq.get(key, 0), sequence + 1)
    attempts = []
    for key, a in snap.attempts.items():
        src = a.resumed_from
        attempts.append(
            {
                "run_id": run_id,
                "node_id": a.node_id,
                "iteration": a.iteration,
                "attempt": a.attempt,
                "state": a.state,
                "owner_epoch": 0,
                "next_sequence": next_seq.get(key, 0),
                "discard_resume": a.discard_resume,
                "error": a.error,
                "error_code": a.error_code,
                "resumed_run_id": src[0] if src else None,
                "resumed_node_id": src[1] if src else None,
                "resumed_iteration": src[2] if src else None,
                "resumed_attempt": src[3] if src else None,
                "resumed_sequence": src[4] if src else None,
                "started_at_ms": a.started_at_ms,
                "finished_at_ms": None if a.state == "in_progress" else (a.finished_at_ms or stamp),
            }
        )
    refs = [dict(ref_row(ref), run_id=run_id) for ref in snap.refs.values()]
    return nodes, attempts, refs


def replace_live_state(
    conn: Connection, snap: Snapshot, run_id: str, *, refs_from_base: bool = False
) -> None:
    """Delete a run's live nodes, attempts and refs and write the snapshot's instead.

    Refs the snapshot left in the database (``stored_refs``) are copied from their
    checkpoint frames by one ``INSERT ... SELECT``; they never pass through Python. With
    ``refs_from_base``, every ref is copied from the run's own base frames instead (a fork
    just wrote them with :func:`write_base_frames`: they restate exactly ``snap``'s refs).

    Raises:
        Refold: fewer refs were copied than are visible (see :func:`copy_refs`).
    """
    for table in (S.refs, S.attempts, S.nodes):
        conn.execute(table.delete().where(table.c.run_id == run_id))
    nodes, attempts, refs = live_rows(snap, run_id)
    insert_rows(conn, S.nodes, nodes)
    insert_rows(conn, S.attempts, attempts)
    stored = snap.stored_refs
    if refs_from_base:
        expected = len(refs) + (0 if stored is None else stored.count)
        where = "f.run_id = :src_run AND f.kind = 'checkpoint' AND f.frame_no < 0"
        copy_refs(conn, where, {"src_run": run_id}, "f.created_at_ms", run_id, expected)
        return
    if stored is not None:
        where, params = stored.where()
        created = created_expr(conn.dialect.name)
        copy_refs(conn, where, params, created, run_id, stored.count)
    insert_rows(conn, S.refs, refs)


_REF_COLUMNS = (
    "node_id, iteration, attempt, sequence, content_hash, codec, version, agent_id, purpose"
)


def copy_refs(
    conn: Connection,
    where: str,
    params: dict[str, Any],
    created: str,
    run_id: str,
    expected: int,
) -> None:
    """Insert, as live refs of ``run_id``, the refs of the checkpoint frames ``f`` that
    ``where`` selects, in one statement; ``expected`` is how many there are.

    The statement joins each ref's content (it must be stored and within the checkpoint
    ceiling): if it wrote fewer than ``expected`` rows, or the database refused a row (a ref
    key bound twice), the frames need the full fold and :class:`Refold` says so (the caller
    rolls the transaction back).
    """
    cols = ", ".join(f"f.{c}" for c in _REF_COLUMNS.split(", "))
    try:
        written = run_sql(
            conn,
            f"INSERT INTO tt_checkpoint_refs (run_id, {_REF_COLUMNS}, created_at_ms) "  # noqa: S608
            f"SELECT :dst_run, {cols}, {created} FROM tt_frames f "
            "JOIN tt_checkpoint_contents c ON c.content_hash = f.content_hash "
            f"WHERE {where} AND c.size_bytes <= :max_bytes",
            dict(params, dst_run=run_id, max_bytes=MAX_CHECKPOINT_BYTES),
        ).rowcount
    except sa.exc.IntegrityError as error:
        raise Refold("a ref key is bound twice") from error
    if written != expected:
        raise Refold(f"{written} of {expected} refs copied")


_FRAME_COLUMNS = tuple(S.frames.c.keys())
"""Every column of ``tt_frames``, in the schema's order (the schema is defined once)."""


_NO_REF = (None, None, None, None, None)
"""``content_hash``, ``codec``, ``version``, ``purpose`` and ``agent_id`` of other frames."""


def write_base_frames(conn: Connection, snap: Snapshot, run_id: str, last: Frame) -> int:
    """Write the frames numbered below 0 that restate ``snap`` as the starting history of
    ``run_id``, then ``last`` (frame 0); return how many base frames there are.

    The frames are those of :func:`base_frames`: attempts first, then refs, then nodes,
    numbered densely up to -1. Refs left in the database (``stored_refs``) are copied from
    their checkpoint frames by one ``INSERT ... SELECT`` (numbered in the order they were
    published), keeping each one's ``data`` and stamping the frame with the ref's
    ``created_at_ms``, so folding the child gives the very same ref (``fold`` reads
    ``data.created_at_ms``, else the frame's stamp). The other rows are built as tuples.
    """
    stored = snap.stored_refs
    copied = 0 if stored is None else stored.count
    attempts = sorted(snap.attempts.values(), key=lambda a: (a.node_id, a.iteration, a.attempt))
    refs = [
        checkpoint_frame(r, run_id, 0, {"created_at_ms": r.created_at_ms}, r.created_at_ms)
        for r in (snap.refs[key] for key in sorted(snap.refs))
    ]
    nodes = [snap.nodes[key] for key in sorted(snap.nodes)]
    total = len(attempts) + copied + len(refs) + len(nodes)
    no = -total
    rows: list[tuple[Any, ...]] = []
    for a in attempts:
        data = {
            "resumed_from": list(a.resumed_from) if a.resumed_from else None,
            "error": a.error,
            "error_code": a.error_code,
            "discard_resume": a.discard_resume,
            "finished_at_ms": a.finished_at_ms,
        }
        data_json = canonical_bytes(data).decode()
        key = (a.node_id, a.iteration, a.attempt)
        rows.append(
            (
                run_id,
                no,
                "attempt_started",
                *key,
                None,
                a.state,
                *_NO_REF,
                data_json,
                a.started_at_ms,
            )
        )
        no += 1
    insert_tuples(conn, S.frames, _FRAME_COLUMNS, rows)
    if stored is not None and copied:
        where, params = stored.where()
        run_sql(
            conn,
            "INSERT INTO tt_frames (run_id, frame_no, kind, node_id, iteration, attempt, "  # noqa: S608
            "sequence, state, content_hash, codec, version, purpose, agent_id, data_json, "
            "created_at_ms) SELECT :dst_run, :offset + ROW_NUMBER() OVER (ORDER BY f.frame_no), "
            "'checkpoint', f.node_id, f.iteration, f.attempt, f.sequence, NULL, f.content_hash, "
            "f.codec, f.version, f.purpose, f.agent_id, f.data_json, "
            f"{created_expr(conn.dialect.name)} FROM tt_frames f WHERE {where} "
            "ORDER BY f.frame_no",
            dict(params, dst_run=run_id, offset=no - 1),
        )
        no += copied
    rows = []
    for frame in refs:
        row = frame_row(frame)
        row["frame_no"] = no
        rows.append(tuple(row[c] for c in _FRAME_COLUMNS))
        no += 1
    stamp = now_ms()
    for n in nodes:
        output = (
            None
            if n.output is None
            else canonical_bytes({"output": n.output}, wrapping=FRAME_DATA_WRAPPING).decode()
        )
        key = (n.node_id, n.iteration, n.last_attempt)
        rows.append((run_id, no, "node_state", *key, None, n.state, *_NO_REF, output, stamp))
        no += 1
    last_row = frame_row(last)
    rows.append(tuple(last_row[c] for c in _FRAME_COLUMNS))
    insert_tuples(conn, S.frames, _FRAME_COLUMNS, rows)
    return total


def _base_parts(snap: Snapshot, run_id: str) -> tuple[list[Frame], list[Frame], list[Frame]]:
    """The base frames (all numbered 0) of the attempts, the refs in ``snap.refs`` and the
    nodes of ``snap``, each part sorted by key."""
    attempts = [
        Frame(
            run_id,
            0,
            "attempt_started",
            a.node_id,
            a.iteration,
            a.attempt,
            state=a.state,
            created_at_ms=a.started_at_ms,
            data={
                "resumed_from": list(a.resumed_from) if a.resumed_from else None,
                "error": a.error,
                "error_code": a.error_code,
                "discard_resume": a.discard_resume,
                "finished_at_ms": a.finished_at_ms,
            },
        )
        for a in sorted(snap.attempts.values(), key=lambda a: (a.node_id, a.iteration, a.attempt))
    ]
    refs = [
        checkpoint_frame(r, run_id, 0, {"created_at_ms": r.created_at_ms}, r.created_at_ms)
        for r in (snap.refs[key] for key in sorted(snap.refs))
    ]
    stamp = now_ms()
    nodes = [
        Frame(
            run_id,
            0,
            "node_state",
            n.node_id,
            n.iteration,
            n.last_attempt,
            state=n.state,
            data=None if n.output is None else {"output": n.output},
            created_at_ms=stamp,
        )
        for n in (snap.nodes[key] for key in sorted(snap.nodes))
    ]
    return attempts, refs, nodes


def base_frames(snap: Snapshot, run_id: str) -> list[Frame]:
    """Frames numbered below 0 that restate ``snap`` (with the refs in ``snap.refs``) as the
    starting history of ``run_id``; see :func:`write_base_frames`."""
    attempts, refs, nodes = _base_parts(snap, run_id)
    frames = attempts + refs + nodes
    count = len(frames)
    return [replace(frame, frame_no=i - count) for i, frame in enumerate(frames)]


def insert_frames(conn: Connection, frames: Sequence[Frame]) -> None:
    """Insert frames in bulk."""
    insert_rows(conn, S.frames, [frame_row(f) for f in frames])
