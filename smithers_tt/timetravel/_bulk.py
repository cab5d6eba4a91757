"""The state at frame N with set-based SQL for the refs: what makes large rewinds and forks fast.

:func:`smithers_tt.timetravel._snapshot.fold` is the definition of a snapshot. Folding every
frame in Python costs seconds for 100,000 refs, and then each ref is a Python object written
back row by row. Here the *checkpoint* frames (nearly all frames of a large run) never leave
the database:

* the other frames (attempts, nodes, run status, resets: a small part of a large run) are
  folded in Python with the very same :func:`~smithers_tt.timetravel._snapshot.apply`;
* a ref is visible at frame N exactly when its checkpoint frame is at or below N and after the
  last ``reset`` frame (at or below N) that names its node; resets are read from the fold, so
  this is a ``frame_no`` range per node, a plain ``WHERE`` clause over ``tt_frames``;
* two aggregate queries check, for every checkpoint frame, what ``fold`` and
  ``check_contents`` check for it (fields present, SHA-256 long, ``data`` a JSON object, an
  attempt visible for its ref);
* rewind and fork then copy the visible refs with one ``INSERT ... SELECT`` that joins their
  content (stored, within the ceiling) and skips a ref key bound twice; when it writes fewer
  rows than there are visible refs, the operation raises :class:`Refold` and its caller
  runs it again from the start with the full fold (which names the missing content, or
  takes the last binding of a key as ``fold`` does).

Whenever one of those checks finds anything unusual, :func:`state_at` returns ``None`` and the
caller folds every frame in Python instead, which raises the precise error (or, for the rare
shapes only the fold handles, such as a ref key published twice, gives the exact answer).
The set-based path therefore answers only where it provably agrees with ``fold``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.errors import SnapshotInvalid
from smithers_tt.store import CheckpointRef
from smithers_tt.store._records import VERIFY_HINT
from smithers_tt.timetravel import _snapshot
from smithers_tt.timetravel._snapshot import AttemptKeyT, RefKey, Snapshot, apply

_FLOOR = -(2**62)
"""Below every frame number (base frames of a fork are negative)."""


class Refold(Exception):
    """The set-based copy met something only the full fold decides (missing or oversized
    content, a ref key bound twice): roll the transaction back and redo it with the fold."""


def run_sql(conn: Connection, sql: str, params: dict[str, Any]) -> Any:
    """Execute ``sql`` (``:name`` placeholders) through the driver and return its cursor.

    Rows come back as plain tuples, without SQLAlchemy's per-row objects: these statements
    read up to a few hundred thousand rows. Placeholders become the driver's own; the SQL is
    written in this module (no user input), values are always bound.
    """
    if conn.dialect.name == "postgresql":
        sql = re.sub(r"(?<!:):([a-z_][a-z0-9_]*)", r"%(\1)s", sql)
    return conn.exec_driver_sql(sql, params)


SQLITE_CACHE_KIB = 131_072
"""Page cache (KiB) an SQLite connection gets while it rewinds or forks; see :func:`roomy`."""

PG_WORK_MEM_KIB = 65_536
"""``work_mem`` (KiB) of a PostgreSQL transaction that rewinds or forks; see :func:`roomy`."""


@contextmanager
def roomy(conn: Connection) -> Iterator[None]:
    """Give one rewind or fork more memory: on SQLite a larger page cache for the
    connection, on PostgreSQL a larger ``work_mem`` for the transaction.

    Copying 100,000 refs inserts into four B-tree indexes at random places (two keyed by
    content hash); with SQLite's default 2 MiB cache most of those pages are written out and
    read back several times in one transaction. The setting is the connection's own (not the
    database's) and is put back afterwards, also when the operation fails.
    """
    if conn.dialect.name == "postgresql":
        # Numbering 100,000 base frames sorts them: in memory, not in temporary files. LOCAL:
        # the setting ends with the transaction, committed or not.
        conn.exec_driver_sql(f"SET LOCAL work_mem = '{int(PG_WORK_MEM_KIB)}kB'")
    if conn.dialect.name != "sqlite":
        yield
        return
    before = conn.exec_driver_sql("PRAGMA cache_size").scalar()
    conn.exec_driver_sql(f"PRAGMA cache_size = -{int(SQLITE_CACHE_KIB)}")
    try:
        yield
    finally:
        conn.exec_driver_sql(f"PRAGMA cache_size = {int(before)}")


def _data_ok(dialect: str) -> str:
    """SQL: 1 when ``f.data_json`` is what ``fold`` accepts on a checkpoint frame and the set
    path can read (NULL, or a JSON object whose ``created_at_ms``, if any, is an integer).

    Data with a ``\\u`` escape goes to the fold: an escape could spell the key, and SQLite
    matches JSON paths against keys as written. Only data that mentions ``created_at_ms`` is
    parsed a second time for it.
    """
    if dialect == "postgresql":
        j = "CAST(f.data_json AS jsonb)"
        return (
            "CASE WHEN f.data_json IS NULL THEN 1 "
            "WHEN json_typeof(CAST(f.data_json AS json)) <> 'object' THEN 0 "
            "WHEN strpos(f.data_json, '\\u') > 0 THEN 0 "
            "WHEN strpos(f.data_json, 'created_at_ms') = 0 THEN 1 "
            "WHEN length(f.data_json) - length(replace(f.data_json, 'created_at_ms', '')) > 13 "
            "THEN 0 "
            f"WHEN NOT jsonb_exists({j}, 'created_at_ms') THEN 1 "
            f"WHEN jsonb_typeof({j} -> 'created_at_ms') = 'number' "
            f"AND ({j} ->> 'created_at_ms') ~ '^-?[0-9]{{1,18}}$' THEN 1 ELSE 0 END"
        )
    return (
        "CASE WHEN f.data_json IS NULL THEN 1 WHEN NOT json_valid(f.data_json) THEN 0 "
        "WHEN json_type(f.data_json) <> 'object' THEN 0 "
        "WHEN instr(f.data_json, '\\u') > 0 THEN 0 "
        "WHEN instr(f.data_json, 'created_at_ms') = 0 THEN 1 "
        # the key twice: SQLite's path finds the first, fold keeps the last (so both go to
        # the fold, on PostgreSQL too)
        "WHEN length(f.data_json) - length(replace(f.data_json, 'created_at_ms', '')) > 13 "
        "THEN 0 "
        "WHEN coalesce(json_type(f.data_json, '$.created_at_ms'), 'integer') <> 'integer' "
        "THEN 0 ELSE 1 END"
    )


def created_expr(dialect: str) -> str:
    """SQL: a ref's ``created_at_ms`` from its checkpoint frame ``f``, as ``fold`` takes it
    (``data.created_at_ms`` when present, else the frame's own); ``data`` was checked by
    :func:`_data_ok`."""
    if dialect == "postgresql":
        return (
            "coalesce(CASE WHEN strpos(f.data_json, 'created_at_ms') > 0 THEN "
            "CAST(CAST(f.data_json AS jsonb) ->> 'created_at_ms' AS bigint) END, "
            "f.created_at_ms)"
        )
    return (
        "coalesce(CASE WHEN instr(f.data_json, 'created_at_ms') > 0 THEN "
        "json_extract(f.data_json, '$.created_at_ms') END, f.created_at_ms)"
    )


@dataclass
class StoredRefs:
    """The refs visible at ``frame_no`` of ``run_id``, left in its checkpoint frames."""

    run_id: str
    frame_no: int
    cut: dict[str, int]
    """Per node: only its checkpoint frames above this number are visible (its last reset,
    or ``frame_no`` for nodes a fork leaves out)."""
    per_attempt: dict[AttemptKeyT, tuple[int, int]] = field(default_factory=dict)
    """Visible refs per attempt: (how many, next sequence)."""

    @property
    def count(self) -> int:
        return sum(n for n, _ in self.per_attempt.values())

    def without(self, nodes: set[str]) -> StoredRefs:
        """The same refs minus those of ``nodes``."""
        cut = dict(self.cut)
        cut.update(dict.fromkeys(nodes, self.frame_no))
        per = {k: v for k, v in self.per_attempt.items() if k[0] not in nodes}
        return StoredRefs(self.run_id, self.frame_no, cut, per)

    def where(self) -> tuple[str, dict[str, Any]]:
        """A condition on ``tt_frames f`` that holds for exactly the visible checkpoint frames
        (one per visible ref), and its parameters."""
        cut, params = self.after_cut()
        sql = "f.run_id = :src_run AND f.kind = 'checkpoint' AND f.frame_no <= :src_upto"
        params.update(src_run=self.run_id, src_upto=self.frame_no)
        return f"{sql} AND {cut}", params

    def after_cut(self) -> tuple[str, dict[str, Any]]:
        """A condition on ``tt_frames f``: the frame comes after its node's cut."""
        params: dict[str, Any] = {}
        whens = []
        for i, (node, cut) in enumerate(sorted(self.cut.items())):
            params[f"cut_node_{i}"] = node
            params[f"cut_no_{i}"] = cut
            whens.append(f"WHEN :cut_node_{i} THEN :cut_no_{i}")
        if not whens:
            return "1 = 1", params
        params["cut_floor"] = _FLOOR
        return f"f.frame_no > CASE f.node_id {' '.join(whens)} ELSE :cut_floor END", params

    def rows(self, conn: Connection) -> list[tuple[Any, ...]]:
        """The visible refs as tuples in :class:`CheckpointRef` field order (no run id)."""
        where, params = self.where()
        return run_sql(
            conn,
            "SELECT f.node_id, f.iteration, f.attempt, f.sequence, f.content_hash, f.codec, "  # noqa: S608
            f"f.version, f.purpose, f.agent_id, {created_expr(conn.dialect.name)} "
            f"FROM tt_frames f WHERE {where}",
            params,
        ).fetchall()

    def newest(self, conn: Connection, node_id: str) -> CheckpointRef | None:
        """The node's newest visible ref (highest iteration, then attempt, then sequence)."""
        where, params = self.where()
        row = run_sql(
            conn,
            "SELECT f.node_id, f.iteration, f.attempt, f.sequence, f.content_hash, f.codec, "  # noqa: S608
            f"f.version, f.purpose, f.agent_id, {created_expr(conn.dialect.name)} "
            f"FROM tt_frames f WHERE {where} AND f.node_id = :newest_node "
            "ORDER BY f.iteration DESC, f.attempt DESC, f.sequence DESC LIMIT 1",
            dict(params, newest_node=node_id),
        ).first()
        return None if row is None else CheckpointRef(self.run_id, *row)


def refs_from_rows(run_id: str, rows: list[tuple[Any, ...]]) -> dict[RefKey, CheckpointRef]:
    """``{(node, iteration, attempt, sequence): CheckpointRef}`` from :meth:`StoredRefs.rows`."""
    return {(r[0], r[1], r[2], r[3]): CheckpointRef(run_id, *r) for r in rows}


class _Row:
    """A frame other than a checkpoint as :func:`apply` reads it (attributes of
    :class:`Frame`), made cheaply."""

    __slots__ = (
        "attempt",
        "created_at_ms",
        "data",
        "frame_no",
        "iteration",
        "kind",
        "node_id",
        "run_id",
        "state",
    )


_COLUMNS = "frame_no, kind, node_id, iteration, attempt, state, data_json, created_at_ms"
"""What :func:`apply` reads of frames other than checkpoints (the ref columns are NULL or
unused there)."""


def _fold_other_frames(conn: Connection, snap: Snapshot, upto: int) -> tuple[dict[str, int], int]:
    """Apply every frame at or below ``upto`` except checkpoints to ``snap``, in order.

    Returns the reset cut per node and the largest number of nodes + attempts seen.
    """
    cursor = run_sql(
        conn,
        f"SELECT {_COLUMNS} FROM tt_frames WHERE run_id = :run AND frame_no <= :upto "  # noqa: S608
        "AND kind <> 'checkpoint' ORDER BY frame_no",
        {"run": snap.run_id, "upto": upto},
    )
    cut: dict[str, int] = {}
    largest = 0
    run_id = snap.run_id
    loads = orjson.loads
    for row in cursor.fetchall():
        frame = _Row()
        (
            frame.frame_no,
            frame.kind,
            frame.node_id,
            frame.iteration,
            frame.attempt,
            frame.state,
            data_json,
            frame.created_at_ms,
        ) = row
        frame.run_id = run_id
        if data_json is None:
            frame.data = None
        else:
            try:
                frame.data = loads(data_json)
            except ValueError as error:  # the message _ops._frames gives
                raise SnapshotInvalid(
                    f"frame {frame.frame_no} ({frame.kind}) of run {run_id} is corrupt: its "
                    f"data is not JSON ({error}); nothing was changed; {VERIFY_HINT}",
                    run_id=run_id,
                    frame_no=frame.frame_no,
                ) from error
        apply(snap, frame)  # type: ignore[arg-type]
        snap.frame_no = frame.frame_no
        if frame.kind == "reset":  # apply checked its data; it drops these nodes' refs
            for node in (frame.data or {}).get("nodes") or []:
                if isinstance(node, str):  # anything else matches no node in fold either
                    cut[node] = frame.frame_no
        size = len(snap.nodes) + len(snap.attempts)
        if size > largest:
            largest = size
    return cut, largest


def state_at(conn: Connection, run_id: str, frame_no: int) -> Snapshot | None:
    """The snapshot at ``frame_no`` with its refs left in the database (``stored_refs``), or
    ``None`` when only a full fold can tell (a corrupt frame, a ref key bound twice, ...).

    ``frame_no`` must be a frame of the run (the caller checked it against the clock).
    """
    dialect = conn.dialect.name
    count, low = run_sql(
        conn,
        "SELECT count(*), min(frame_no) FROM tt_frames WHERE run_id = :run AND frame_no <= :upto",
        {"run": run_id, "upto": frame_no},
    ).one()
    if not count or count != frame_no - low + 1:
        return None  # a missing frame: fold names it

    snap = Snapshot(run_id, -1)
    cut, largest = _fold_other_frames(conn, snap, frame_no)
    snap.frame_no = frame_no

    # One pass over the checkpoint frames, per attempt: every frame, visible or not, is
    # well-formed (fold checks each one); how many refs are visible, and their top sequence.
    refs = StoredRefs(run_id, frame_no, cut)
    visible, params = refs.after_cut()
    if dialect == "postgresql":
        saved = conn.begin_nested()  # a cast error must not abort the whole transaction
    try:
        groups = run_sql(
            conn,
            "SELECT f.node_id, f.iteration, f.attempt, count(*), "  # noqa: S608
            "sum(CASE WHEN f.node_id IS NULL OR f.iteration IS NULL "
            "OR f.attempt IS NULL OR f.sequence IS NULL OR f.content_hash IS NULL "
            "OR f.codec IS NULL OR f.version IS NULL OR f.purpose IS NULL "
            "OR length(f.content_hash) <> 64 OR f.version = 0 OR f.purpose = '' "
            f"OR {_data_ok(dialect)} = 0 THEN 1 ELSE 0 END), "
            f"sum(CASE WHEN {visible} THEN 1 ELSE 0 END), "
            f"max(CASE WHEN {visible} THEN f.sequence END) FROM tt_frames f "
            "WHERE f.run_id = :run AND f.kind = 'checkpoint' AND f.frame_no <= :upto "
            "GROUP BY f.node_id, f.iteration, f.attempt",
            dict(params, run=run_id, upto=frame_no),
        ).fetchall()
    except sa.exc.DataError:  # PostgreSQL could not read some data_json as JSON
        if dialect != "postgresql":
            raise
        saved.rollback()
        return None
    if dialect == "postgresql":
        saved.commit()
    total = 0
    for node_id, iteration, attempt, n, bad, shown, top in groups:
        if bad:
            return None  # fold names the frame
        total += n
        if not shown:
            continue  # reset away
        key = (node_id, iteration, attempt)
        if key not in snap.attempts:
            return None  # a ref no visible attempt owns: check_contents names it
        refs.per_attempt[key] = (shown, top + 1)
    if total + largest > _snapshot.MAX_SNAPSHOT_ROWS:
        return None  # maybe too large at some frame: fold decides, and says so
    snap.stored_refs = refs
    return snap
