"""Forks by reference: ``tt_runs.inherits`` (a fork whose history before frame 0 is read from
its parent, not copied) and ``tt_frames_run_level``, a partial index of the frames that change
a run's status, output or error (so the state of a run at any frame is one index probe).
No stored row changes: existing forks restate their parent in base frames and keep
``inherits`` NULL.

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


def upgrade() -> None:
    op.add_column("tt_runs", sa.Column("inherits", sa.Boolean, nullable=True))
    op.create_index(
        "tt_frames_run_level",
        "tt_frames",
        ["run_id", "frame_no"],
        sqlite_where=sa.text(RUN_LEVEL),
        postgresql_where=sa.text(RUN_LEVEL),
    )
