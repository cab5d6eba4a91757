"""The set-based reads of time travel: the state at frame N with its refs left in SQL.

:func:`smithers_tt.timetravel.state_at` (the decision) folds the frames other than
checkpoints in Python and asks these statements about the checkpoint frames, which never leave
the database: how many there are per attempt, whether each is well-formed (what ``fold``
checks), and which are visible at frame N (after the last ``reset`` of their node). The refs
stay described by a :class:`StoredRefs` (plain data: the cut per node) that rewind and fork
copy with one ``INSERT ... SELECT`` (see :mod:`smithers_tt.store.ledger._live`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.errors import SnapshotInvalid, StoreCorrupt
from smithers_tt.store._frames import Frame, frame_from_row, select_frames
from smithers_tt.store._records import VERIFY_HINT, CheckpointRef, stored_json
from smithers_tt.store.backend import Dialect, dialect_of
from smithers_tt.store.backend import schema as S

_FLOOR = -(2**62)
"""Below every frame number (base frames of a fork are negative)."""

AttemptKeyT = tuple[str, int, int]
"""``(node_id, iteration, attempt)`` of an attempt."""


def run_sql(conn: Connection, sql: str, params: dict[str, Any]) -> Any:
    """Execute ``sql`` (``:name`` placeholders) through the driver and return its cursor.

    Rows come back as plain tuples, without SQLAlchemy's per-row objects: these statements
    read up to a few hundred thousand rows. Placeholders become the driver's own; the SQL is
    written in the store's ``_travel*`` modules (no user input), values are always bound.
    """
    return conn.exec_driver_sql(dialect_of(conn).named(sql), params)


def plain_rows(conn: Connection, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every row of ``sql`` (see :func:`run_sql`) as the driver's own tuples, taken from its
    cursor: no per-row object of SQLAlchemy's (a few microseconds each, on 100,000 rows)."""
    return run_sql(conn, sql, params).cursor.fetchall()


def stored_sizes(conn: Connection, hashes: Sequence[str]) -> dict[str, int]:
    """``{content_hash: size_bytes}`` of the stored contents among ``hashes``."""
    c = S.contents
    found: dict[str, int] = {}
    for part in Dialect.chunks(hashes, 1):
        rows = conn.execute(
            sa.select(c.c.content_hash, c.c.size_bytes).where(c.c.content_hash.in_(list(part)))
        ).all()
        found.update((r.content_hash, r.size_bytes) for r in rows)
    return found


@dataclass
class StoredRefs:
    """The refs visible at ``frame_no`` of ``run_id``, left in its checkpoint frames (what
    the statements below select them by: plain data, no connection)."""

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


_REF_SELECT = (
    "SELECT f.node_id, f.iteration, f.attempt, f.sequence, f.content_hash, f.codec, "
    "f.version, f.purpose, f.agent_id, "
)
"""The columns of a visible ref (in :class:`CheckpointRef` field order, no run id); the
``created_at_ms`` expression of the dialect follows."""

_OTHER_COLUMNS = "frame_no, kind, node_id, iteration, attempt, state, data_json, created_at_ms"
"""What the fold reads of frames other than checkpoints (the ref columns are NULL or unused
there)."""


def _malformed(dialect: Dialect) -> str:
    """Per group of checkpoint frames ``f``: how many lack what ``fold`` needs of them
    (fields, a 64-digit hash, ``data`` it can read)."""
    return (
        "sum(CASE WHEN f.node_id IS NULL OR f.iteration IS NULL "
        "OR f.attempt IS NULL OR f.sequence IS NULL OR f.content_hash IS NULL "
        "OR f.codec IS NULL OR f.version IS NULL OR f.purpose IS NULL "
        "OR length(f.content_hash) <> 64 OR f.version = 0 OR f.purpose = '' "
        f"OR {dialect.frame_data_ok} = 0 THEN 1 ELSE 0 END)"
    )


def corrupt_frame(run_id: str, frame_no: int, kind: str, why: object) -> SnapshotInvalid:
    """The error for a frame whose ``data_json`` is not JSON at all."""
    return SnapshotInvalid(
        f"frame {frame_no} ({kind}) of run {run_id} is corrupt: its data is not JSON "
        f"({why}); nothing was changed; {VERIFY_HINT}",
        run_id=run_id,
        frame_no=frame_no,
    )


NodeKey = tuple[str, int]
AttemptKey = tuple[str, int, int]
RefKey = tuple[str, int, int, int]

KEYS_PER_STATEMENT = 200
"""Keys matched by one ``OR`` of equalities (``_keys``)."""


