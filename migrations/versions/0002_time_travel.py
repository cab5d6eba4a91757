"""Time travel: the workflow graph and a durable lease on runs, and the audit of operations.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_time_travel"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable columns: SQLite adds them with ALTER TABLE, no table rebuild is needed.
    op.add_column("tt_runs", sa.Column("graph_json", sa.Text, nullable=True))
    op.add_column("tt_runs", sa.Column("lease_owner", sa.String(200), nullable=True))
    op.add_column("tt_runs", sa.Column("lease_until_ms", sa.BigInteger, nullable=True))
    op.create_table(
        "tt_audit",
        sa.Column("audit_id", sa.String(40), primary_key=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("operation", sa.String(20), nullable=False),
        sa.Column("frame_no", sa.BigInteger, nullable=True),
        sa.Column("actor", sa.String(200), nullable=True),
        sa.Column("detail_json", sa.Text, nullable=True),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("tt_audit_run", "tt_audit", ["run_id", "created_at_ms"])
