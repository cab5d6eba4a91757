"""Breakpoints changed while a run is live: the history gets frame kind ``breakpoints_set``
(the run's breakpoints before and after nodes, set by a person while the run is queued,
running or paused; whoever executes the run reads the newest one before its next pause).

Only the CHECK constraint ``tt_frames.kind`` widens, and every stored row satisfies it
already. PostgreSQL drops and adds the constraint; SQLite takes 0007_pauses's documented
shortcut (https://sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema
Changes"): the table's CREATE statement is edited in place and the schema version bumped, in
this transaction.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_breakpoints"
down_revision = "0009_rewinds"
branch_labels = None
depends_on = None

FRAME_KINDS_0007 = (
    "'run_created', 'run_claimed', 'run_finished', 'run_failed', "
    "'run_cancelled', 'cancel_requested', 'attempt_started', 'checkpoint', "
    "'attempt_finished', 'node_state', 'cache_hit', 'forked', 'reset', "
    "'run_paused', 'run_continued', 'run_released'"
)
FRAME_KINDS = FRAME_KINDS_0007 + ", 'breakpoints_set'"
OLD = f"kind IN ({FRAME_KINDS_0007})"
NEW = f"kind IN ({FRAME_KINDS})"


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "sqlite":
        _sqlite(conn)
        return
    op.drop_constraint("tt_frames_kind", "tt_frames", type_="check")
    op.create_check_constraint("tt_frames_kind", "tt_frames", NEW)


def _sqlite(conn: sa.Connection) -> None:
    version = conn.exec_driver_sql("PRAGMA schema_version").scalar_one()
    conn.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        changed = conn.execute(
            sa.text(
                "UPDATE sqlite_master SET sql = replace(sql, :old, :new) "
                "WHERE type = 'table' AND name = 'tt_frames' AND instr(sql, :old) > 0"
            ),
            {"old": OLD, "new": NEW},
        ).rowcount
        if changed != 1:
            raise RuntimeError("tt_frames: its CHECK constraint is not the one 0007 left")
        conn.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        conn.exec_driver_sql("PRAGMA writable_schema = OFF")
