"""Continuing paused runs: ``smithers-tt continue RUN --answer JSON`` (and its siblings)."""

from __future__ import annotations

from typing import Any

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
from smithers_tt.cli._commands import _edits, _finished, json_argument
from smithers_tt.cli._output import emit_json, state
from smithers_tt.cli._pairs import name_values
from smithers_tt.cli._runs import shown_id
from smithers_tt.engine import ContinueOptions, prepare_continue
from smithers_tt.errors import InvalidArgument


def _skips(pairs: tuple[str, ...]) -> dict[str, Any]:
    return {
        node: json_argument(value, f"--skip {node}")
        for node, value in name_values(pairs, "--skip", "NODE=JSON").items()
    }


@cli.command("continue")
@click.argument("run_id")
@click.option("--answer", "answer_json", metavar="JSON", help="The answer to the question (JSON).")
@click.option(
    "--checkpoint",
    "edits",
    multiple=True,
    metavar="NODE=FILE",
    help="Resume NODE from the edited checkpoint envelope in FILE (JSON); repeatable.",
)
@click.option(
    "--skip",
    "skips",
    multiple=True,
    metavar="NODE=JSON",
    help="Mark NODE finished with this output instead of running it; repeatable.",
)
@click.option("--step", is_flag=True, help="Run one node, then pause again.")
@click.option("--abort", is_flag=True, help="Cancel the paused run instead.")
@click.option("--break-before", multiple=True, metavar="NODE", help="Pause before NODE from now.")
@click.option("--break-after", multiple=True, metavar="NODE", help="Pause after NODE from now.")
@workflow_option
@click.option(
    "--queue", is_flag=True, help="Leave the run queued for a worker instead of executing it here."
)
@pass_ctx
@handle_errors
def continue_cmd(
    ctx: Context,
    run_id: str,
    answer_json: str | None,
    edits: tuple[str, ...],
    skips: tuple[str, ...],
    step: bool,
    abort: bool,
    break_before: tuple[str, ...],
    break_after: tuple[str, ...],
    spec: str | None,
    queue: bool,
) -> None:
    """Continue a paused run: answer its question, edit a checkpoint, skip a node, step.

    It executes here until its end or its next pause (with --queue, a worker executes it).
    List paused runs with: smithers-tt runs --status paused

    \b
    Examples:
      smithers-tt continue RUN --answer '"blue"'
      smithers-tt continue RUN --step
      smithers-tt continue RUN --skip review='{"approved": true}' --workflow pkg.flows:report
      smithers-tt continue RUN --checkpoint research=edited.json --queue
      smithers-tt continue RUN --abort
    """
    given = {"--step": step, "--answer": answer_json is not None, "--checkpoint": edits,
             "--skip": skips, "--break-before": break_before, "--break-after": break_after,
             "--queue": queue}  # fmt: skip
    if abort and any(given.values()):
        raise click.UsageError(
            f"--abort cancels the run; it takes no {', '.join(k for k, v in given.items() if v)}"
            " (continue the run with those, without --abort); nothing was written"
        )
    options: dict[str, Any] = {
        "answer": None if answer_json is None else json_argument(answer_json, "--answer"),
        "checkpoints": _edits(edits) or None,
        "skip": _skips(skips) or None,
        "step": step,
        "abort": abort,
        "break_before": list(break_before) if break_before or break_after else None,
        "break_after": list(break_after) if break_before or break_after else None,
    }
    record = ctx.db.get_run(run_id).record
    workflow = record.workflow
    # A bare `continue` of a run that is not paused said "run ... finished" as if it had
    # continued something: refused as `continue --answer` is, with the same message.
    if record.status != "paused":
        try:
            prepare_continue(ctx.db.store, record, None, ContinueOptions())  # raises: not paused
        except InvalidArgument as error:
            if record.status != "interrupted":
                raise
            # continue only takes up a pause; an interrupted run goes on with resume
            raise InvalidArgument(
                f"{error}. An interrupted run goes on with: {how_invoked()} resume {record.run_id}"
            ) from error
    if queue:
        needs_wf = spec is not None or edits or skips or break_before or break_after
        wf = load_workflow(spec, workflow) if needs_wf else None
        run = ctx.db.continue_run(run_id, wf, **options)
        if ctx.as_json:
            emit_json({"run_id": run.id, "status": run.status})
            return
        ctx.out.line(
            f"run {shown_id(ctx, run.id)} is ", state(run.status), "; a worker executes it next"
        )
        return
    _finished(ctx, ctx.db.resume(run_id, load_workflow(spec, workflow), **options))
