"""What-if sweeps from a terminal: ``smithers-tt sweep RUN FRAME --variant NAME=EDITS.json``,
``smithers-tt sweep-show ID``, ``smithers-tt sweep-cancel ID`` and ``smithers-tt sweep-promote
ID VARIANT`` (thin over ``db.sweep``)."""

from __future__ import annotations

from typing import Any

import click

from smithers_tt.cli._app import (
    Context,
    cli,
    handle_errors,
    load_workflow,
    pass_ctx,
    workflow_option,
)
from smithers_tt.cli._commands import _confirm, read_json_file
from smithers_tt.cli._output import emit_json, one_line, state
from smithers_tt.cli._pairs import name_values
from smithers_tt.cli._progress import progress_bar
from smithers_tt.cli._runs import shown_ids
from smithers_tt.errors import InvalidArgument
from smithers_tt.sweeps import Sweep


def _variants(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``NAME=EDITS.json`` pairs as name -> edits (``NAME=`` alone: no edits)."""
    variants = {
        name: read_json_file(path, f"the edits file {path!r} of --variant {name}") if path else {}
        for name, path in name_values(pairs, "--variant", "NAME=EDITS.json (or NAME=)").items()
    }
    if not variants:
        raise InvalidArgument("give at least one --variant NAME=EDITS.json")
    return variants


@cli.command()
@click.argument("run_id")
@click.argument("frame_no", type=int)
@click.option(
    "--variant",
    "pairs",
    multiple=True,
    metavar="NAME=EDITS.json",
    help="A variant and its edits (a JSON object of input, reset, checkpoints, dependents, "
    "allow_new_format, break_before, break_after); NAME= for none; repeatable.",
)
@workflow_option
@click.option(
    "--concurrency", default=4, show_default=True, help="Branches run at once in this process."
)
@click.option(
    "--workers/--here",
    "workers",
    default=None,
    help="Queue the branches for workers, or run them here (default: workers on PostgreSQL "
    "when one serves the workflow).",
)
@click.option("--no-wait", is_flag=True, help="With workers, return once the branches are queued.")
@click.option(
    "--sweep-id",
    metavar="ID",
    help="Record the sweep under this id; the id of an interrupted sweep (with the same "
    "variants) forks and runs only what it had not.",
)
@pass_ctx
@handle_errors
def sweep(
    ctx: Context,
    run_id: str,
    frame_no: int,
    pairs: tuple[str, ...],
    spec: str | None,
    concurrency: int,
    workers: bool | None,
    no_wait: bool,
    sweep_id: str | None,
) -> None:
    """Fork FRAME of RUN once per variant, run the branches, and show how each ended.

    \b
    Examples:
      smithers-tt sweep RUN 12 --variant base= --variant bees=bees.json
      smithers-tt sweep RUN 12 --variant a=a.json --workflow pkg.flows:report --workers
      smithers-tt sweep-show SWEEP
    EDITS.json holds what db.fork takes, e.g. {"input": {"topic": "bees"}, "reset": ["write"]}
    """
    variants = _variants(pairs)
    db = ctx.db
    wf = load_workflow(spec, db.get_run(run_id).record.workflow)
    with progress_bar("sweeping", total=len(variants), unit="branches") as advance:
        done = db.sweep(
            run_id, frame_no, variants, workflow=wf, sweep_id=sweep_id, progress=advance,
            concurrency=concurrency, workers=workers, wait=not no_wait,
        )  # fmt: skip
    _show(ctx, done)


@cli.command("sweep-show")
@click.argument("sweep_id")
@pass_ctx
@handle_errors
def sweep_show(ctx: Context, sweep_id: str) -> None:
    """Show a sweep: each variant's branch, status, score, duration and error.

    \b
    Examples:
      smithers-tt sweep-show SWEEP
      smithers-tt sweep-show SWEEP --json
    """
    _show(ctx, ctx.read_db.get_sweep(sweep_id))


@cli.command("sweep-cancel")
@click.argument("sweep_id")
@pass_ctx
@handle_errors
def sweep_cancel(ctx: Context, sweep_id: str) -> None:
    """Cancel a sweep: no branch starts any more, and those not ended are cancelled.

    \b
    Example:
      smithers-tt sweep-cancel SWEEP
    """
    found = ctx.db.get_sweep(sweep_id)
    found.cancel()
    _show(ctx, found)


@cli.command("sweep-promote")
@click.argument("sweep_id")
@click.argument("variant")
@click.option(
    "--delete-others",
    is_flag=True,
    help="Also delete the sweep's other branches (those ended and not forked from; the "
    "parent run and the promoted branch are never deleted).",
)
@click.option("--yes", is_flag=True, help="Do not ask before deleting the other branches.")
@pass_ctx
@handle_errors
def sweep_promote(
    ctx: Context, sweep_id: str, variant: str, delete_others: bool, yes: bool
) -> None:
    """Promote VARIANT's branch: record it as the branch the sweep keeps.

    The other branches stay as they are, unless --delete-others: then they are deleted
    (asked first on a terminal; refused without --yes otherwise), except those not ended or
    forked from, which are listed with why they stayed. Promoting another variant later
    replaces the choice; a promoted sweep makes no more forks.

    \b
    Examples:
      smithers-tt sweep-promote SWEEP bees
      smithers-tt sweep-promote SWEEP bees --delete-others --yes
    """
    found = ctx.db.get_sweep(sweep_id)
    if delete_others:
        others = [n for n, run in found.branches().items() if run is not None and n != variant]
        _confirm(
            f"Promote {variant!r} of sweep {found.id} and delete its other branches "
            f"({', '.join(others) or 'none'})?",
            yes,
        )
    shown = shown_ids(ctx, [r.id for r in found.branches().values() if r is not None])
    done = found.promote(variant, delete_others=delete_others)
    if ctx.as_json:
        emit_json(done.to_dict())
        return
    ctx.out.line(f"promoted {done.variant} (branch {shown.get(done.run_id, done.run_id)})")
    for run_id in done.deleted:
        ctx.out.line(f"deleted branch {shown.get(run_id, run_id)}")
    for run_id, why in done.kept.items():
        ctx.out.line(f"kept branch {shown.get(run_id, run_id)}: {one_line(why)}")
    _show(ctx, found.refresh())


def _show(ctx: Context, found: Sweep) -> None:
    rows = found.rows()
    if ctx.as_json:
        emit_json(
            {"sweep_id": found.id, "run_id": found.run_id, "frame_no": found.frame_no,
             "workflow": found.record.workflow, "cancelled": found.cancelled,
             "promoted": found.promoted,
             "variants": [{**row, "edits": found.variants[row["variant"]]} for row in rows]}
        )  # fmt: skip
        return
    short = shown_ids(ctx, [found.run_id, *(row["run_id"] for row in rows)])
    ctx.out.line(
        f"sweep {found.id} of run {short[found.run_id]} at frame {found.frame_no}",
        " (cancelled)" if found.cancelled else "",
    )
    ctx.out.table(
        ["variant", "branch", "status", "score", "seconds", "calls", "error"],
        [
            [
                f"{row['variant']} (promoted)" if row["promoted"] else row["variant"],
                short.get(row["run_id"], "-") if row["run_id"] else "-",
                state(row["status"]),
                "-" if row["score"] is None else one_line(row["score"]),
                "-" if row["duration_s"] is None else f"{row['duration_s']:.2f}",
                "-" if row["model_calls"] is None else row["model_calls"],
                one_line(row["error"]) if row["error"] else "-",
            ]
            for row in rows
        ],
        flex=["error"],
    )