def _checked_frames(conn: Connection, run_id: str, stmt: sa.Select) -> list[Frame]:
    frames = []
    for row in conn.execute(stmt):
        try:
            frames.append(frame_from_row(row))
        except StoreCorrupt as error:  # data_json that is not JSON at all
            raise corrupt_frame(run_id, row.frame_no, row.kind, error.__cause__) from error
    return frames


def keys_match(columns: Sequence[sa.Column], keys: Sequence[tuple[Any, ...]]) -> Any:
    """``columns`` equal one of ``keys``: an ``OR`` of equalities, which both databases
    evaluate row by row cheaply and match against a primary key (a row-value ``IN`` makes
    SQLite scan)."""
    return sa.or_(*(sa.and_(*(c == v for c, v in zip(columns, key, strict=True))) for key in keys))


class TravelReads:
    """The reads of one time-travel transaction (part of :class:`~..._travel.Travel`): the
    state at frame N with its refs left in SQL, and the frames and live rows by key that a
    rewind changing only what it touches reads."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def content_sizes(self, hashes: Sequence[str]) -> dict[str, int]:
        """``{content_hash: size_bytes}`` of the stored contents among ``hashes``."""
        return stored_sizes(self._conn, hashes)

    def frames(self, run_id: str, upto: int | None = None) -> list[Frame]:
        """Every frame of ``run_id`` up to ``upto``, in order, as the full fold reads them.

        Raises:
            SnapshotInvalid: a frame's data is not JSON at all.
        """
        frames = []
        for row in self._conn.execute(select_frames(run_id, upto=upto)):
            try:
                frames.append(frame_from_row(row))
            except StoreCorrupt as error:  # data_json that is not JSON at all
                raise corrupt_frame(run_id, row.frame_no, row.kind, error.__cause__) from error
        return frames

    def frame_span(self, run_id: str, upto: int) -> tuple[int, int | None]:
        """How many frames ``run_id`` has at or below ``upto``, and the lowest number."""
        count, low = run_sql(
            self._conn,
            "SELECT count(*), min(frame_no) FROM tt_frames "
            "WHERE run_id = :run AND frame_no <= :upto",
            {"run": run_id, "upto": upto},
        ).one()
        return count, low

    def other_frames(self, run_id: str, upto: int) -> Iterator[tuple[Any, ...]]:
        """Every frame at or below ``upto`` except checkpoints, in order, as plain tuples
        ``(frame_no, kind, node_id, iteration, attempt, state, data, created_at_ms)`` with
        ``data`` parsed (no per-row objects: a large run has many of them).

        Each row's data is parsed as it is taken, so a fold that fails on an earlier frame
        reports that frame first.

        Raises:
            SnapshotInvalid: a frame's data is not JSON at all.
        """
        rows = plain_rows(
            self._conn,
            f"SELECT {_OTHER_COLUMNS} FROM tt_frames WHERE run_id = :run "  # noqa: S608
            "AND frame_no <= :upto AND kind <> 'checkpoint' ORDER BY frame_no",
            {"run": run_id, "upto": upto},
        )
        loads = orjson.loads
        for row in rows:
            data = row[6]
            if data is not None:
                try:
                    data = loads(data)
                except ValueError as error:
                    raise corrupt_frame(run_id, row[0], row[1], error) from error
            yield (*row[:6], data, row[7])

    def other_frame_keys(self, run_id: str, after: int, upto: int) -> list[tuple[Any, ...]]:
        """The frames above ``after`` and at or below ``upto`` except checkpoints, in order,
        as the driver's tuples ``(frame_no, kind, node_id, iteration, attempt)``: what a
        rewind needs of the frames it takes away (which rows they touch), nothing parsed."""
        return plain_rows(
            self._conn,
            "SELECT frame_no, kind, node_id, iteration, attempt FROM tt_frames "
            "WHERE run_id = :run AND frame_no > :after AND frame_no <= :upto "
            "AND kind <> 'checkpoint' ORDER BY frame_no",
            {"run": run_id, "after": after, "upto": upto},
        )

    def checkpoint_groups(self, refs: StoredRefs) -> list[tuple[Any, ...]] | None:
        """One pass over the checkpoint frames of ``refs.run_id`` up to ``refs.frame_no``,
        per attempt: ``(node_id, iteration, attempt, frames, malformed, visible, top
        sequence visible)``. A frame is malformed when it lacks what ``fold`` needs of it
        (fields, a 64-digit hash, ``data`` it can read); visible when after its node's cut.

        ``None`` when PostgreSQL could not read some ``data_json`` as JSON (the fold names it).
        """
        conn = self._conn
        dialect = dialect_of(conn)
        visible, params = refs.after_cut()
        return dialect.unless_cast_fails(
            conn,
            lambda: run_sql(
                conn,
                "SELECT f.node_id, f.iteration, f.attempt, count(*), "  # noqa: S608
                f"{_malformed(dialect)}, "
                f"sum(CASE WHEN {visible} THEN 1 ELSE 0 END), "
                f"max(CASE WHEN {visible} THEN f.sequence END) FROM tt_frames f "
                "WHERE f.run_id = :run AND f.kind = 'checkpoint' AND f.frame_no <= :upto "
                "GROUP BY f.node_id, f.iteration, f.attempt",
                dict(params, run=refs.run_id, upto=refs.frame_no),
            ).fetchall(),
        )

    def tail_checkpoints(self, run_id: str, after: int, upto: int) -> list[tuple[Any, ...]]:
        """One pass over the checkpoint frames of ``run_id`` above ``after`` and at or below
        ``upto``, per attempt: ``(node_id, iteration, attempt, frames, lowest frame number)``
        (frames a rewind takes away: not checked)."""
        return run_sql(
            self._conn,
            "SELECT f.node_id, f.iteration, f.attempt, count(*), min(f.frame_no) "
            "FROM tt_frames f "
            "WHERE f.run_id = :run AND f.kind = 'checkpoint' AND f.frame_no > :after "
            "AND f.frame_no <= :upto GROUP BY f.node_id, f.iteration, f.attempt",
            {"run": run_id, "after": after, "upto": upto},
        ).fetchall()

    def nodes_seen(self, run_id: str, upto: int, pairs: Sequence[NodeKey]) -> set[NodeKey]:
        """Of the ``(node_id, iteration)`` pairs, those with a frame of their own (not a
        checkpoint) at or below ``upto``: the only ones that can exist at that frame.

        One pass over the partial index of those frames, ``tt_frames_node_level``, which
        holds every column read (a few thousand rows come back for a 100,000-ref run, where
        probing each pair by key costs more on SQLite, which reads an ``OR`` of pairs as a
        scan). SQLite is told to use it (:meth:`Dialect.indexed_by`): left alone it reads
        every frame at or below ``upto`` by primary key, checkpoints too, and sorts the
        pairs (22 against 8 ms at the middle of a 155,000-frame run, load 0.5).
        """
        wanted = set(pairs)
        if not wanted:
            return set()
        rows = plain_rows(
            self._conn,
            # The table the index is on (a view takes no hint), with the view's clock bound.
            "SELECT DISTINCT node_id, iteration FROM tt_frame_rows"  # noqa: S608
            f"{dialect_of(self._conn).indexed_by('tt_frames_node_level')} WHERE run_id = :run "
            f"AND {S.NODE_LEVEL_WHERE} AND frame_no <= :upto AND frame_no <= "
            "(SELECT clock FROM tt_runs WHERE run_id = :run)",
            {"run": run_id, "upto": upto},
        )
        return {(row[0], row[1]) for row in rows} & wanted

    def stored_ref_rows(self, refs: StoredRefs) -> list[tuple[Any, ...]]:
        """The visible refs as tuples in :class:`CheckpointRef` field order (no run id)."""
        where, params = refs.where()
        return run_sql(
            self._conn,
            f"{_REF_SELECT}{dialect_of(self._conn).ref_created} FROM tt_frames f WHERE {where}",
            params,
        ).fetchall()

    def newest_stored_ref(self, refs: StoredRefs, node_id: str) -> CheckpointRef | None:
        """The node's newest visible ref (highest iteration, then attempt, then sequence)."""
        where, params = refs.where()
        row = run_sql(
            self._conn,
            f"{_REF_SELECT}{dialect_of(self._conn).ref_created} "
            f"FROM tt_frames f WHERE {where} AND f.node_id = :newest_node "
            "ORDER BY f.iteration DESC, f.attempt DESC, f.sequence DESC LIMIT 1",
            dict(params, newest_node=node_id),
        ).first()
        return None if row is None else CheckpointRef(refs.run_id, *row)

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
        return _checked_frames(self._conn, run_id, select_frames(run_id, after=after))

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
        found = _checked_frames(
            self._conn,
            run_id,
            select_frames(run_id, upto=upto).where(S.RUN_LEVEL_WHERE, f.c.kind == "reset"),
        )
        for node_id, iteration in sorted(set(pairs)):
            found += _checked_frames(
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
        for part in Dialect.chunks(nodes, 2, KEYS_PER_STATEMENT):
            found_nodes += self.live_rows(run_id, keys_match([n.c.node_id, n.c.iteration], part))[0]
        for part in Dialect.chunks(attempts, 3, KEYS_PER_STATEMENT):
            where = keys_match([a.c.node_id, a.c.iteration, a.c.attempt], part)
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
