"""Garbage collection of unreachable content, and integrity verification, in bounded pages."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import content_hash
from smithers_tt.errors import StoreCorrupt
from smithers_tt.store._records import check_limit, stored_json
from smithers_tt.store._ref_frame import agrees, frame_of
from smithers_tt.store.backend import Engine
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger import NEWEST_FIRST, KeptRewind, release_rewinds, undoable

Progress = Callable[[int], None]
"""Called after each page with the number of rows that page handled."""


@dataclass
class GcReport:
    """What a collection did: content rows deleted, their bytes, pages, where it stopped, and
    the kept rewinds it released (those no undo can reach any more)."""

    deleted: int = 0
    bytes_freed: int = 0
    pages: int = 0
    cursor: str | None = None
    done: bool = False
    rewinds_released: int = 0


RefKey = tuple[str, str, int, int, int]
"""``(run_id, node_id, iteration, attempt, sequence)`` of a checkpoint ref."""

FrameKey = tuple[str, int]
"""``(run_id, frame_no)`` of a frame."""

MAX_FINDINGS = 10_000
"""Most refs or rows of one kind a verification lists."""

_ROW_PAGE = 1000
_JSON_COLUMNS = tuple(
    (table, names)
    for table in S.metadata.sorted_tables
    if (names := tuple(c.name for c in table.columns if c.name.endswith("_json")))
)
"""Every table holding JSON and its JSON columns (named ``*_json``, each), from the schema: a
table added later is verified too."""


@dataclass
class VerifyReport:
    """What a verification found: content rows checked, corrupt hashes, refs whose content is
    gone, refs that contradict their checkpoint frame, checkpoint frames that contradict their
    content, and rows whose JSON does not parse."""

    checked: int = 0
    corrupt: list[str] = field(default_factory=list)
    missing: list[RefKey] = field(default_factory=list)
    mismatched: list[RefKey] = field(default_factory=list)
    """Refs whose frame is there but is not a checkpoint frame of their key (the rule reads
    refuse by: :mod:`._ref_frame`)."""
    miscoded: list[FrameKey] = field(default_factory=list)
    """Checkpoint frames whose codec or version is not the one their content holds."""
    missized: list[FrameKey] = field(default_factory=list)
    """Checkpoint frames whose ``size_bytes`` is not the size of their content."""
    damaged: list[str] = field(default_factory=list)
    """Rows with a JSON column that is not JSON, e.g. ``"tt_runs.input_json of run_id='r1'"``."""

    @property
    def ok(self) -> bool:
        """Whether nothing was found wrong."""
        return not (
            self.corrupt
            or self.missing
            or self.mismatched
            or self.miscoded
            or self.missized
            or self.damaged
        )


def _unreachable(c: sa.Table) -> sa.ColumnElement[bool]:
    return sa.and_(*(~sa.exists().where(pin == c.c.content_hash) for pin in S.CONTENT_PINS))


def collect_garbage(
    engine: Engine,
    *,
    page_size: int = 500,
    cursor: str | None = None,
    max_pages: int | None = None,
    progress: Progress | None = None,
) -> GcReport:
    """Delete content that nothing reaches, ``page_size`` rows per transaction.

    Safe while publishers run: each page locks its candidates with the dialect's
    :meth:`~smithers_tt.store.backend._dialect.Dialect.skip_locked` (on PostgreSQL ``FOR UPDATE SKIP
    LOCKED``: content a publisher is upserting is skipped) and re-checks reachability in the
    deleting statement; on SQLite writers are serialised. ``max_pages`` bounds the work of one
    call; pass the returned ``cursor`` back to continue.

    A collection that starts from the beginning (no ``cursor``) first releases the kept
    rewinds no undo can reach any more (see :func:`~._ledger_travel.undoable`), so that what
    only they pinned is collected.
    """
    check_limit(page_size)
    c = S.contents
    report = GcReport(cursor=cursor)
    if cursor is None:
        report.rewinds_released = engine.transaction(_release_unreachable_rewinds)
    lock = engine.backend.skip_locked

    def page(conn: Connection) -> tuple[list[str], int, str | None]:
        scan = sa.select(c.c.content_hash).order_by(c.c.content_hash).limit(page_size)
        if report.cursor is not None:
            scan = scan.where(c.c.content_hash > report.cursor)
        seen = list(conn.execute(scan).scalars())
        if not seen:
            return [], 0, None
        pick = sa.select(c.c.content_hash).where(c.c.content_hash.in_(seen), _unreachable(c))
        candidates = list(conn.execute(lock(pick)).scalars())
        freed = 0
        deleted: list[str] = []
        if candidates:
            rows = conn.execute(
                c.delete()
                .where(c.c.content_hash.in_(candidates), _unreachable(c))
                .returning(c.c.content_hash, c.c.size_bytes)
            ).all()
            deleted = [r.content_hash for r in rows]
            freed = sum(r.size_bytes for r in rows)
        return deleted, freed, seen[-1]

    while max_pages is None or report.pages < max_pages:
        deleted, freed, last = engine.transaction(page)
        report.pages += 1
        report.deleted += len(deleted)
        report.bytes_freed += freed
        if progress:
            progress(len(deleted))
        if last is None:
            report.cursor, report.done = None, True
            break
        report.cursor = last
    return report


def _release_unreachable_rewinds(conn: Connection) -> int:
    """Delete the kept rewinds (and their frames) that no undo can reach; return how many.

    One statement reads every kept rewind with its run's clock; a rewind found unreachable
    stays so (only new frames and rewinds come after it), so no lock is needed.
    """
    rw, r = S.rewinds, S.runs
    rows = conn.execute(
        sa.select(*rw.c, r.c.clock)
        .join(r, r.c.run_id == rw.c.run_id)
        .order_by(rw.c.run_id, *NEWEST_FIRST)
    ).all()
    gone: list[str] = []
    for _, group in itertools.groupby(rows, key=lambda row: row.run_id):
        mine = list(group)
        kept = [KeptRewind(*row[:-1]) for row in mine]
        gone += [k.rewind_id for k in kept[len(undoable(mine[0].clock, kept)) :]]
    release_rewinds(conn, gone)
    return len(gone)


def verify(
    engine: Engine, *, page_size: int = 200, progress: Progress | None = None
) -> VerifyReport:
    """Check every content row's SHA-256 and size, every checkpoint frame's codec, version and
    size against its content, every ref's content, every ref against its frame, and every
    JSON column of every table (runs, nodes, frames, sweeps, scores, audit ...), page by
    page."""
    check_limit(page_size)
    c = S.contents
    report = VerifyReport()
    after: str | None = None
    while True:
        stmt = (
            sa.select(c.c.content_hash, c.c.data, c.c.size_bytes)
            .order_by(c.c.content_hash)
            .limit(page_size)
        )
        if after is not None:
            stmt = stmt.where(c.c.content_hash > after)
        rows = engine.transaction(lambda conn, s=stmt: conn.execute(s).all(), write=False)
        held: dict[str, tuple[Any, Any, int]] = {}
        for row in rows:
            data = bytes(row.data)
            if len(data) != row.size_bytes or content_hash(data) != row.content_hash:
                report.corrupt.append(row.content_hash)
            else:
                held[row.content_hash] = (*_format(data), len(data))
        _check_frames(engine, held, report)
        report.checked += len(rows)
        if progress:
            progress(len(rows))
        if len(rows) < page_size:
            break
        after = rows[-1].content_hash
    # Refs whose content is gone (or whose frame is): only if foreign keys were bypassed or
    # rows deleted by hand; look anyway.
    r, fr = S.refs, S.frames
    orphan = (
        sa.select(r.c.run_id, r.c.node_id, r.c.iteration, r.c.attempt, r.c.sequence)
        .select_from(r.outerjoin(fr, (fr.c.run_id == r.c.run_id) & (fr.c.frame_no == r.c.frame_no)))
        .where(~sa.exists().where(c.c.content_hash == fr.c.content_hash))
        .limit(10_000)
    )
    missing = engine.transaction(lambda conn: conn.execute(orphan).all(), write=False)
    report.missing = [tuple(row) for row in missing]
    report.mismatched = _mismatched_refs(engine)
    report.damaged = _damaged_rows(engine)
    return report


def _mismatched_refs(engine: Engine) -> list[RefKey]:
    """Refs whose frame is not a checkpoint frame of their own key (a ref names its frame:
    only rows changed by hand contradict it)."""
    r, f = S.refs, S.frames
    stmt = (
        sa.select(r.c.run_id, r.c.node_id, r.c.iteration, r.c.attempt, r.c.sequence)
        .where(sa.exists().where(frame_of(r, f)), ~sa.exists().where(agrees(r, f)))
        .order_by(r.c.run_id, r.c.node_id, r.c.iteration, r.c.attempt, r.c.sequence)
        .limit(MAX_FINDINGS)
    )
    rows = engine.transaction(lambda conn: conn.execute(stmt).all(), write=False)
    return [tuple(row) for row in rows]


def _format(data: bytes) -> tuple[Any, Any]:
    """The codec and version a checkpoint's canonical bytes hold (intact bytes: their hash
    was checked)."""
    try:
        envelope = orjson.loads(data)
        return envelope.get("codec"), envelope.get("version")
    except (ValueError, AttributeError):
        return None, None


def _check_frames(
    engine: Engine, held: dict[str, tuple[Any, Any, int]], report: VerifyReport
) -> None:
    """Add to ``report`` the checkpoint frames of the contents ``held`` (hash: codec, version
    and size they hold) that name another codec, version or size: one grouped read per page
    of contents, then the frames of each disagreeing group."""
    if not held:
        return
    f = S.frame_rows  # the frames a rewind hid too: an undo shows them again
    shape = (f.c.content_hash, f.c.codec, f.c.version, f.c.size_bytes)
    groups = sa.select(*shape).where(f.c.kind == "checkpoint", f.c.content_hash.in_(list(held)))
    found = engine.transaction(
        lambda conn: conn.execute(groups.group_by(*shape)).all(), write=False
    )
    for digest, codec, version, size in found:
        *format_, real = held[digest]
        lists = [report.miscoded] if (codec, version) != tuple(format_) else []
        lists += [report.missized] if size is not None and size != real else []
        for into in lists:
            if len(into) >= MAX_FINDINGS:
                continue
            where = [
                f.c.kind == "checkpoint",
                f.c.content_hash == digest,
                f.c.codec.is_not_distinct_from(codec),
                f.c.version.is_not_distinct_from(version),
                f.c.size_bytes.is_not_distinct_from(size),
            ]
            stmt = (
                sa.select(f.c.run_id, f.c.frame_no)
                .where(*where)
                .order_by(f.c.run_id, f.c.frame_no)
                .limit(MAX_FINDINGS - len(into))
            )
            keys = engine.transaction(lambda conn, s=stmt: conn.execute(s).all(), write=False)
            into.extend(tuple(key) for key in keys)


def _damaged_rows(engine: Engine) -> list[str]:
    """Rows of the tables holding JSON whose JSON does not parse, page by page in key order."""
    found: list[str] = []
    for table, names in _JSON_COLUMNS:
        key = list(table.primary_key.columns)
        after: tuple | None = None
        while len(found) < MAX_FINDINGS:
            stmt = sa.select(*key, *(table.c[n] for n in names)).order_by(*key).limit(_ROW_PAGE)
            if after is not None:
                stmt = stmt.where(sa.tuple_(*key) > sa.tuple_(*after))
            rows = engine.transaction(lambda conn, s=stmt: conn.execute(s).all(), write=False)
            for row in rows:
                where = ", ".join(f"{c.name}={v!r}" for c, v in zip(key, row, strict=False))
                for index, name in enumerate(names, start=len(key)):
                    try:
                        stored_json(row[index], name)
                    except StoreCorrupt:
                        found.append(f"{table.name}.{name} of {where}")
            if len(rows) < _ROW_PAGE:
                break
            after = tuple(rows[-1][: len(key)])
    return found[:MAX_FINDINGS]
