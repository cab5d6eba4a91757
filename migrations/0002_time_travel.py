"""Time travel: the workflow graph and a durable lease on runs, and the audit of operations."""


def upgrade(ctx):
    ctx.add_columns("tt_runs", "graph_json", "lease_owner", "lease_until_ms")
    ctx.create_tables("tt_audit")
