"""A rewind's cut kept in place: ``tt_frames`` becomes a view of ``tt_frame_rows``.

A rewind to the middle of a long run moved every frame above its cut into
``tt_rewound_frames`` (a copy and a delete of tens of thousands of rows) and its undo moved
them back. Now the frames stay where they are: the table is renamed ``tt_frame_rows`` and
``tt_frames`` is a view of its rows at or below their run's ``clock``, so a rewind hides the
frames above its cut by setting the clock back (as it did already) and an undo shows them
again by setting it forward. ``tt_runs.hides`` (a new nullable column) says a run may have
frames above its clock; the run's next frame deletes them first.

Every index keeps its name and rows. The view is written per dialect: SQLite flattens a
correlated scalar subquery into the queries that read the view (a join there would keep it
from being flattened into the right side of a ``LEFT JOIN``); PostgreSQL pulls a join up
into the outer query (a correlated subquery would run once per frame row).

The frames of every rewind an undo can still reach are put back from ``tt_rewound_frames``
(they number above their run's clock, so they are hidden, and ``hides`` is set); those of a
rewind no undo can reach (frames were written on top of it) were never to be seen again and
are dropped with the table (their ``tt_rewinds`` rows stay until garbage collection releases
them, as before).

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0020_cut_in_place"
down_revision = "0019_langgraph_calls"
branch_labels = None
depends_on = None

COLUMNS = (
    "run_id, frame_no, kind, node_id, iteration, attempt, sequence, state, content_hash, "
    "codec, version, purpose, agent_id, data_json, created_at_ms, size_bytes"
)
F_COLUMNS = ", ".join(f"f.{name.strip()}" for name in COLUMNS.split(","))

VIEW = {
    "sqlite": (
        f"CREATE VIEW tt_frames AS SELECT {F_COLUMNS} FROM tt_frame_rows f "  # noqa: S608
        "WHERE f.frame_no <= (SELECT r.clock FROM tt_runs r WHERE r.run_id = f.run_id)"
    ),
    "postgresql": (
        f"CREATE VIEW tt_frames AS SELECT {F_COLUMNS} FROM tt_frame_rows f "  # noqa: S608
        "JOIN tt_runs r ON r.run_id = f.run_id WHERE f.frame_no <= r.clock"
    ),
}


def _reachable(bind: sa.Connection) -> list[tuple[str, str]]:
    """``(rewind_id, run_id)`` of every kept rewind an undo can reach: newest first from the
    run's clock, each rewound to the frame the run stands at (``undoable`` of 0019's store)."""
    rows = bind.execute(
        sa.text(
            "SELECT w.rewind_id, w.run_id, w.from_clock, w.to_frame, r.clock "
            "FROM tt_rewinds w JOIN tt_runs r ON r.run_id = w.run_id "
            "ORDER BY w.run_id, w.created_at_ms DESC, w.from_clock ASC"
        )
    ).all()
    reach: list[tuple[str, str]] = []
    run, clock = None, None  # the run being walked, and the frame undo stands at (None: out)
    for rewind_id, run_id, from_clock, to_frame, run_clock in rows:
        if run_id != run:
            run, clock = run_id, run_clock
        if to_frame == clock:
            reach.append((rewind_id, run_id))
            clock = from_clock
        else:
            clock = None  # out of reach: so is every older rewind of the run
    return reach


def upgrade() -> None:
    bind = op.get_bind()
    op.add_column("tt_runs", sa.Column("hides", sa.Boolean, nullable=True))
    op.rename_table("tt_frames", "tt_frame_rows")
    for rewind_id, run_id in _reachable(bind):
        bind.execute(
            sa.text(
                f"INSERT INTO tt_frame_rows ({COLUMNS}) SELECT {COLUMNS} "  # noqa: S608
                "FROM tt_rewound_frames WHERE rewind_id = :rewind"
            ),
            {"rewind": rewind_id},
        )
        bind.execute(
            sa.text("UPDATE tt_runs SET hides = :yes WHERE run_id = :run"),
            {"yes": True, "run": run_id},
        )
    op.drop_table("tt_rewound_frames")
    bind.execute(sa.text(VIEW[bind.dialect.name]))
