"""Commands that look after the database and build the demo."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from smithers_tt.cli._app import Context, cli, handle_errors, how_invoked, pass_ctx
from smithers_tt.cli._commands import _confirm
from smithers_tt.cli._output import emit_json, state, text
from smithers_tt.cli._progress import progress_bar
from smithers_tt.cli._runs import shown_ids
from smithers_tt.database import connect
from smithers_tt.errors import StoreNotFound
from smithers_tt.store import migrate as run_migrations
from smithers_tt.store import store_state
from smithers_tt.store.for_cli import migration_names, row_counts

Finding = str | tuple[str, int] | tuple[str, str, int, int, int]


def _describe(item: Finding, short: dict[str, str]) -> str:
    """A verify finding as one line: a content hash or a row, a frame, else a ref's key (run
    ids as ``short`` shows them)."""
    if isinstance(item, str):
        return item
    run = short.get(item[0], item[0])
    if len(item) == 2:
        return f"frame {item[1]} of run {run}"
    _, node_id, iteration, attempt, sequence = item
    return f"ref run {run} node {node_id}[{iteration}] attempt {attempt} seq {sequence}"


@cli.command()
@click.option(
    "--beside-other-tables",
    is_flag=True,
    help="Create the store even though the database (or schema) holds other tables.",
)
@pass_ctx
@handle_errors
def migrate(ctx: Context, beside_other_tables: bool) -> None:
    """Create the store, or upgrade its schema (commands that only read never do this).

    \b
    Examples:
      smithers-tt --db postgresql+psycopg://postgres@127.0.0.1/app migrate
      smithers-tt --db runs/new.db migrate
    """
    pending = _pending(ctx.url)  # looked at before: connecting migrates
    db = ctx.create_db(beside_other_tables=beside_other_tables)
    again = run_migrations(db.engine)  # usually []: another process's, at most
    created = pending is None
    applied = migration_names() if created else [*pending, *again]
    if ctx.as_json:
        emit_json({"url": ctx.url, "created": created, "applied": applied})
        return
    if created:
        ctx.out.line(f"created the store ({ctx.url}); schema at {applied[-1]}")
    elif applied:
        ctx.out.line(f"upgraded the store ({ctx.url}): applied {', '.join(applied)}")
    else:
        ctx.out.line(f"schema is up to date ({ctx.url})")


def _pending(url: str) -> list[str] | None:
    """The revisions the store at ``url`` lacks, looked at read-only; None when there is no
    store there yet (no file, or no smithers_tt tables)."""
    try:
        probe = connect(url, read_only=True, migrate_schema=False)
    except StoreNotFound:
        return None
    try:
        state = store_state(probe.engine)
    finally:
        probe.close()
    return list(state.pending) if state.exists else None


@cli.command()
@click.option("--page-size", default=200, show_default=True, help="Rows per transaction.")
@pass_ctx
@handle_errors
def verify(ctx: Context, page_size: int) -> None:
    """Check every stored checkpoint and every ref and frame naming one; exit 1 on any damage.

    \b
    Example:
      smithers-tt verify
    """
    db = ctx.read_db  # opened first: a missing store is an error line, not a progress bar
    total = row_counts(db.engine)["tt_checkpoint_contents"]  # the bar counts content rows
    with progress_bar("verifying", total=total, unit="contents") as advance:
        report = db.verify(page_size=page_size, progress=advance)
    if ctx.as_json:
        emit_json(
            {
                "checked": report.checked,
                "corrupt": report.corrupt,
                "missing": report.missing,
                "mismatched": report.mismatched,
                "miscoded": report.miscoded,
                "missized": report.missized,
                "damaged": report.damaged,
                "ok": report.ok,
            }
        )
    else:
        problems = {
            "corrupt": report.corrupt,
            "missing": report.missing,
            "mismatched": report.mismatched,
            "miscoded": report.miscoded,
            "missized": report.missized,
            "damaged": report.damaged,
        }
        ctx.out.line(
            f"checked {report.checked} contents: ",
            text("all verify", "green")
            if report.ok
            else text(
                ", ".join(f"{len(found)} {kind}" for kind, found in problems.items() if found),
                "red",
            ),
        )
        short = shown_ids(
            ctx,
            [item[0] for found in problems.values() for item in found if not isinstance(item, str)],
        )
        for kind, found in problems.items():
            for item in found:
                ctx.out.line(f"  {kind} {_describe(item, short)}")
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
    db = ctx.db  # opened first: a missing store is an error line, not a progress bar
    with progress_bar("collecting", unit="rows deleted") as advance:
        if older_than is None:
            report = db.collect_garbage(progress=advance)
            result = {
                "deleted_contents": report.deleted,
                "bytes_freed": report.bytes_freed,
                "released_rewinds": report.rewinds_released,
            }
        else:
            pruned = db.gc(
                older_than=older_than * 86400, keep_forks=not drop_forks, progress=advance
            )
            result = {k: v for k, v in vars(pruned).items() if not k.startswith("_")}
    if ctx.as_json:
        emit_json(result)
        return
    ctx.out.line(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in result.items()))


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
    with ctx.read_db.lineage() as lin:
        frame = lin.sql(sql)
    if ctx.as_json:
        emit_json(json.loads(frame.to_json(orient="records", date_format="iso")))
        return
    columns = [str(c) for c in frame.columns]
    ctx.out.table(columns, frame.head(limit).itertuples(index=False), flex=columns)
    if len(frame) > limit:
        ctx.out.line(f"... {len(frame) - limit} more rows (use --limit or --json)")


@cli.command()
@click.option("--fresh", is_flag=True, help="Delete an existing SQLite demo file first.")
@pass_ctx
@handle_errors
def demo(ctx: Context, fresh: bool) -> None:
    """Build a demo database with one run of each kind, and show what it made.

    Runs offline, with deterministic agents and no API key: a clean run, a retry that
    resumes from a progress checkpoint, a schema-correction turn, a cancelled run, an
    interrupted run resumed under a new epoch, a fork with an edited checkpoint, a replay.
    Its agents record synthetic model calls of made-up models; their made-up prices are
    written to demo-prices.json beside a SQLite demo file (else in the current folder), for
    `calls RUN --prices demo-prices.json`.

    \b
    Example:
      smithers-tt --db demo.db demo --fresh
    """
    from smithers_tt.demo.showcase import build_demo

    if fresh and ctx.url.startswith("sqlite:///"):
        path = Path(ctx.url.removeprefix("sqlite:///"))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    db = ctx.create_db()
    steps = 7
    with click.progressbar(
        length=steps,
        label="building the demo",
        file=sys.stderr,
        show_pos=True,
        item_show_func=lambda s: s,
    ) as bar:
        made = build_demo(db, step=lambda label: bar.update(1, label))
    prices = _write_demo_prices(ctx.url)  # once the demo is built: a refused one leaves nothing
    if ctx.as_json:
        emit_json(
            [
                {
                    "label": m.label,
                    "run_id": m.run_id,
                    "story": m.story,
                    "status": db.get_run(m.run_id).status,
                }
                for m in made
            ]
        )
        return
    rows = []
    short = shown_ids(ctx, [m.run_id for m in made])
    for m in made:
        run = db.get_run(m.run_id)
        rows.append(
            [
                m.label,
                short[m.run_id],
                state(run.status),
                run.record.clock + 1,  # frames 0 to clock, as runs and the browser count
                len(run.attempts()),
                len(run.checkpoints()),
                m.story,
            ]
        )
    ctx.out.table(
        ["kind", "run", "status", "frames", "attempts", "checkpoints", "what it shows"],
        rows,
        flex=["what it shows"],
    )
    report = db.verify()
    ctx.out.line()
    ctx.out.line(f"{report.checked} distinct checkpoint contents, all verified: {report.ok}")
    ctx.out.line(f"database: {ctx.url}")
    ctx.out.line()
    ctx.out.line("Next:")
    again = f"{how_invoked()} --db {shlex.quote(ctx.url)}"
    ctx.out.line(f"  {again} runs --label case=retry")
    ctx.out.line(f"  {again} timeline {short[made[1].run_id]}")
    fork_run = db.get_run(made[5].run_id).record
    parent, child = short[fork_run.parent_run_id or ""], short[fork_run.run_id]
    ctx.out.line(f"  {again} diff {parent} {fork_run.parent_frame_no} {child}:0")
    ctx.out.line(f"  {again} calls {short[made[1].run_id]} --prices {shlex.quote(prices)}")
    ctx.out.line(f"  {again} lab    (the tour notebook on this database)")


def demo_prices_file(url: str) -> Path:
    """Where ``demo`` writes its price table for the store at ``url``: beside a SQLite file,
    else in the current folder."""
    folder = Path(url.removeprefix("sqlite:///")).parent if url.startswith("sqlite:///") else None
    return (folder or Path.cwd()) / "demo-prices.json"


def _write_demo_prices(url: str) -> str:
    """Write the demo's made-up price table beside a SQLite demo file (else in the current
    folder); the path to give ``--prices``, relative to here when it is below here."""
    from smithers_tt.demo import DEMO_PRICES

    path = demo_prices_file(url)
    table = {m: {"input": i, "output": o, "cached_input": c} for m, i, o, c in DEMO_PRICES.rows()}
    path.write_text(json.dumps(table, indent=2) + "\n")
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


@cli.command()
@pass_ctx
@handle_errors
def tables(ctx: Context) -> None:
    """Row counts of the smithers_tt tables (a quick health look).

    \b
    Example:
      smithers-tt tables
    """
    counts = row_counts(ctx.read_db.engine)
    if ctx.as_json:
        emit_json(counts)
        return
    ctx.out.table(["table", "rows"], sorted(counts.items()))
