"""Alembic's entry point, run by :mod:`smithers_tt.store.backend._migrate` (never by hand).

The runner opens the transaction, takes the migration lock and passes its connection in
``config.attributes``; this file only hands that connection to Alembic, so every pending
revision runs inside the runner's one transaction. There is no alembic.ini and no logging
set-up: smithers_tt prints nothing while it migrates.
"""

from alembic import context

config = context.config
context.configure(
    connection=config.attributes["connection"],
    version_table=config.attributes["version_table"],
    # SQLite cannot ALTER most things: batch operations rebuild the table instead.
    render_as_batch=True,
)
# Inside the runner's transaction already: Alembic then opens none of its own.
with context.begin_transaction():
    context.run_migrations()
