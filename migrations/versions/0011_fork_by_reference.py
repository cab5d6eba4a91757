"""Forks by reference and time travel in proportion to what it changes: ``tt_runs.inherits``
(a fork whose history before frame 0 is read from its parent, not copied), and two partial
indexes of ``tt_frames`` that leave checkpoint frames (one per publish) out:
``tt_frames_run_level`` (the frames that change a run's status, output or error: the state of
a run at any frame is one probe) and ``tt_frames_node_level`` (the frames that change a node
or an attempt, by node: what a node was at any frame is read from its own frames). No stored
row changes: existing forks restate their parent in base frames and keep ``inherits`` NULL.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_fork_by_reference"
down_revision = "0010_breakpoints"
branch_labels = None
depends_on = None

RUN_LEVEL = (
    "kind IN ('run_created', 'run_claimed', 'run_finished', 'run_failed', 'run_cancelled', "
    "'forked', 'reset', 'run_paused', 'run_continued', 'run_released')"
)
NODE_LEVEL = "kind IN ('attempt_started', 'attempt_finished', 'node_state', 'cache_hit')"


def upgrade() -> None:
    op.add_column("tt_runs", sa.Column("inherits", sa.Boolean, nullable=True))
    op.create_index(
        "tt_frames_run_level",
        "tt_frames",
        ["run_id", "frame_no"],
        sqlite_where=sa.text(RUN_LEVEL),
        postgresql_where=sa.text(RUN_LEVEL),
    )
    op.create_index(
        "tt_frames_node_level",
        "tt_frames",
        ["run_id", "node_id", "iteration", "frame_no"],
        sqlite_where=sa.text(NODE_LEVEL),
        postgresql_where=sa.text(NODE_LEVEL),
    )
