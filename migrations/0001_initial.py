"""Runs, nodes, attempts, checkpoint contents and refs, frames and the task cache."""


def upgrade(ctx):
    ctx.create_tables(
        "tt_runs",
        "tt_nodes",
        "tt_attempts",
        "tt_checkpoint_contents",
        "tt_checkpoint_refs",
        "tt_frames",
        "tt_cache",
    )
