"""Commands that look after the database and build the demo."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from smithers_tt.cli._app import Context, cli, handle_errors, pass_ctx
from smithers_tt.cli._commands import _confirm
from smithers_tt.cli._output import emit_json, state, table
from smithers_tt.cli._progress import progress_bar
from smithers_tt.store import migrate as run_migrations


@cli.command()
@pass_ctx
@handle_errors
def migrate(ctx: Context) -> None:
    """Create or upgrade the schema (every command does this on first use).

    \b
    Example:
      smithers-tt --db postgresql+psycopg://postgres@127.0.0.1/app migrate
    """
    applied = run_migrations(ctx.db.engine)  # connecting migrated already: usually []
    if ctx.as_json:
        emit_json({"url": ctx.url, "applied": applied})
        return
    click.echo(f"schema is up to date ({ctx.url})" + (f"; applied {applied}" if applied else ""))


@cli.command()
@click.option("--page-size", default=200, show_default=True, help="Rows per transaction.")
@pass_ctx
@handle_errors
def verify(ctx: Context, page_size: int) -> None:
    """Check every stored checkpoint's SHA-256 and size; exit 1 if any is corrupt or missing.

    \b
    Example:
      smithers-tt verify
    """
    with progress_bar("verifying", unit="contents") as advance:
        report = ctx.db.verify(page_size=page_size, progress=advance)
    if ctx.as_json:
        emit_json(
            {
                "checked": report.checked,
                "corrupt": report.corrupt,
                "missing": report.missing,
                "ok": report.ok,
            }
        )
    else:
        click.echo(
            f"checked {report.checked} contents: "
            + (
                click.style("all verify", fg="green")
                if report.ok
                else click.style(
                    f"{len(report.corrupt)} corrupt, {len(report.missing)} missing", fg="red"
                )
            )
        )
        for content_hash in report.corrupt:
            click.echo(f"  corrupt {content_hash}")
    if not report.ok:
        sys.exit(1)


@cli.command()
@click.option(
    "--older-than",
    type=float,
    metavar="DAYS",
    help="Also delete finished, failed and cancelled runs older than DAYS.",
)
@click.option("--drop-forks", is_flag=True, help="Delete old parents even if forks are kept.")
@click.option("--yes", is_flag=True, help="Do not ask before deleting runs.")
@pass_ctx
@handle_errors
def gc(ctx: Context, older_than: float | None, drop_forks: bool, yes: bool) -> None:
    """Delete checkpoint content nothing reaches (and, with --older-than, old runs).

    \b
    Examples:
      smithers-tt gc
      smithers-tt gc --older-than 30 --yes
    """
    if older_than is not None:
        _confirm(f"Delete terminal runs older than {older_than:g} days?", yes)
    with progress_bar("collecting", unit="rows deleted") as advance:
        if older_than is None:
            report = ctx.db.collect_garbage(progress=advance)
            result = {"deleted_contents": report.deleted, "bytes_freed": report.bytes_freed}
        else:
            pruned = ctx.db.gc(
                older_than=older_than * 86400, keep_forks=not drop_forks, progress=advance
            )
            result = {k: v for k, v in vars(pruned).items() if not k.startswith("_")}
    if ctx.as_json:
        emit_json(result)
        return
    click.echo(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in result.items()))


@cli.command()
@click.argument("sql")
@click.option("--limit", default=50, show_default=True, help="Rows to print (human output).")
@pass_ctx
@handle_errors
def lineage(ctx: Context, sql: str, limit: int) -> None:
    """Run SQL over the lineage views with DuckDB (read-only).

    \b
    Examples:
      smithers-tt lineage "SELECT codec, count(*) FROM checkpoints GROUP BY codec"
      smithers-tt --json lineage "SELECT * FROM runs"
    """
    with ctx.db.lineage() as lin:
        frame = lin.sql(sql)
    if ctx.as_json:
        click.echo(frame.to_json(orient="records", date_format="iso"))
        return
    click.echo(frame.head(limit).to_string(index=False))
    if len(frame) > limit:
        click.echo(f"... {len(frame) - limit} more rows (use --limit or --json)")


@cli.command()
@click.option("--fresh", is_flag=True, help="Delete an existing SQLite demo file first.")
@pass_ctx
@handle_errors
def demo(ctx: Context, fresh: bool) -> None:
    """Build a demo database with one run of each kind, and show what it made.

    Runs offline, with deterministic agents and no API key: a clean run, a retry that
    resumes from a progress checkpoint, a schema-correction turn, a cancelled run, an
    interrupted run resumed under a new epoch, a fork with an edited checkpoint, a replay.

    \b
    Example:
      smithers-tt --db demo.db demo --fresh
    """
    from smithers_tt.demo.showcase import build_demo

    if fresh and ctx.url.startswith("sqlite:///"):
        path = Path(ctx.url.removeprefix("sqlite:///"))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    steps = 7
    with click.progressbar(
        length=steps,
        label="building the demo",
        file=sys.stderr,
        show_pos=True,
        item_show_func=lambda s: s,
    ) as bar:
        made = build_demo(ctx.db, step=lambda label: bar.update(1, label))
    if ctx.as_json:
        emit_json(
            [
                {
                    "label": m.label,
                    "run_id": m.run_id,
                    "story": m.story,
                    "status": ctx.db.get_run(m.run_id).status,
                }
                for m in made
            ]
        )
        return
    rows = []
    for m in made:
        run = ctx.db.get_run(m.run_id)
        rows.append(
            [
                m.label,
                m.run_id,
                state(run.status),
                run.record.clock,
                len(run.attempts()),
                len(run.checkpoints()),
                m.story,
            ]
        )
    table(["kind", "run", "status", "frames", "attempts", "checkpoints", "what it shows"], rows)
    report = ctx.db.verify()
    click.echo(f"\n{report.checked} distinct checkpoint contents, all verified: {report.ok}")
    click.echo(f"database: {ctx.url}\n")
    click.echo("Next:")
    click.echo(f"  smithers-tt --db {ctx.url} timeline {made[1].run_id}")
    fork_run = ctx.db.get_run(made[5].run_id).record
    click.echo(
        f"  smithers-tt --db {ctx.url} diff {fork_run.parent_run_id} "
        f"{fork_run.parent_frame_no} {fork_run.run_id}:0"
    )
    click.echo(f"  smithers-tt --db {ctx.url} lab    (the tour notebook on this database)")


@cli.command()
@pass_ctx
@handle_errors
def tables(ctx: Context) -> None:
    """Row counts of the smithers_tt tables (a quick health look).

    \b
    Example:
      smithers-tt tables
    """
    import sqlalchemy as sa

    from smithers_tt.store import _schema as S

    with ctx.db.engine.connect(write=False) as conn:
        counts = {
            name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
            for name, t in S.metadata.tables.items()
        }
    if ctx.as_json:
        emit_json(counts)
        return
    table(["table", "rows"], sorted(counts.items()))
