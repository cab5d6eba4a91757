"""The statements of history retention: one page of old runs deleted (with an audit row
each), how many old runs wait for their forks, and why chosen runs were kept.

Which runs may go and in what order pages are taken is described in
:mod:`smithers_tt.timetravel._retention`; the conditions a run must meet are checked again by
the deleting statement itself, so a run that changed since the page was read stays.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.store._records import now_ms
from smithers_tt.store.backend import Engine
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger._live import audit_row, insert_rows
from smithers_tt.store.ledger._travel import delete_runs

_CHILD = S.runs.alias("child")


def _chosen(
    statuses: Sequence[str], cutoff_ms: int, run_ids: Sequence[str] | None
) -> list[sa.ColumnElement[bool]]:
    """Old by status and age (and, when ``run_ids`` is given, one of those runs)."""
    r = S.runs
    conditions = [r.c.status.in_(statuses), r.c.updated_at_ms < cutoff_ms]
    if run_ids is not None:
        conditions.append(r.c.run_id.in_(list(run_ids)))
    return conditions


def _old(
    statuses: Sequence[str],
    cutoff_ms: int,
    keep_forks: bool,
    now: int,
    run_ids: Sequence[str] | None = None,
) -> sa.ColumnElement[bool]:
    """Conditions a run must meet to go (checked again by the deleting statement)."""
    r = S.runs
    conditions = [
        *_chosen(statuses, cutoff_ms, run_ids),
        sa.or_(r.c.lease_owner.is_(None), r.c.lease_until_ms <= now),
    ]
    if keep_forks:
        conditions.append(~sa.exists().where(_CHILD.c.parent_run_id == r.c.run_id))
    else:  # a fork by reference reads its parent's frames: it is materialised first
        conditions.append(~sa.exists().where(_inheriting(r)))
    return sa.and_(*conditions)


def _inheriting(r: sa.Table) -> sa.ColumnElement[bool]:
    return sa.and_(_CHILD.c.parent_run_id == r.c.run_id, _CHILD.c.inherits.is_(True))


def inheriting_forks_of_old(
    engine: Engine,
    *,
    statuses: Sequence[str],
    cutoff_ms: int,
    run_ids: Sequence[str] | None = None,
    limit: int = 1000,
) -> list[str]:
    """Forks by reference (not materialised) whose parent is old by status and age (and one
    of ``run_ids``, when given): what a prune that does not keep forks materialises before
    it deletes their parents."""
    r = S.runs
    stmt = (
        sa.select(_CHILD.c.run_id)
        .join(r, _inheriting(r))
        .where(*_chosen(statuses, cutoff_ms, run_ids))
        .order_by(_CHILD.c.run_id)
        .limit(limit)
    )
    return engine.transaction(lambda conn: list(conn.execute(stmt).scalars()), write=False)


def prune_page(
    engine: Engine,
    *,
    statuses: Sequence[str],
    cutoff_ms: int,
    keep_forks: bool,
    page_size: int,
    after: str | None,
    run_ids: Sequence[str] | None = None,
) -> tuple[list[str], str | None]:
    """Delete, in one transaction, up to ``page_size`` old runs with ids below ``after``.

    A run is old when its status is one of ``statuses``, it has not changed since
    ``cutoff_ms``, no live lease holds it and (with ``keep_forks``) no run was forked from it;
    with ``run_ids``, only those runs are looked at.
    Returns the deleted ids (sorted) and the last id scanned, to go on from (``None``: no old
    run is left below ``after``). Every deleted run leaves a ``prune`` row in the audit table.
    """
    r = S.runs

    def page(conn: Connection) -> tuple[list[str], str | None]:
        now = now_ms()
        old = _old(statuses, cutoff_ms, keep_forks, now, run_ids)
        # Newest ids first: forks are younger than their parents (ids start with their
        # creation time), so a parent usually comes after its last fork went, in one pass.
        scan = sa.select(r.c.run_id).where(old).order_by(r.c.run_id.desc()).limit(page_size)
        if after is not None:
            scan = scan.where(r.c.run_id < after)
        ids = list(conn.execute(scan).scalars())
        if not ids:
            return [], None
        # Lock them first: a fork being made holds its parent's row until it commits, so the
        # delete below (a new statement: it sees that fork) keeps a parent a fork now reads.
        conn.execute(sa.select(r.c.run_id).where(r.c.run_id.in_(ids)).with_for_update())
        gone = delete_runs(
            conn,
            ids,
            old,
            returning=(r.c.status, r.c.updated_at_ms, r.c.parent_run_id, r.c.clock),
        )
        insert_rows(
            conn,
            S.audit,
            [
                audit_row(
                    row.run_id,
                    "prune",
                    row.clock,
                    None,
                    {
                        "status": row.status,
                        "updated_at_ms": row.updated_at_ms,
                        "parent_run_id": row.parent_run_id,
                        "cutoff_ms": cutoff_ms,
                    },
                    now,
                )
                for row in gone
            ],
        )
        return sorted(row.run_id for row in gone), ids[-1]

    return engine.transaction(page)


def count_kept_for_forks(
    engine: Engine,
    *,
    statuses: Sequence[str],
    cutoff_ms: int,
    run_ids: Sequence[str] | None = None,
) -> int:
    """How many runs are old by status and age (and among ``run_ids``, when given) but still
    have runs forked from them."""
    waiting = sa.and_(
        *_chosen(statuses, cutoff_ms, run_ids),
        sa.exists().where(_CHILD.c.parent_run_id == S.runs.c.run_id),
    )
    return engine.transaction(
        lambda conn: conn.execute(sa.select(sa.func.count()).where(waiting)).scalar_one(),
        write=False,
    )


def why_kept(
    engine: Engine,
    run_ids: Sequence[str],
    *,
    statuses: Sequence[str],
    cutoff_ms: int,
    keep_forks: bool,
) -> dict[str, str]:
    """Why each of ``run_ids`` that still exists was not deleted, in words (runs that do not
    exist are left out): the first of the conditions of :func:`prune_page` it fails."""
    r = S.runs
    forks = (
        sa.select(sa.func.count())
        .where(_CHILD.c.parent_run_id == r.c.run_id)
        .scalar_subquery()
        .label("forks")
    )
    stmt = sa.select(
        r.c.run_id, r.c.status, r.c.updated_at_ms, r.c.lease_owner, r.c.lease_until_ms, forks
    ).where(r.c.run_id.in_(list(run_ids)))
    rows = engine.transaction(lambda conn: conn.execute(stmt).all(), write=False)
    now = now_ms()
    kept: dict[str, str] = {}
    for run_id, status, updated_at_ms, lease_owner, lease_until_ms, children in rows:
        if status not in statuses:
            kept[run_id] = f"it is {status}: only {', '.join(statuses)} runs are deleted"
        elif updated_at_ms >= cutoff_ms:
            kept[run_id] = "it changed after the cutoff"
        elif lease_owner is not None and lease_until_ms > now:
            kept[run_id] = "a rewind or another time-travel operation holds it"
        elif keep_forks and children:
            kept[run_id] = f"{children} run(s) forked from it remain: delete them first"
        else:
            kept[run_id] = "it changed while it was being deleted"
    return kept
