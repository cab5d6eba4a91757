"""What-if sweeps as stored: the sweep's row (``tt_sweeps``) and its branches' scores
(``tt_sweep_scores``).

A sweep is not a run: it has no clock and no frames, so its rows are written here in a
transaction of their own, as workers' rows are (``_claims``). Its branches are runs, made by
``fork`` through the ledger with the labels ``sweep=<id>`` and ``variant=<name>``; this
module only keeps what a label cannot hold (see ``backend/_schema.py``). A store offers it
as ``store.sweeps`` (a :class:`Sweeps`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import canonical_bytes
from smithers_tt.errors import InvalidArgument, SweepNotFound
from smithers_tt.store._records import now_ms
from smithers_tt.store.backend import Engine
from smithers_tt.store.backend import schema as S
from smithers_tt.store.reads import labels_of


@dataclass(frozen=True)
class SweepRecord:
    """One sweep as stored: the run and frame it forks, its workflow, its variants' edits
    (name -> edits, in the order given), whether it was cancelled, its branches' scores
    (variant -> score) as far as they were scored, and the branch promoted (if any)."""

    sweep_id: str
    run_id: str
    frame_no: int
    workflow: str
    variants: dict[str, dict[str, Any]]
    cancel_requested: bool
    created_at_ms: int
    scores: dict[str, Any]
    promoted_variant: str | None = None
    promoted_run_id: str | None = None
    promoted_at_ms: int | None = None
    discarded: dict[str, str] = field(default_factory=dict)
    """The branches asked to be deleted when one was promoted: variant -> run id."""
    driver: str | None = None
    """Who holds the lease of driving the sweep (its forks and branches), or None."""
    driver_until_ms: int | None = None
    """When that lease runs out unless renewed."""


class Sweeps:
    """The store's sweeps: ``store.sweeps.create(...)``, ``.get(id)``, ``.list()``,
    ``.cancel(id)``, ``.set_score(...)``, ``.promote(...)``, ``.set_driver(...)``,
    ``.branches_among(run_ids)``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(
        self,
        sweep_id: str,
        run_id: str,
        frame_no: int,
        workflow: str,
        variants: dict[str, dict[str, Any]],
    ) -> SweepRecord:
        """Record a new sweep; a sweep of that id already recorded with the same run, frame and
        variants is returned as it is (a retried or repeated call), one that differs is refused."""
        text = canonical_bytes([[name, edits] for name, edits in variants.items()]).decode()
        row = {
            "sweep_id": sweep_id, "run_id": run_id, "frame_no": frame_no, "workflow": workflow,
            "variants_json": text, "cancel_requested": False, "created_at_ms": now_ms(),
        }  # fmt: skip
        t = S.sweeps

        def work(conn: Connection) -> None:
            found = conn.execute(sa.select(t).where(t.c.sweep_id == sweep_id)).one_or_none()
            if found is None:
                conn.execute(t.insert().values(**row))
            elif (found.run_id, found.frame_no, found.variants_json) != (run_id, frame_no, text):
                raise InvalidArgument(
                    f"sweep {sweep_id!r} exists with other variants (or another run or frame); "
                    "reopen it with db.get_sweep, or choose another sweep id"
                )

        self.engine.transaction(work)
        return self.get(sweep_id)

    def get(self, sweep_id: str) -> SweepRecord:
        """The sweep ``sweep_id`` as stored, with the scores given so far.

        Raises:
            SweepNotFound: no sweep has that id.
        """
        t, s = S.sweeps, S.sweep_scores

        def work(conn: Connection) -> tuple[Any, list[Any]]:
            row = conn.execute(sa.select(t).where(t.c.sweep_id == sweep_id)).one_or_none()
            scores = conn.execute(sa.select(s).where(s.c.sweep_id == sweep_id)).all()
            return row, scores

        row, scores = self.engine.transaction(work, write=False)
        if row is None:
            raise SweepNotFound(
                f"no sweep {sweep_id!r}; db.sweeps() lists them, and on the command line "
                "`smithers-tt runs --wide` shows each branch's sweep=ID label"
            )
        return SweepRecord(
            row.sweep_id,
            row.run_id,
            row.frame_no,
            row.workflow,
            {name: edits for name, edits in json.loads(row.variants_json)},
            bool(row.cancel_requested),
            row.created_at_ms,
            {r.variant: json.loads(r.score_json) for r in scores},
            row.promoted_variant,
            row.promoted_run_id,
            row.promoted_at_ms,
            json.loads(row.discarded_json or "{}"),
            row.driver,
            row.driver_until_ms,
        )

    def list(self, *, run_id: str | None = None, limit: int = 100) -> list[str]:
        """The ids of the newest ``limit`` sweeps (of the run ``run_id`` when given), newest
        first."""
        if type(limit) is not int or not 1 <= limit <= 1000:
            raise InvalidArgument(f"limit must be an int from 1 to 1000, got {limit!r}")
        t = S.sweeps
        stmt = sa.select(t.c.sweep_id).order_by(t.c.created_at_ms.desc(), t.c.sweep_id.desc())
        if run_id is not None:
            stmt = stmt.where(t.c.run_id == run_id)
        rows = self.engine.transaction(
            lambda conn: conn.execute(stmt.limit(limit)).all(), write=False
        )
        return [r.sweep_id for r in rows]

    def cancel(self, sweep_id: str) -> None:
        """Mark the sweep cancelled: whoever runs it starts no branch from then on."""
        self._update(sweep_id, cancel_requested=True)

    def promote(self, sweep_id: str, variant: str, run_id: str, discarded: dict[str, str]) -> None:
        """Record ``variant`` (its branch ``run_id``) as the sweep's promoted branch, replacing
        an earlier choice, and ``discarded`` (variant -> run id) as the branches to delete
        (written before they are deleted; promoting again writes the same row: safe to
        retry)."""
        self._update(
            sweep_id,
            promoted_variant=variant,
            promoted_run_id=run_id,
            promoted_at_ms=now_ms(),
            discarded_json=canonical_bytes(discarded).decode() if discarded else None,
        )

    def set_driver(
        self, sweep_id: str, seen: str | None, driver: str | None, until_ms: int | None
    ) -> bool:
        """Make ``driver`` the sweep's driver until ``until_ms`` if its driver is still
        ``seen`` (a compare-and-set: of two processes that saw the same, one wins); ``seen``
        equal to ``driver`` renews a lease, ``driver=None`` releases it. Returns whether it
        was set."""
        t = S.sweeps
        held = t.c.driver.is_(None) if seen is None else t.c.driver == seen

        def work(conn: Connection) -> int:
            done = conn.execute(
                t.update()
                .where(t.c.sweep_id == sweep_id, held)
                .values(driver=driver, driver_until_ms=until_ms)
            )
            return int(done.rowcount)

        return bool(self.engine.transaction(work))

    def branches_among(
        self, run_ids: Sequence[str]
    ) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str | None]]]:
        """Which of ``run_ids`` carry a sweep's labels (run id -> (sweep id, variant)), and
        for each of those sweeps that exists, the run it forks and the variant it promoted
        (sweep id -> (run id, variant or None)): what the fork tree groups by. A run forked
        from a branch carries its labels too (forks inherit them): a branch is a run that
        carries them and was forked from the sweep's run."""
        t = S.sweeps

        def work(conn: Connection) -> Any:
            found = {
                run_id: (labels["sweep"], labels.get("variant", ""))
                for run_id, labels in labels_of(conn, run_ids).items()
                if "sweep" in labels
            }
            ids = sorted({sweep_id for sweep_id, _ in found.values()})
            rows = conn.execute(
                sa.select(t.c.sweep_id, t.c.run_id, t.c.promoted_variant).where(
                    t.c.sweep_id.in_(ids)
                )
            ).all()
            sweeps = {row.sweep_id: (row.run_id, row.promoted_variant) for row in rows}
            # A label sweep=X some user gave a run is no branch unless sweep X exists.
            return {k: v for k, v in found.items() if v[0] in sweeps}, sweeps

        return self.engine.transaction(work, write=False)

    def _update(self, sweep_id: str, **values: Any) -> None:
        """Set columns of the sweep's row, or raise :class:`SweepNotFound`."""
        t = S.sweeps

        def work(conn: Connection) -> int:
            done = conn.execute(t.update().where(t.c.sweep_id == sweep_id).values(**values))
            return int(done.rowcount)

        if not self.engine.transaction(work):
            raise SweepNotFound(f"no sweep {sweep_id!r}")

    def set_score(self, sweep_id: str, variant: str, run_id: str, score: Any) -> None:
        """Keep the score of a variant's branch (strict JSON: a number or a dict of numbers),
        replacing an earlier one (scoring again writes the same row: safe to retry)."""
        text = canonical_bytes(score).decode()
        s = S.sweep_scores
        values = {"run_id": run_id, "score_json": text, "scored_at_ms": now_ms()}
        key = (s.c.sweep_id == sweep_id) & (s.c.variant == variant)

        def work(conn: Connection) -> None:
            if not conn.execute(s.update().where(key).values(**values)).rowcount:
                conn.execute(s.insert().values(sweep_id=sweep_id, variant=variant, **values))

        self.engine.transaction(work)
