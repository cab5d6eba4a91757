"""Garbage collection of unreachable content, and integrity verification, in bounded pages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import content_hash
from smithers_tt.errors import StoreCorrupt
from smithers_tt.store import _schema as S
from smithers_tt.store._engine import Engine
from smithers_tt.store._records import check_limit, stored_json

Progress = Callable[[int], None]
"""Called after each page with the number of rows that page handled."""


@dataclass
class GcReport:
    """What a collection did: content rows deleted, their bytes, pages, and where it stopped."""

    deleted: int = 0
    bytes_freed: int = 0
    pages: int = 0
    cursor: str | None = None
    done: bool = False


RefKey = tuple[str, str, int, int, int]
"""``(run_id, node_id, iteration, attempt, sequence)`` of a checkpoint ref."""

MAX_FINDINGS = 10_000
"""Most refs or rows of one kind a verification lists."""

_ROW_PAGE = 1000
_JSON_COLUMNS = (
    (S.runs, ("input_json", "output_json", "graph_json")),
    (S.nodes, ("output_json",)),
    (S.frames, ("data_json",)),
)


@dataclass
class VerifyReport:
    """What a verification found: content rows checked, corrupt hashes, refs whose content is
    gone, refs that contradict their checkpoint frame, and rows whose JSON does not parse."""

    checked: int = 0
    corrupt: list[str] = field(default_factory=list)
    missing: list[RefKey] = field(default_factory=list)
    mismatched: list[RefKey] = field(default_factory=list)
    """Refs whose run has checkpoint frames for their key, none of which names the ref's
    content, codec, version and purpose."""
    damaged: list[str] = field(default_factory=list)
    """Rows with a JSON column that is not JSON, e.g. ``"tt_runs.input_json of run_id='r1'"``."""

    @property
    def ok(self) -> bool:
        """Whether nothing was found wrong."""
        return not (self.corrupt or self.missing or self.mismatched or self.damaged)


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
    :meth:`~smithers_tt.store._dialect.Dialect.skip_locked` (on PostgreSQL ``FOR UPDATE SKIP
    LOCKED``: content a publisher is upserting is skipped) and re-checks reachability in the
    deleting statement; on SQLite writers are serialised. ``max_pages`` bounds the work of one
    call; pass the returned ``cursor`` back to continue.
    """
    check_limit(page_size)
    c = S.contents
    report = GcReport(cursor=cursor)
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


def verify(
    engine: Engine, *, page_size: int = 200, progress: Progress | None = None
) -> VerifyReport:
    """Check every content row's SHA-256 and size, every ref's content, every ref against its
    run's checkpoint frames, and every JSON column of runs, nodes and frames, page by page."""
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
        for row in rows:
            data = bytes(row.data)
            if len(data) != row.size_bytes or content_hash(data) != row.content_hash:
                report.corrupt.append(row.content_hash)
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
    agrees = sa.and_(
        f.c.run_id == r.c.run_id,
        f.c.frame_no == r.c.frame_no,
        f.c.kind == "checkpoint",
        f.c.node_id == r.c.node_id,
        f.c.iteration == r.c.iteration,
        f.c.attempt == r.c.attempt,
        f.c.sequence == r.c.sequence,
    )
    has_frame = sa.and_(f.c.run_id == r.c.run_id, f.c.frame_no == r.c.frame_no)
    stmt = (
        sa.select(r.c.run_id, r.c.node_id, r.c.iteration, r.c.attempt, r.c.sequence)
        .where(sa.exists().where(has_frame), ~sa.exists().where(agrees))
        .order_by(r.c.run_id, r.c.node_id, r.c.iteration, r.c.attempt, r.c.sequence)
        .limit(MAX_FINDINGS)
    )
    rows = engine.transaction(lambda conn: conn.execute(stmt).all(), write=False)
    return [tuple(row) for row in rows]


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
