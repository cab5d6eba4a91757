"""Run labels as the store's readers see them: a page of runs' labels in one statement, and
the conditions that keep the runs carrying given labels (``db.runs(labels=...)``).

Labels live in ``tt_run_labels`` (one row per key; see the table's docstring in the schema):
a run carrying ``case=retry`` is an ``EXISTS`` probe of its primary key ``(run_id, key)``, and
"every run labelled case=retry" an index range of ``tt_run_labels_value``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.store.backend import schema as S

CHUNK = 500
"""Run ids per ``IN`` list (well below every backend's bound on parameters)."""


def labels_of(conn: Connection, run_ids: Sequence[str]) -> dict[str, dict[str, str]]:
    """The labels of each run of ``run_ids`` that has some, sorted by key."""
    t = S.run_labels
    found: dict[str, dict[str, str]] = {}
    ids = sorted(set(run_ids))
    for start in range(0, len(ids), CHUNK):
        rows = conn.execute(
            sa.select(t.c.run_id, t.c.key, t.c.value)
            .where(t.c.run_id.in_(ids[start : start + CHUNK]))
            .order_by(t.c.run_id, t.c.key)
        )
        for run_id, key, value in rows:
            found.setdefault(run_id, {})[key] = value
    return found


def carrying(labels: Mapping[str, str]) -> list[sa.ColumnElement[bool]]:
    """Conditions on ``tt_runs`` that hold for the runs carrying every one of ``labels``
    (all of them: a run must carry each key with that value)."""
    t = S.run_labels
    return [
        sa.exists().where(t.c.run_id == S.runs.c.run_id, t.c.key == key, t.c.value == value)
        for key, value in sorted(labels.items())
    ]
