"""Run ids as people type and read them: a unique prefix resolved to its run, and each run's
shortest unique prefix (what the command line and the widgets show).

Generated ids are 21 characters that start alike for runs made close together, so people
copy a prefix. One resolver, :func:`resolve_run_id`, answers for every entry point that takes
a run id (``Database``'s methods, the command line): the full id of the one run whose id is
``text`` or starts with it.

The read is a range of the primary key, ``text <= run_id < text'`` (``text'``: ``text`` with
its last character's code point one up), then an exact prefix check in Python: no ``LIKE``,
so ``_`` and ``%`` in an id are plain characters with nothing to escape, and the primary key's
index answers on both backends (SQLite's ``LIKE`` is case-insensitive and PostgreSQL's needs a
``C`` collation or a pattern index to use an index). SQLite and PostgreSQL databases whose
collation is ``C`` or ``C.UTF-8`` order ids by code point, as the range assumes; under a
language collation (``en_US``) the range may miss an id whose prefix ends in punctuation:
give the full id there (an exact id is always found).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.errors import AmbiguousRunId, RunNotFound
from smithers_tt.store.backend import Engine
from smithers_tt.store.backend import schema as S

MIN_PREFIX = 6
"""Fewest characters of a run id prefix that is accepted for the id (a full id may be shorter)."""

MIN_SHOWN = 8
"""Fewest characters of a run id shown shortened."""

CANDIDATES_SHOWN = 10
"""Most runs an ambiguous prefix's error lists."""


@dataclass(frozen=True, slots=True)
class RunCandidate:
    """A run an id prefix may mean: its id, workflow and status."""

    run_id: str
    workflow: str
    status: str

    def __str__(self) -> str:
        return f"{self.run_id} {self.workflow} {self.status}"


def _above(prefix: str) -> str | None:
    """The smallest string above every string that starts with ``prefix`` (code point order),
    or None when there is none (the last character is the highest code point)."""
    last = ord(prefix[-1])
    if last == sys.maxunicode:
        return None
    up = last + 1 if last + 1 != 0xD800 else 0xE000  # step over the surrogates
    return prefix[:-1] + chr(up)


def starting_with(conn: Connection, prefix: str, limit: int) -> list[RunCandidate]:
    """Up to ``limit`` runs whose id starts with ``prefix``, by id (the run whose id is
    ``prefix`` itself first)."""
    r = S.runs
    stmt = sa.select(r.c.run_id, r.c.workflow, r.c.status).where(r.c.run_id >= prefix)
    above = _above(prefix)
    if above is not None:
        stmt = stmt.where(r.c.run_id < above)
    rows = conn.execute(stmt.order_by(r.c.run_id).limit(limit)).all()
    return [RunCandidate(*row) for row in rows if row[0].startswith(prefix)]


def resolve_run_id(engine: Engine, text: str) -> str:
    """The full id of the run ``text`` names: its id, or a prefix of at least
    :data:`MIN_PREFIX` characters that no other run's id starts with.

    Raises:
        RunNotFound: no run has this id, or starts with it; or ``text`` is shorter than
            :data:`MIN_PREFIX` characters and not a full id.
        AmbiguousRunId: several runs start with ``text``; the error lists them.
    """
    short = len(text) < MIN_PREFIX
    limit = 1 if short else CANDIDATES_SHOWN + 1
    found = engine.transaction(lambda conn: starting_with(conn, text, limit), write=False)
    if found and found[0].run_id == text:
        return text
    if short:
        raise RunNotFound(
            f"no run {text!r}; a run id prefix needs at least {MIN_PREFIX} characters "
            "(list runs with `smithers-tt runs`)",
            run_id=text,
        )
    if not found:
        raise RunNotFound(
            f"no run {text!r} and no run id starts with it; list runs with `smithers-tt runs`",
            run_id=text,
        )
    if len(found) > 1:
        listed = [str(c) for c in found[:CANDIDATES_SHOWN]]
        more = " (and more)" if len(found) > CANDIDATES_SHOWN else ""
        raise AmbiguousRunId(
            f"run id prefix {text!r} is ambiguous: {len(found[:CANDIDATES_SHOWN])}{more} runs "
            f"start with it: {'; '.join(listed)}. Type more characters",
            run_id=text,
            candidates=listed,
        )
    return found[0].run_id


def _common(a: str | None, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b`` (0 when ``a`` is None)."""
    if a is None:
        return 0
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def short_run_ids(engine: Engine, run_ids: Sequence[str]) -> dict[str, str]:
    """Each id of ``run_ids`` shortened to its shortest prefix that no other stored run's id
    starts with, at least :data:`MIN_SHOWN` characters (the whole id when that is not
    shorter). One read: each id's neighbours in the primary key, two index probes apiece."""
    r, before, after = S.runs, S.runs.alias("before"), S.runs.alias("after")
    ids = sorted(set(run_ids))

    def read(conn: Connection) -> list[tuple[str, str | None, str | None]]:
        rows: list[tuple[str, str | None, str | None]] = []
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            lower = (
                sa.select(sa.func.max(before.c.run_id))
                .where(before.c.run_id < r.c.run_id)
                .scalar_subquery()
            )
            upper = (
                sa.select(sa.func.min(after.c.run_id))
                .where(after.c.run_id > r.c.run_id)
                .scalar_subquery()
            )
            stmt = sa.select(r.c.run_id, lower, upper).where(r.c.run_id.in_(part))
            rows += [tuple(row) for row in conn.execute(stmt)]  # type: ignore[misc]
        return rows

    shown = {run_id: run_id for run_id in ids}  # ids not stored (any more) stay whole
    for run_id, lower, upper in engine.transaction(read, write=False) if ids else []:
        n = max(MIN_SHOWN, _common(lower, run_id) + 1, _common(upper, run_id) + 1)
        shown[run_id] = run_id[:n]
    return shown
