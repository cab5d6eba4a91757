"""Commit tokens: one row per PostgreSQL write transaction, to settle a COMMIT whose reply
was lost (the table exists on SQLite too, unused, so both backends have one schema)."""


def upgrade(ctx):
    ctx.create_tables("tt_commit_tokens")
