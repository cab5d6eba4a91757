"""Run labels: ``tt_run_labels`` (run id, key, value), one row per label of a run, with an
index by ``(key, value, run_id)`` for "the runs labelled case=retry". A new table, no stored
row changed: runs created before have no labels.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_run_labels"
down_revision = "0013_rewound_frames_unbound"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tt_run_labels",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(200), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
    )
    op.create_index("tt_run_labels_value", "tt_run_labels", ["key", "value", "run_id"])
