"""Workers: a registry of worker processes sharing runs on one database.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_workers"
down_revision = "0003_langgraph"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tt_workers",
        sa.Column("worker_id", sa.String(200), primary_key=True),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("workflows_json", sa.Text, nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("started_at_ms", sa.BigInteger, nullable=False),
        sa.Column("heartbeat_at_ms", sa.BigInteger, nullable=False),
    )
