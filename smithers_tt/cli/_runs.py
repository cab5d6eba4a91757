"""Finding runs: ``smithers-tt runs`` (filtered by status and labels), and run ids as the
command line shows them: each shortened to its shortest unique prefix among the stored runs
(at least 8 characters), whole with ``--wide`` and in ``--json``. Every command that takes a
run id accepts such a prefix (``Database`` resolves it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import click

from smithers_tt._labels import parse_label
from smithers_tt.cli._app import Context, cli, handle_errors, pass_ctx
from smithers_tt.cli._output import emit_json, state, text, when


def shown_ids(ctx: Context, run_ids: Iterable[str | None]) -> dict[str, str]:
    """How the command line shows each of ``run_ids``: shortened (see the module), or whole
    with ``--wide``."""
    ids = {run_id for run_id in run_ids if run_id}
    if ctx.out.wide or not ids:
        return {run_id: run_id for run_id in ids}
    return ctx.read_db.store.short_run_ids(sorted(ids))


def shown_id(ctx: Context, run_id: str) -> str:
    """How the command line names one run in a message: as :func:`shown_ids` shows it."""
    return shown_ids(ctx, [run_id]).get(run_id, run_id)


def labels_cell(labels: dict[str, str]) -> str:
    """A run's labels in a table cell: ``case=retry owner=ana`` (``-`` for none)."""
    return " ".join(f"{key}={value}" for key, value in labels.items()) or "-"


@cli.command()
@click.option(
    "--status", help="Only runs with this status (queued, running, paused, finished ...)."
)
@click.option(
    "--label",
    "label_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only runs carrying this label; repeatable (a run must carry every one).",
)
@click.option("--limit", default=100, show_default=True, help="How many runs (1-1000).")
@pass_ctx
@handle_errors
def runs(ctx: Context, status: str | None, label_pairs: tuple[str, ...], limit: int) -> None:
    """List runs, oldest first, with their labels; ids are shortened (give a prefix of at
    least 6 characters wherever a run id is asked for).

    \b
    Examples:
      smithers-tt runs
      smithers-tt runs --label case=retry
      smithers-tt runs --status failed --json
      smithers-tt runs --status paused
    """
    labels = dict(parse_label(pair) for pair in label_pairs)
    chosen = ctx.read_db.runs(status=status, labels=labels, limit=limit)
    found = [(r.record, None) for r in chosen]
    if status == "paused" and len(found) < limit and not labels:  # threads have no labels
        found += waiting_threads(ctx.read_db, limit - len(found))  # LangGraph, at a pause
    if ctx.as_json:
        emit_json(
            [
                {**dataclasses.asdict(r), **({"status": "paused", "pause": p} if p else {})}
                for r, p in found
            ]
        )
        return
    short = shown_ids(ctx, [id_ for r, _ in found for id_ in (r.run_id, r.parent_run_id)])
    ctx.out.table(
        ["run", "workflow", "status", "labels", "frames", "parent", "created"],
        [
            [
                short.get(r.run_id, r.run_id),
                r.workflow if p is None else text(f"{r.workflow}: {_waits_on(p)}"),
                state("paused" if p else r.status),
                labels_cell(r.labels),
                r.clock + 1,  # frames 0 to clock: the count the run browser shows too
                f"{short[r.parent_run_id]}@{r.parent_frame_no}" if r.parent_run_id else "-",
                when(r.created_at_ms),
            ]
            for r, p in found
        ],
        flex=["labels"],
    )


def _waits_on(pause: dict[str, Any]) -> str:
    nodes = ", ".join(pause["nodes"])
    return f"{pause['reason']} {pause['when']} {nodes}" if nodes else pause["reason"]


def waiting_threads(db: Any, limit: int) -> list[tuple[Any, Any]]:
    """LangGraph threads waiting on an ``interrupt()`` or stopped at a static breakpoint
    (none when LangGraph is not installed)."""
    try:
        from smithers_tt.integrations.langgraph_view import paused_threads
    except ImportError:
        return []
    return list(paused_threads(db, limit))
