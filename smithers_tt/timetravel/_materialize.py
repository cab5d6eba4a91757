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
from smithers_tt.store._frames import checkpoint_frame, frame_row
from smithers_tt.store._publish import ref_row
from smithers_tt.store._records import now_ms
from smithers_tt.timetravel._snapshot import Snapshot

_MAX_PARAMS = 30_000  # below SQLite's 32,766 and PostgreSQL's 65,535 bind parameters


def chunks(rows: Sequence[Any], columns: int, limit: int = 1000) -> Iterable[Sequence[Any]]:
    """Slices of ``rows`` small enough for one multi-row statement."""
    size = max(1, min(limit, _MAX_PARAMS // max(1, columns)))
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def insert_rows(conn: Connection, table: sa.Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows with one statement per chunk of up to 1,000 rows (not one per row).

    The statement is written here rather than with ``table.insert().values([...])``:
    SQLAlchemy compiles every bound value of a multi-row ``VALUES`` in Python (about 50 us
    each, so seconds per 10,000 rows, minutes for a 100,000-ref rewind). On SQLite it is a
    multi-row ``VALUES`` with the driver's placeholders; on PostgreSQL an ``INSERT ... SELECT
    * FROM unnest(...)`` with one array per column, a fixed handful of parameters whatever the
    number of rows. Every row must have the keys of the first; values are plain Python values
    the driver adapts (str, int, bool, bytes, None).
    """
    if not rows:
        return
    columns = [c for c in table.columns if c.name in rows[0]]
    prep = conn.dialect.identifier_preparer
    # Identifiers come from the schema module, never from user input; values are bound.
    head = (
        f"INSERT INTO {prep.format_table(table)} "
        f"({', '.join(prep.quote(c.name) for c in columns)}) "
    )
    if conn.dialect.name == "postgresql":
        arrays = ", ".join(f"%s::{c.type.compile(dialect=conn.dialect)}[]" for c in columns)
        sql = f"{head}SELECT * FROM unnest({arrays})"  # noqa: S608
        for part in chunks(rows, 1):
            conn.exec_driver_sql(sql, tuple([row[c.name] for row in part] for c in columns))
        return
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    one = f"({', '.join([mark] * len(columns))})"
    for part in chunks(rows, len(columns)):
        conn.exec_driver_sql(
            f"{head}VALUES {', '.join([one] * len(part))}",
            tuple(row[c.name] for row in part for c in columns),
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


def replace_live_state(conn: Connection, snap: Snapshot, run_id: str) -> None:
    """Delete a run's live nodes, attempts and refs and write the snapshot's instead."""
    for table in (S.refs, S.attempts, S.nodes):
        conn.execute(table.delete().where(table.c.run_id == run_id))
    nodes, attempts, refs = live_rows(snap, run_id)
    insert_rows(conn, S.nodes, nodes)
    insert_rows(conn, S.attempts, attempts)
    insert_rows(conn, S.refs, refs)


def base_frames(snap: Snapshot, run_id: str) -> list[Frame]:
    """Frames numbered below 0 that restate ``snap`` as the starting history of ``run_id``."""
    frames: list[Frame] = []
    for a in sorted(snap.attempts.values(), key=lambda a: (a.node_id, a.iteration, a.attempt)):
        frames.append(
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
        )
    for key in sorted(snap.refs):
        ref = snap.refs[key]
        frames.append(
            checkpoint_frame(
                ref, run_id, 0, {"created_at_ms": ref.created_at_ms}, ref.created_at_ms
            )
        )
    for key in sorted(snap.nodes):
        n = snap.nodes[key]
        frames.append(
            Frame(
                run_id,
                0,
                "node_state",
                n.node_id,
                n.iteration,
                n.last_attempt,
                state=n.state,
                data=None if n.output is None else {"output": n.output},
                created_at_ms=now_ms(),
            )
        )
    count = len(frames)
    return [replace(frame, frame_no=i - count) for i, frame in enumerate(frames)]


def insert_frames(conn: Connection, frames: Sequence[Frame]) -> None:
    """Insert frames in bulk."""
    insert_rows(conn, S.frames, [frame_row(f) for f in frames])
