"""Commands about runs: listing, inspecting, diffing, time travel, resuming, cancelling."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import click

from smithers_tt._labels import parse_label
from smithers_tt.checkpoint import AgentCheckpoint, read_json, validate
from smithers_tt.cli._app import (
    Context,
    cli,
    handle_errors,
    how_invoked,
    load_workflow,
    pass_ctx,
    workflow_option,
)
from smithers_tt.cli._output import (
    clean,
    emit_json,
    one_line,
    state,
)
from smithers_tt.cli._pairs import name_values
from smithers_tt.cli._progress import progress_bar
from smithers_tt.cli._runs import shown_id, shown_ids
from smithers_tt.errors import CheckpointInvalid, ConfirmationRequired, InvalidArgument
from smithers_tt.store import ENDED


def json_argument(text: str, what: str) -> Any:
    """The strict JSON value of a command-line argument or of a file it names (``what`` names
    it in the message: ``--input``, "the checkpoint file 'a.json' for --checkpoint research").

    Raises:
        click.UsageError: it is not strict JSON (exit code 2; checked before anything is
            written).
    """
    try:
        value = read_json(text, what)
        validate(value, subject=what)
    except (InvalidArgument, CheckpointInvalid) as error:
        raise click.UsageError(str(error)) from error
    return value


def _confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise ConfirmationRequired(f"{question} Refusing without --yes (no terminal to ask).")
    if not click.confirm(clean(question), default=False, err=True):
        raise ConfirmationRequired("cancelled; nothing was changed")


reset_option = click.option(
    "--reset",
    "reset_nodes",
    multiple=True,
    metavar="NODE",
    help="Start this node (and what needs it) fresh; repeatable.",
)
"""The ``--reset NODE`` option of ``fork`` and ``replay``."""

label_option = click.option(
    "--label",
    "label_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Label the new run (over the labels it inherits); repeatable.",
)
"""The ``--label KEY=VALUE`` option of ``fork`` and ``replay``."""


@cli.command()
@click.argument("run_id")
@click.argument("frame_no", type=int)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--force",
    is_flag=True,
    help="Even if runs were forked above FRAME_NO (they stay valid; the fork tree marks "
    "their fork point as rewound away), or a process seems to be executing the run.",
)
@pass_ctx
@handle_errors
def rewind(ctx: Context, run_id: str, frame_no: int, yes: bool, force: bool) -> None:
    """Destructive: put a run back to a frame in place (asks first; undo-rewind undoes it).

    \b
    Example:
      smithers-tt rewind RUN 12 --yes
    """
    run = ctx.db.get_run(run_id)
    run_id = run.id  # the full id, whatever prefix was typed
    short = shown_id(ctx, run_id)
    _confirm(
        f"Rewind run {short} from frame {run.record.clock} to frame {frame_no}, removing the "
        f"frames after it ({how_invoked()} undo-rewind {short} brings them back)?",
        yes,
    )
    with progress_bar(f"rewinding to frame {frame_no}", unit=""):
        snap = ctx.db.rewind(run_id, frame_no, confirm=True, force=force)
    if ctx.as_json:
        emit_json({"run_id": run_id, "frame_no": frame_no, "status": snap.status})
        return
    ctx.out.line(
        f"rewound {short} to frame {frame_no}; it is now ",
        state(ctx.db.get_run(run_id).status),
        # whole: a command to paste later, when a prefix may name more runs (ids made in the
        # same second share their first characters)
        f". Continue it with: {how_invoked()} resume {run_id}",
    )


@cli.command("undo-rewind")
@click.argument("run_id")
@click.option("--force", is_flag=True, help="Even if a process seems to be executing the run.")
@pass_ctx
@handle_errors
def undo_rewind(ctx: Context, run_id: str, force: bool) -> None:
    """Put a run back exactly as it was before its newest rewind.

    Refused when the run got new frames after the rewind (the message says what to do).

    \b
    Example:
      smithers-tt undo-rewind RUN
    """
    run_id = ctx.db.resolve_run_id(run_id)
    with progress_bar("undoing the rewind", unit=""):
        snap = ctx.db.undo_rewind(run_id, force=force)
    if ctx.as_json:
        emit_json({"run_id": run_id, "frame_no": snap.frame_no, "status": snap.status})
        return
    ctx.out.line(
        f"undid the rewind of {shown_id(ctx, run_id)}: it is back at frame {snap.frame_no}, ",
        state(ctx.db.get_run(run_id).status),
    )


@cli.command()
@click.argument("run_id")
@pass_ctx
@handle_errors
def materialize(ctx: Context, run_id: str) -> None:
    """Give a fork its own copy of the history it reads from its parent.

    A fork is made by reference: it copies nothing from its parent. Resuming, cancelling,
    resetting or rewinding it gives it its own copy first, and so does rewinding or pruning
    its parent; this does it now (before deleting a LangGraph thread a fork reads, say). A
    run with its own history already is left as it is.

    \b
    Example:
      smithers-tt materialize RUN
    """
    run_id = ctx.db.resolve_run_id(run_id)
    with progress_bar("copying what the fork inherits", unit=""):
        done = ctx.db.materialize(run_id)
    if ctx.as_json:
        emit_json({"run_id": run_id, "materialized": done})
        return
    short = shown_id(ctx, run_id)
    ctx.out.line(
        f"{short} now has its own copy of the history it inherited"
        if done
        else f"{short} has a history of its own already; nothing was changed"
    )


def read_json_file(path: str, what: str) -> Any:
    """The JSON document in the file ``path`` (``what`` names the file in the error: "the
    checkpoint file 'a.json' for --checkpoint research")."""
    try:
        with open(path, encoding="utf-8") as handle:
            content = handle.read()
    except OSError as error:
        raise InvalidArgument(f"cannot read {what}: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise click.UsageError(f"{what} is not JSON: it is not UTF-8 text") from error
    return json_argument(content, what)


def _edits(pairs: tuple[str, ...]) -> dict[str, AgentCheckpoint]:
    edits = {}
    for node, path in name_values(pairs, "--checkpoint", "NODE=FILE.json").items():
        what = f"the checkpoint file {path!r} for --checkpoint {node}"
        try:
            edits[node] = AgentCheckpoint.from_json(read_json_file(path, what))
        except CheckpointInvalid as error:  # JSON, but not an envelope
            raise click.UsageError(f"{what}: {error}") from error
    return edits


@cli.command()
@click.argument("run_id")
@click.argument("frame_no", type=int)
@reset_option
@click.option("--input", "input_json", metavar="JSON", help="Replace the run input.")
@click.option(
    "--checkpoint",
    "edits",
    multiple=True,
    metavar="NODE=FILE",
    help="Resume NODE from the checkpoint envelope in FILE (JSON).",
)
@label_option
@pass_ctx
@handle_errors
def fork(
    ctx: Context,
    run_id: str,
    frame_no: int,
    reset_nodes: tuple[str, ...],
    input_json: str | None,
    edits: tuple[str, ...],
    label_pairs: tuple[str, ...],
) -> None:
    """Create a child run whose frame 0 is RUN's frame FRAME_NO.

    \b
    Examples:
      smithers-tt fork RUN 9 --reset write
      smithers-tt fork RUN 9 --input '{"topic": "wasp"}'
      smithers-tt fork RUN 9 --checkpoint research=edited.json
      smithers-tt fork RUN 9 --reset write --label case=shorter-draft
    """
    run_id = ctx.db.resolve_run_id(run_id)
    options = {
        "labels": dict(parse_label(pair) for pair in label_pairs),
        "reset": list(reset_nodes),
        "input": None if input_json is None else json_argument(input_json, "--input"),
        "checkpoints": _edits(edits),
    }
    with progress_bar(f"forking at frame {frame_no}", unit=""):
        child = ctx.db.fork(run_id, frame_no, **options)
    if ctx.as_json:
        emit_json(
            {
                "run_id": child.id,
                "parent_run_id": run_id,
                "parent_frame_no": frame_no,
                "status": child.status,
            }
        )
        return
    short = shown_ids(ctx, [child.id, run_id])
    ctx.out.line(
        f"forked {short[child.id]} from {short[run_id]} at frame {frame_no} (",
        state(child.status),
        f"). Run it with: {how_invoked()} resume {child.id}",  # whole, as rewind's
    )


def _finished(ctx: Context, run: Any, *, replayed: bool = False) -> None:
    """Print a run's status after it executed: its output or error, or where it paused; for
    a replay, the model calls (and tokens) of its parent it reused instead of making again."""
    pause = run.pause
    reused = run.reused_model_calls() if replayed else []
    saved = {"calls": len(reused), "tokens": sum(c.total_tokens or 0 for c in reused)}
    if ctx.as_json:
        emit_json(
            {
                "run_id": run.id,
                "status": run.status,
                "error": run.error,
                "output": run.output,
                "pause": None if pause is None else dataclasses.asdict(pause),
                **({"reused_model_calls": saved} if replayed else {}),
            }
        )
        return
    short = shown_id(ctx, run.id)
    if replayed:
        ctx.out.line(
            f"reused {saved['calls']} model call(s) ({saved['tokens']:,} tokens) of "
            f"{shown_id(ctx, run.record.parent_run_id)} instead of making them again"
        )
    if pause is None:
        ctx.out.line(f"run {short} ", state(run.status), f": {run.error}" if run.error else "")
        return
    where = "while running" if pause.when == "ask" else pause.when
    ctx.out.line(
        f"run {short} ", state("paused"), f" ({pause.reason}) {where} {pause.node_id}",
        f": {one_line(pause.question)}" if pause.question is not None else "",
    )  # fmt: skip
    ctx.out.line(f"continue it with: {how_invoked()} continue {short} --answer JSON")


@cli.command()
@click.argument("run_id")
@click.argument("frame_no", type=int)
@workflow_option
@reset_option
@label_option
@pass_ctx
@handle_errors
def replay(
    ctx: Context,
    run_id: str,
    frame_no: int,
    spec: str | None,
    reset_nodes: tuple[str, ...],
    label_pairs: tuple[str, ...],
) -> None:
    """Fork RUN at FRAME_NO and execute the child (labelled replay_of=RUN).

    \b
    Example:
      smithers-tt replay RUN 9 --reset write
    """
    wf = load_workflow(spec, ctx.db.get_run(run_id).record.workflow)
    labels = dict(parse_label(pair) for pair in label_pairs)
    child = ctx.db.replay(run_id, frame_no, wf, reset=list(reset_nodes), labels=labels)
    _finished(ctx, child, replayed=True)


@cli.command()
@click.argument("run_id")
@workflow_option
@click.option(
    "--accept-changed", is_flag=True, help="Resume even though the workflow definition changed."
)
@pass_ctx
@handle_errors
def resume(ctx: Context, run_id: str, spec: str | None, accept_changed: bool) -> None:
    """Continue an unfinished run here (after a crash, a rewind, a fork or a reset).

    \b
    Example:
      smithers-tt resume RUN --workflow mypkg.flows:report
    """
    wf = load_workflow(spec, ctx.db.get_run(run_id).record.workflow)
    _finished(ctx, ctx.db.resume(run_id, wf, accept_changed=accept_changed))


@cli.command()
@click.argument("run_id")
@pass_ctx
@handle_errors
def cancel(ctx: Context, run_id: str) -> None:
    """Cancel a run (its owner gives agents a short grace to save a final checkpoint).

    \b
    Example:
      smithers-tt cancel RUN
    """
    run_id = ctx.db.resolve_run_id(run_id)
    before = ctx.db.get_run(run_id).status
    ctx.db.cancel(run_id)  # a run that ended is left as it is
    status = ctx.db.get_run(run_id).status
    if ctx.as_json:
        emit_json({"run_id": run_id, "status": status})
        return
    if before in ENDED:
        ctx.out.line(f"{shown_id(ctx, run_id)} is already ", state(before), "; nothing was changed")
        return
    ctx.out.line(f"cancel requested for {shown_id(ctx, run_id)} (now ", state(status), ")")


@cli.command()
@click.argument("run_id")
@click.argument("node_id")
@click.option("--dependents", is_flag=True, help="Also reset the tasks that need NODE_ID.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_ctx
@handle_errors
def reset(ctx: Context, run_id: str, node_id: str, dependents: bool, yes: bool) -> None:
    """Retry a node from scratch (its attempts leave the live state; frames keep them).

    \b
    Example:
      smithers-tt reset RUN write --dependents --yes
    """
    run_id = ctx.db.resolve_run_id(run_id)
    short = shown_id(ctx, run_id)
    _confirm(f"Reset {node_id}{' and its dependents' if dependents else ''} of run {short}?", yes)
    gone = ctx.db.reset(run_id, node_id, dependents=dependents)
    if ctx.as_json:
        emit_json({"run_id": run_id, "reset": gone})
        return
    ctx.out.line(f"reset {', '.join(gone)}; run them with: {how_invoked()} resume {short}")
