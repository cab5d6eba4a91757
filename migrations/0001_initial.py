"""Runs, attempts, content-addressed checkpoint contents and immutable checkpoint refs."""


def upgrade(ctx):
    ctx.create_tables(
        "tt_runs",
        "tt_nodes",
        "tt_attempts",
        "tt_checkpoint_contents",
        "tt_checkpoint_refs",
    )
