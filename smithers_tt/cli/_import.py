"""``smithers-tt import-langgraph``: copy a LangGraph SqliteSaver / PostgresSaver database."""

from __future__ import annotations

import click

from smithers_tt._extras import require_extra
from smithers_tt.cli._app import Context, cli, handle_errors, pass_ctx
from smithers_tt.cli._output import emit_json
from smithers_tt.cli._progress import progress_bar


@cli.command("import-langgraph")
@click.argument("source_url", metavar="URL")
@click.option("--thread", "threads", multiple=True, help="Import only this thread (repeatable).")
@click.option(
    "--allow-type",
    "allow_types",
    multiple=True,
    metavar="MODULE.NAME",
    help="A type stored values may construct besides LangGraph's strict list (repeatable).",
)
@pass_ctx
@handle_errors
def import_langgraph(
    ctx: Context, source_url: str, threads: tuple[str, ...], allow_types: tuple[str, ...]
) -> None:
    """Copy the threads of a LangGraph SqliteSaver or PostgresSaver database into this one.

    Each thread keeps its history and continues on SmithersSaver; the source is only read,
    and importing again skips what was already copied. The store is created when there is
    none yet (like migrate).

    No code in the source runs: a stored value that names a type outside LangGraph's strict
    msgpack list stops the import with an error naming its thread, checkpoint and type.
    Allow a type you trust with --allow-type (e.g. --allow-type mypkg.state.Note); give
    the same types to SmithersSaver(db, allowed_types=...) to read the threads.

    \b
    Examples:
      smithers-tt import-langgraph sqlite:///checkpoints.sqlite
      smithers-tt --db postgresql+psycopg://app@db/app import-langgraph postgresql://app@db/old
    """
    require_extra("langgraph", needed_for="import-langgraph")
    from smithers_tt.integrations.langgraph_import import import_langgraph as run_import

    db = ctx.create_db()  # opened first: a store that cannot be made is an error line
    with progress_bar("importing", unit="threads") as advance:
        report = run_import(
            source_url,
            db,
            thread_ids=list(threads) or None,
            progress=lambda _: advance(1),
            allowed_types=list(allow_types),
        )
    fields = {
        "threads": report.threads,
        "checkpoints": report.checkpoints,
        "writes": report.writes,
        "skipped": report.skipped,
    }
    if ctx.as_json:
        emit_json(fields)
        return
    ctx.out.line(
        f"imported {report.threads} threads: {report.checkpoints} checkpoints, "
        f"{report.writes} writes ({report.skipped} checkpoints were already here)"
    )
