"""What failure triage reads: every failure the store knows of, one light row each.

Three kinds of failure, newest first, in one read-only transaction:

* ``attempt``: a failed attempt, in any run (a run that finished after a retry included);
* ``run``: a failed run with no failed attempt of its own (it failed outside its nodes:
  a bad input, a changed workflow, a refused resume);
* ``stuck``: a run still ``running`` whose owner has not been heard of since ``stuck_before``
  (its heartbeat, or its last change when it has none), with the node it was in, if any.

A fork by reference shows its parent's failed attempts in its snapshots but holds none of its
own: each failure is read once, where it happened.
"""

from __future__ import annotations

from typing import NamedTuple

import sqlalchemy as sa

from smithers_tt.store.backend import Engine
from smithers_tt.store.backend import schema as S

__all__ = ["FailureRow", "failure_rows"]


class FailureRow(NamedTuple):
    """One failure as stored (see the module's docstring for the kinds)."""

    kind: str
    run_id: str
    workflow: str
    run_status: str
    node_id: str | None
    iteration: int | None
    attempt: int | None
    error_code: str | None
    error: str | None
    at_ms: int


def failure_rows(
    engine: Engine,
    *,
    stuck_before_ms: int,
    since_ms: int | None = None,
    workflow: str | None = None,
    limit: int = 100_000,
) -> tuple[list[FailureRow], bool]:
    """Up to ``limit`` failures, newest first, with whether there were more; ``since_ms`` and
    ``workflow`` narrow them."""
    r, a = S.runs, S.attempts
    failed_at = sa.func.coalesce(a.c.finished_at_ms, a.c.started_at_ms)
    failed = sa.select(
        sa.literal("attempt").label("kind"),
        a.c.run_id,
        r.c.workflow,
        r.c.status,
        a.c.node_id,
        a.c.iteration,
        a.c.attempt,
        a.c.error_code,
        a.c.error,
        failed_at.label("at_ms"),
    ).select_from(a.join(r, r.c.run_id == a.c.run_id))
    failed = failed.where(a.c.state == "failed")
    own = sa.exists().where(a.c.run_id == r.c.run_id, a.c.state == "failed")
    run_level = sa.select(
        sa.literal("run").label("kind"),
        r.c.run_id,
        r.c.workflow,
        r.c.status,
        sa.null(),
        sa.null(),
        sa.null(),
        sa.null(),
        r.c.error,
        r.c.updated_at_ms.label("at_ms"),
    ).where(r.c.status == "failed", ~own)
    heard = sa.func.coalesce(r.c.heartbeat_at_ms, r.c.updated_at_ms)
    open_attempt = a.alias("open_attempt")
    stuck = (
        sa.select(
            sa.literal("stuck").label("kind"),
            r.c.run_id,
            r.c.workflow,
            r.c.status,
            open_attempt.c.node_id,
            open_attempt.c.iteration,
            open_attempt.c.attempt,
            sa.null(),
            sa.null(),
            heard.label("at_ms"),
        )
        .select_from(
            r.outerjoin(
                open_attempt,
                (open_attempt.c.run_id == r.c.run_id) & (open_attempt.c.state == "in_progress"),
            )
        )
        .where(r.c.status == "running", heard < stuck_before_ms)
    )
    parts = [
        _narrowed(part, at, r, since_ms, workflow)
        for part, at in ((failed, failed_at), (run_level, r.c.updated_at_ms), (stuck, heard))
    ]
    union = sa.union_all(*parts).subquery()
    stmt = sa.select(union).order_by(union.c.at_ms.desc(), union.c.run_id).limit(limit + 1)
    found = engine.transaction(lambda conn: conn.execute(stmt).fetchall(), write=False)
    rows = [
        FailureRow(
            str(k),
            str(run),
            str(wf),
            str(status),
            node,
            None if it is None else int(it),
            None if att is None else int(att),
            code,
            error,
            int(at),
        )
        for k, run, wf, status, node, it, att, code, error, at in found[:limit]
    ]
    return rows, len(found) > limit


def _narrowed(
    stmt: sa.Select, at: sa.ColumnElement, runs: sa.Table, since_ms: int | None, wf: str | None
) -> sa.Select:
    if since_ms is not None:
        stmt = stmt.where(at >= since_ms)
    if wf is not None:
        stmt = stmt.where(runs.c.workflow == wf)
    return stmt
