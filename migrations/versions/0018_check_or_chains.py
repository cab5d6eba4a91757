"""The four CHECK constraints that list values (``tt_runs.status``, ``tt_nodes.state``,
``tt_attempts.state``, ``tt_frames.kind``) written as ``OR``s of equalities instead of
``IN (...)``: the same values accepted, the same refused, every stored row kept as it is.

SQLite evaluates a CHECK's ``IN`` list by building a temporary table of its values for every
row written (``EXPLAIN`` shows ``OpenEphemeral`` inside the row loop, as for the partial
indexes 0012 rewrote): 77,500 frames inserted take about 2.6x as long as with no check, and
as long as with none when the check is a chain of ``OR``s. Every publish, attempt, node and
run update and every bulk frame write (undoing a rewind, materialising a fork) paid it.

SQLite takes 0007_pauses's documented shortcut (https://sqlite.org/lang_altertable.html,
"Making Other Kinds Of Table Schema Changes"): each table's CREATE statement is edited in
place and the schema version bumped, in this transaction. The stored rows satisfy the new
checks (they accept exactly the values of the old ones), so no table is rebuilt: rows,
indexes, foreign keys and their cascades stay as they are. PostgreSQL drops and adds each
constraint (it evaluates either form at the same cost; the same chain on both backends keeps
one definition, and a store upgraded and one made afresh the same).

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0018_check_or_chains"
down_revision = "0017_sweep_promotions"
branch_labels = None
depends_on = None

LISTS = [
    (
        "tt_runs",
        "tt_runs_status",
        "status",
        ("queued", "running", "finished", "failed", "cancelled", "interrupted", "paused"),
    ),
    (
        "tt_nodes",
        "tt_nodes_state",
        "state",
        ("pending", "running", "finished", "failed", "cancelled", "skipped", "cached"),
    ),
    (
        "tt_attempts",
        "tt_attempts_state",
        "state",
        ("in_progress", "finished", "failed", "cancelled", "interrupted", "reset"),
    ),
    (
        "tt_frames",
        "tt_frames_kind",
        "kind",
        (
            "run_created",
            "run_claimed",
            "run_finished",
            "run_failed",
            "run_cancelled",
            "cancel_requested",
            "attempt_started",
            "checkpoint",
            "attempt_finished",
            "node_state",
            "cache_hit",
            "forked",
            "reset",
            "run_paused",
            "run_continued",
            "run_released",
            "breakpoints_set",
        ),
    ),
]


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _or(column: str, values: tuple[str, ...]) -> str:
    return " OR ".join(f"{column} = {v!r}" for v in values)


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "sqlite":
        _sqlite(conn)
        return
    for table, name, column, values in LISTS:
        op.drop_constraint(name, table, type_="check")
        op.create_check_constraint(name, table, _or(column, values))


def _sqlite(conn: sa.Connection) -> None:
    version = conn.exec_driver_sql("PRAGMA schema_version").scalar_one()
    conn.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        for table, _name, column, values in LISTS:
            changed = conn.execute(
                sa.text(
                    "UPDATE sqlite_master SET sql = replace(sql, :old, :new) "
                    "WHERE type = 'table' AND name = :table AND instr(sql, :old) > 0"
                ),
                {"old": _in(column, values), "new": _or(column, values), "table": table},
            ).rowcount
            if changed != 1:
                raise RuntimeError(f"{table}: its CHECK constraint is not the one 0017 left")
        conn.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        conn.exec_driver_sql("PRAGMA writable_schema = OFF")
