"""Workers: a registry of worker processes sharing runs on one database."""


def upgrade(ctx):
    ctx.create_tables("tt_workers")
