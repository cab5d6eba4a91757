"""What-if sweeps: ``tt_sweeps`` (one row per sweep: the run and frame it forks, its
workflow, its variants' edits as JSON, whether it was cancelled) and ``tt_sweep_scores`` (the
score a user's function gave each variant's branch). The branches themselves are runs,
labelled ``sweep=<id>`` and ``variant=<name>``. New tables, no stored row changed.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_sweeps"
down_revision = "0015_model_calls"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tt_sweeps",
        sa.Column("sweep_id", sa.String(200), primary_key=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("frame_no", sa.BigInteger, nullable=False),
        sa.Column("workflow", sa.String(200), nullable=False),
        sa.Column("variants_json", sa.Text, nullable=False),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("tt_sweeps_run", "tt_sweeps", ["run_id", "created_at_ms"])
    op.create_table(
        "tt_sweep_scores",
        sa.Column("sweep_id", sa.String(200), primary_key=True),
        sa.Column("variant", sa.String(200), primary_key=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("score_json", sa.Text, nullable=False),
        sa.Column("scored_at_ms", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(["sweep_id"], ["tt_sweeps.sweep_id"], ondelete="CASCADE"),
    )
