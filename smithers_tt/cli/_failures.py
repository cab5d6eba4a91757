"""``smithers-tt failures``: failures grouped across runs, and a retry of one group."""

from __future__ import annotations

import shlex

import click

from smithers_tt.cli._app import (
    Context,
    cli,
    handle_errors,
    how_invoked,
    load_workflow,
    pass_ctx,
    workflow_option,
)
from smithers_tt.cli._commands import _confirm
from smithers_tt.cli._output import emit_json, one_line, state, when
from smithers_tt.cli._runs import shown_ids
from smithers_tt.errors import InvalidArgument
from smithers_tt.triage import Failures, RetryResult


@cli.command()
@click.option("--of", "of_workflow", metavar="NAME", help="Only runs of this workflow name.")
@click.option(
    "--since",
    type=float,
    metavar="SECONDS",
    help="Only failures of the last SECONDS (default: all).",
)
@click.option(
    "--stuck-after",
    type=float,
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="A running run whose owner was silent this long counts as stuck.",
)
@click.option(
    "--retry",
    "retry_group",
    type=int,
    metavar="N",
    help="Reset the failing node of every failed run of group N and resume it (asks first).",
)
@workflow_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (with --retry).")
@pass_ctx
@handle_errors
def failures(
    ctx: Context,
    of_workflow: str | None,
    since: float | None,
    stuck_after: float,
    retry_group: int | None,
    spec: str | None,
    yes: bool,
) -> None:
    """Failures across runs, grouped by workflow, node, error class and message.

    Failed attempts (also in runs that finished after a retry), runs that failed outside
    a node, and running runs whose owner went silent (stuck), largest group first.

    \b
    Examples:
      smithers-tt failures
      smithers-tt failures --since 3600 --json
      smithers-tt failures --retry 1 --workflow mypkg.flows:report
    """
    db = ctx.read_db if retry_group is None else ctx.db
    found = db.failures(workflow=of_workflow, since=since, stuck_after=stuck_after)
    if retry_group is not None:
        _retry(ctx, found, retry_group, spec, yes)
        return
    if ctx.as_json:
        emit_json([{"group": n, **g.describe()} for n, g in enumerate(found, 1)])
        return
    shown = shown_ids(ctx, (g.example.run_id for g in found if g.example))
    ctx.out.table(
        ["#", "count", "runs", "kind", "workflow", "node", "error", "last seen", "example"],
        [
            [
                n,
                g.count,
                len(g.run_ids),
                g.kind,
                g.workflow,
                g.node_id or "-",
                one_line(f"{g.error_class}: {g.message}" if g.message else g.error_class),
                when(g.last_ms),
                shown[g.example.run_id] if g.example else "-",
            ]
            for n, g in enumerate(found, 1)
        ],
        flex=["error"],
    )
    if found.truncated:
        ctx.out.line("(more failures than were read: narrow with --since or --of)")
    retryable = [n for n, g in enumerate(found, 1) if g.retryable]
    if retryable:
        ctx.out.line(
            f"retry a group's failed runs with: {how_invoked()} --db {shlex.quote(ctx.url)} "
            f"failures --retry {retryable[0]} --workflow MODULE:ATTR",
            stderr=True,
        )


def _retry(ctx: Context, found: Failures, number: int, spec: str | None, yes: bool) -> None:
    if not 1 <= number <= len(found):
        raise InvalidArgument(
            f"there is no group {number}: `failures` lists {len(found)} group(s), from 1"
        )
    group = found[number - 1]
    runs = group.retryable
    if not runs:
        raise InvalidArgument(
            f"group {number} has no failed or interrupted run to retry"
            + ("" if group.node_id else " (its runs failed outside a node)")
        )
    wf = load_workflow(spec, group.workflow)
    _confirm(
        f"Reset node {group.node_id!r} (and what needs it) of {len(runs)} run(s) of "
        f"{group.workflow!r} and resume them?",
        yes,
    )
    results: list[RetryResult] = []
    short = shown_ids(ctx, runs)

    def report(result: RetryResult) -> None:
        results.append(result)
        if not ctx.as_json:
            ctx.out.line(
                f"run {short.get(result.run_id, result.run_id)} {result.outcome}: ",
                state(result.status),
                f" ({result.detail})" if result.detail else "",
            )

    found.retry(group, wf, on_result=report)
    if ctx.as_json:
        emit_json([r.__dict__ for r in results])
