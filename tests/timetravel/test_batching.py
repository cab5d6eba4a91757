"""Bulk work is batched: rewinding 10,000 refs, or materialising a fork of them, takes a
bounded handful of statements, not a few per row; a fork by reference takes a few in all."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.timetravel import materialize
from tests.timetravel._support import build_bulk_run, compact_snapshot, compact_state, count

REFS = 10_000
MAX_STATEMENTS = 100


def test_fork_and_rewind_of_10000_refs_take_a_bounded_number_of_statements(
    db: st.Database,
) -> None:
    run_id = build_bulk_run(db, nodes=100, refs_per_node=REFS // 100)
    clock = db.store.get_run(run_id).clock
    target = clock - 2  # every ref is visible there
    at = db.snapshot(run_id, target)
    assert len(at.refs) == REFS
    statements: list[str] = []

    def on_execute(*args: Any) -> None:
        statements.append(args[2])

    sa.event.listen(db.engine.sa, "before_cursor_execute", on_execute)
    try:
        child = db.fork(run_id, target)
        forked = len(statements)
        statements.clear()
        materialize(db.store, child.id)  # the fork's own copy of its 10,000 refs
        materialized = len(statements)
        statements.clear()
        db.rewind(run_id, target, confirm=True)
        rewound = len(statements)
    finally:
        sa.event.remove(db.engine.sa, "before_cursor_execute", on_execute)

    assert forked < 20, f"a fork by reference of {REFS} refs took {forked} statements"
    assert materialized < MAX_STATEMENTS, f"materialising {REFS} refs took {materialized}"
    assert rewound < MAX_STATEMENTS, f"rewind of {REFS} refs took {rewound} statements"
    # ... and did the work.
    assert count(db, "tt_checkpoint_refs", "run_id = :r", r=child.id) == REFS
    assert compact_state(db, run_id) == compact_snapshot(
        at, clock=target, frames=(target + 1, target)
    )
