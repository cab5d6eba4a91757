"""The model calls of a run, as its frames see them, and their totals per node and per run.

A call is visible at frame N of a run when the frame it was written with is (``frame_no <=
N``) and no rewind removed that frame (``rewind_id`` NULL). A LangGraph call still waiting for
the checkpoint its step makes (``PENDING_CALL_MARK`` in ``_schema``) is visible at the run's
newest frame only, as a call of that frame: a step that failed never makes its checkpoint, and
its tasks' calls were made (and paid for) all the same. A fork sees its parent's calls up
to the fork frame as it sees its parent's history (read there, never copied; a parent deleted
takes them along, as it takes the history): the same rule up the chain of forks. Each call
comes back as its :class:`~smithers_tt.store._records.ModelCallRecord`, ``run_id`` being the
run that recorded it and ``inherited`` telling the parent's apart.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt._model_calls import (
    REPLY_CODEC,
    REQUEST_CODEC,
    ModelCallRecord,
    RunCallTotals,
    totals_of,
)
from smithers_tt._prices import PriceTable
from smithers_tt.checkpoint import loads
from smithers_tt.errors import CheckpointCorrupt, RunNotFound
from smithers_tt.store.backend import Engine
from smithers_tt.store.backend import schema as S
from smithers_tt.store.reads._runs import RunReads

_COLUMNS = [c for c in S.model_calls.c if c.name not in ("rewind_id", "lg_key")]

MAX_FORK_DEPTH = 10_000
"""How far up a chain of forks the calls are read (a guard against a damaged parent link)."""


def _frame_time(conn: Connection, run_id: str, frame_no: int | None) -> int | None:
    """When frame ``frame_no`` of ``run_id`` was written (None for the newest frame)."""
    if frame_no is None:
        return None
    f = S.frames
    stmt = sa.select(f.c.created_at_ms).where(f.c.run_id == run_id, f.c.frame_no == frame_no)
    return conn.execute(stmt).scalar_one_or_none()


def calls_in(
    conn: Connection, run_id: str, frame_no: int | None = None, *, inherited: bool = True
) -> list[ModelCallRecord]:
    """The calls visible at frame ``frame_no`` (None: the newest) of ``run_id``, in the
    caller's read: the ancestors' first (oldest first), then by frame and position."""
    r, m = S.runs, S.model_calls
    chain: list[tuple[str, int | None]] = []
    current, upto = run_id, frame_no
    newest: int | None = None  # the run's clock
    while current is not None and len(chain) < MAX_FORK_DEPTH:
        row = conn.execute(
            sa.select(r.c.parent_run_id, r.c.parent_frame_no, r.c.clock).where(
                r.c.run_id == current
            )
        ).one_or_none()
        if row is None:
            if not chain:
                raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
            break  # a parent deleted: the fork keeps its own calls
        if not chain:
            newest = row.clock
        chain.append((current, upto))
        if not inherited or row.parent_frame_no is None:
            break
        current, upto = row.parent_run_id, row.parent_frame_no
    found: list[ModelCallRecord] = []
    for depth, (run, cutoff) in enumerate(reversed(chain)):
        stmt = sa.select(*_COLUMNS).where(m.c.run_id == run, m.c.rewind_id.is_(None))
        if cutoff is not None:
            stmt = stmt.where(m.c.frame_no <= cutoff)
        own = depth == len(chain) - 1
        found.extend(
            ModelCallRecord(**row._asdict(), inherited=not own)
            for row in conn.execute(stmt.order_by(m.c.frame_no, m.c.position))
        )
    if newest is not None and (frame_no is None or frame_no >= newest):
        found.extend(_waiting(conn, run_id, newest))
    return found


def _waiting(conn: Connection, run_id: str, newest: int) -> list[ModelCallRecord]:
    """The LangGraph calls of ``run_id`` waiting for their step's checkpoint, as calls of
    its newest frame ``newest`` (after that frame's own)."""
    m = S.model_calls
    stmt = (
        sa.select(*_COLUMNS)
        .where(
            m.c.run_id == run_id,
            m.c.frame_no == S.PENDING_CALL_FRAME,
            m.c.rewind_id.startswith(S.PENDING_CALL_MARK, autoescape=True),
        )
        .order_by(m.c.rewind_id, m.c.position)
    )
    return [
        ModelCallRecord(**dict(row._asdict(), frame_no=newest), inherited=False)
        for row in conn.execute(stmt)
    ]


class ModelCallReads:
    """The model calls of runs, each read in one read-only transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def model_calls(
        self, run_id: str, frame_no: int | None = None, *, inherited: bool = True
    ) -> list[ModelCallRecord]:
        """The model calls frame ``frame_no`` (default: the newest) of a run sees: a fork's
        parent's calls up to the fork frame first (``inherited``), then its own, by frame and
        position.

        Raises:
            RunNotFound: there is no such run.
        """
        return self.engine.transaction(
            lambda conn: calls_in(conn, run_id, frame_no, inherited=inherited), write=False
        )

    def model_call_exchange(self, call: ModelCallRecord) -> tuple[Any, Any]:
        """``(request messages, reply)`` of a call, read from their verified content (None
        for what was not recorded).

        Raises:
            CheckpointMissing: the content is gone (a damaged store).
            CheckpointCorrupt: it fails its integrity check, or is not a call's content.
        """
        reads = RunReads(self.engine)
        found = []
        for digest, codec in ((call.request_hash, REQUEST_CODEC), (call.reply_hash, REPLY_CODEC)):
            if digest is None:
                found.append(None)
                continue
            envelope = loads(reads.read_content(digest))
            if envelope.get("codec") != codec:
                raise CheckpointCorrupt(
                    f"content {digest[:12]} of model call {call.call_id} is not a {codec}",
                    content_hash=digest,
                )
            payload = envelope.get("payload")
            found.append(payload.get("messages") if codec == REQUEST_CODEC else payload)
        return found[0], found[1]

    def model_call_totals(
        self, run_id: str, prices: Any = None, frame_no: int | None = None
    ) -> RunCallTotals:
        """The totals of :meth:`calls_with_totals`."""
        return self.calls_with_totals(run_id, prices, frame_no)[1]

    def calls_with_totals(
        self, run_id: str, prices: Any = None, frame_no: int | None = None
    ) -> tuple[list[ModelCallRecord], RunCallTotals]:
        """The calls :meth:`model_calls` returns and, in the same read, their totals for the
        run and per node, with their cost by ``prices`` (a :class:`~smithers_tt.PriceTable`,
        a mapping or a file); ``wall_ms`` is the time of the attempts the calls share (the
        run's own and, for a fork, its ancestors' that made the calls it inherits; see
        :func:`~smithers_tt._model_calls.totals_of`), as far as they ended by the frame."""
        table = PriceTable.of(prices)

        def read(conn: Connection) -> tuple[list[ModelCallRecord], list[Any]]:
            calls = calls_in(conn, run_id, frame_no)
            if not calls:  # nothing to total: the run's attempts are not read
                return calls, []
            a = S.attempts
            columns = (a.c.node_id, a.c.iteration, a.c.attempt)
            times = (a.c.started_at_ms, a.c.finished_at_ms)
            made = {(c.run_id, c.node_id, c.iteration, c.attempt) for c in calls if c.inherited}
            until = _frame_time(conn, run_id, frame_no)
            spans: dict[tuple[Any, ...], tuple[Any, ...]] = {}
            for origin in [*sorted({key[0] for key in made}), run_id]:
                for row in conn.execute(sa.select(*columns, *times).where(a.c.run_id == origin)):
                    started, finished = row.started_at_ms, row.finished_at_ms
                    if origin == run_id and until is not None:  # the run as frame_no saw it:
                        if started > until:  # attempts not begun yet are not counted, and
                            continue
                        finished = until if finished is None else min(finished, until)
                    if origin == run_id or (origin, *row[:3]) in made:
                        # an attempt a fork copied from its parent (same key, same start) once
                        spans[(*row[:3], started)] = (origin, row.node_id, started, finished)
            return calls, list(spans.values())

        calls, spans = self.engine.transaction(read, write=False)
        return calls, totals_of(calls, table, spans)
