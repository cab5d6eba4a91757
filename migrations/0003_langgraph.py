"""LangGraph saver: index tables mapping LangGraph threads and checkpoints onto runs and frames."""


def upgrade(ctx):
    ctx.create_tables("tt_lg_threads", "tt_lg_checkpoints")
