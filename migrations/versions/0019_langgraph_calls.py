"""LangGraph model calls, each once and at the checkpoint its step made: three nullable
columns, no stored row changed.

- ``tt_model_calls.lg_key``: for a call the LangGraph saver read from an AI message, the rank
  of the task that wrote it (the input checkpoints from the thread's root namespace down to
  the task's, then the task id); of the tasks of a thread writing the same message, the one
  of least rank is the call's (``NULL`` for every other call, and for the calls stored before).
- ``tt_lg_checkpoints.child_frame_no``: the frame of the first checkpoint stored with this one
  as its parent (the step's checkpoint its tasks' calls are numbered with); ``NULL`` before.
- ``tt_lg_checkpoints.sends_json``: the nodes a checkpoint's pending sends go to, in order
  (a ``Send`` task's calls are that node's); ``NULL`` when it has none, and before.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0019_langgraph_calls"
down_revision = "0018_check_or_chains"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tt_model_calls", sa.Column("lg_key", sa.Text, nullable=True))
    op.add_column("tt_lg_checkpoints", sa.Column("child_frame_no", sa.BigInteger, nullable=True))
    op.add_column("tt_lg_checkpoints", sa.Column("sends_json", sa.Text, nullable=True))
