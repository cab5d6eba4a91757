"""Promoted sweep branches: ``tt_sweeps`` gains ``promoted_variant``, ``promoted_run_id`` and
``promoted_at_ms`` (the branch a person chose to keep with ``sweep.promote``) and
``discarded_json`` (the other branches they asked to delete with it); and ``driver`` with
``driver_until_ms`` (the lease of the one process driving the sweep). Nullable columns added,
no stored row changed: sweeps made before have no branch promoted and no driver.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_sweep_promotions"
down_revision = "0016_sweeps"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tt_sweeps", sa.Column("promoted_variant", sa.String(200), nullable=True))
    op.add_column("tt_sweeps", sa.Column("promoted_run_id", sa.String(200), nullable=True))
    op.add_column("tt_sweeps", sa.Column("promoted_at_ms", sa.BigInteger, nullable=True))
    op.add_column("tt_sweeps", sa.Column("discarded_json", sa.Text, nullable=True))
    op.add_column("tt_sweeps", sa.Column("driver", sa.String(200), nullable=True))
    op.add_column("tt_sweeps", sa.Column("driver_until_ms", sa.BigInteger, nullable=True))
