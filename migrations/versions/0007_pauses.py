"""Pauses: runs may be ``paused`` (breakpoints, questions to a person), and the history has
frames for a pause, a continue and a run given back to the queue.

Only two CHECK constraints widen: ``tt_runs.status`` and ``tt_frames.kind`` accept more
values, and every stored row satisfies both already. PostgreSQL drops and adds each
constraint. SQLite cannot alter a constraint, and rebuilding ``tt_runs`` would cascade the
delete of its old copy to every table that refers to it; it takes the documented shortcut for
changes that leave the stored rows as they are (https://sqlite.org/lang_altertable.html,
"Making Other Kinds Of Table Schema Changes"): the table's CREATE statement is edited in
place and the schema version bumped, in this transaction.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_pauses"
down_revision = "0006_alembic"
branch_labels = None
depends_on = None

RUN_STATUSES_0001 = "'queued', 'running', 'finished', 'failed', 'cancelled', 'interrupted'"
RUN_STATUSES = RUN_STATUSES_0001 + ", 'paused'"
FRAME_KINDS_0001 = (
    "'run_created', 'run_claimed', 'run_finished', 'run_failed', "
    "'run_cancelled', 'cancel_requested', 'attempt_started', 'checkpoint', "
    "'attempt_finished', 'node_state', 'cache_hit', 'forked', 'reset'"
)
FRAME_KINDS = FRAME_KINDS_0001 + ", 'run_paused', 'run_continued', 'run_released'"

WIDENED = [
    (
        "tt_runs",
        "tt_runs_status",
        f"status IN ({RUN_STATUSES_0001})",
        f"status IN ({RUN_STATUSES})",
    ),
    ("tt_frames", "tt_frames_kind", f"kind IN ({FRAME_KINDS_0001})", f"kind IN ({FRAME_KINDS})"),
]


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "sqlite":
        _sqlite(conn)
        return
    for table, name, _old, new in WIDENED:
        op.drop_constraint(name, table, type_="check")
        op.create_check_constraint(name, table, new)


def _sqlite(conn: sa.Connection) -> None:
    version = conn.exec_driver_sql("PRAGMA schema_version").scalar_one()
    conn.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        for table, _name, old, new in WIDENED:
            changed = conn.execute(
                sa.text(
                    "UPDATE sqlite_master SET sql = replace(sql, :old, :new) "
                    "WHERE type = 'table' AND name = :table AND instr(sql, :old) > 0"
                ),
                {"old": old, "new": new, "table": table},
            ).rowcount
            if changed != 1:
                raise RuntimeError(f"{table}: its CHECK constraint is not the one 0001 created")
        conn.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        conn.exec_driver_sql("PRAGMA writable_schema = OFF")
