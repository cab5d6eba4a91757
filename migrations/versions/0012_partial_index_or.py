"""The two partial indexes of 0011 on SQLite, their predicates written as ``OR``s of
equalities instead of ``kind IN (...)``: same rows, same queries served.

SQLite evaluates a partial index's ``IN`` list by building a temporary table of its values
for every row written to or deleted from ``tt_frames`` (``EXPLAIN`` shows ``OpenEphemeral``
inside the row loop), which made deleting the 77,500 frames a rewind to the middle of a
155,000-frame run takes away about 1.5x as slow as without these indexes; a chain of ``OR``s
is a few comparisons. The queries that use the indexes write the same chain (SQLite matches
a partial index's predicate literally). PostgreSQL keeps its indexes as 0011 made them: it
evaluates the predicate without that cost, and proves ``kind IN (...)`` from the chain.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_partial_index_or"
down_revision = "0011_fork_by_reference"
branch_labels = None
depends_on = None

RUN_LEVEL = (
    "(kind = 'run_created' OR kind = 'run_claimed' OR kind = 'run_finished' "
    "OR kind = 'run_failed' OR kind = 'run_cancelled' OR kind = 'forked' OR kind = 'reset' "
    "OR kind = 'run_paused' OR kind = 'run_continued' OR kind = 'run_released')"
)
NODE_LEVEL = (
    "(kind = 'attempt_started' OR kind = 'attempt_finished' OR kind = 'node_state' "
    "OR kind = 'cache_hit')"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for name, columns, where in (
        ("tt_frames_run_level", ["run_id", "frame_no"], RUN_LEVEL),
        ("tt_frames_node_level", ["run_id", "node_id", "iteration", "frame_no"], NODE_LEVEL),
    ):
        op.drop_index(name, table_name="tt_frames")
        op.create_index(name, "tt_frames", columns, sqlite_where=sa.text(where))
