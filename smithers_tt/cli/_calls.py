"""``smithers-tt calls``: every model call of a run, with tokens, latency and cost."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from smithers_tt import PriceTable
from smithers_tt._model_calls import CallTotals, ModelCallRecord
from smithers_tt.cli._app import Context, cli, handle_errors, pass_ctx
from smithers_tt.cli._output import emit_json, one_line, when
from smithers_tt.cli._runs import shown_ids


def _number(value: float | int | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.6f}"


def _totals(t: CallTotals) -> dict[str, Any]:
    return {
        "calls": t.calls,
        "errors": t.errors,
        "prompt_tokens": t.prompt_tokens,
        "completion_tokens": t.completion_tokens,
        "cached_tokens": t.cached_tokens,
        "reasoning_tokens": t.reasoning_tokens,
        "total_tokens": t.total_tokens,
        "cost": t.cost,
        "unpriced_calls": t.unpriced,
        "model_ms": t.model_ms,
        "wall_ms": t.wall_ms,
    }


def _call(c: ModelCallRecord, prices: PriceTable) -> dict[str, Any]:
    return {
        **dataclasses.asdict(c),
        "total_tokens": c.total_tokens,
        "cost": prices.cost(c.model, c.prompt_tokens, c.completion_tokens, c.cached_tokens),
    }


@cli.command()
@click.argument("run_id")
@click.option("--frame", "frame_no", type=int, metavar="N", help="The calls frame N sees.")
@click.option(
    "--prices",
    metavar="FILE",
    help="A .json or .toml price table (model -> input, output, cached_input per million "
    "tokens); without it no cost is shown.",
)
@pass_ctx
@handle_errors
def calls(ctx: Context, run_id: str, frame_no: int | None, prices: str | None) -> None:
    """Every model call of a run (each HTTP try), with tokens, latency, status and cost.

    A fork lists its parent's calls up to the fork frame first (marked inherited). Costs
    come only from --prices: a model it does not name shows tokens and no cost.

    \b
    Examples:
      smithers-tt calls RUN
      smithers-tt calls RUN --prices prices.toml --json
    """
    table = PriceTable.of(prices)
    run = ctx.read_db.get_run(run_id)
    found = run.model_call_records(frame_no)
    totals = run.model_call_totals(table, frame_no=frame_no)
    if ctx.as_json:
        emit_json(
            {
                "run_id": run.id,
                "calls": [_call(c, table) for c in found],
                "totals": _totals(totals.run),
                "nodes": {node: _totals(t) for node, t in sorted(totals.nodes.items())},
            }
        )
        return
    if not found:
        ctx.out.line(f"run {run.id} recorded no model calls")
        return
    shown = shown_ids(ctx, {c.run_id for c in found})
    ctx.out.table(
        ["#", "node", "try", "frame", "model", "status", "prompt", "compl.", "cached",
         "ttft ms", "ms", "cost", "error"],
        [
            [
                n, c.node_id + (f"[{c.iteration}]" if c.iteration else ""),
                c.attempt,
                f"{shown[c.run_id]}:{c.frame_no}" if c.inherited else c.frame_no,
                c.model or "-", c.status if c.status is not None else "-",
                _number(c.prompt_tokens), _number(c.completion_tokens), _number(c.cached_tokens),
                _number(c.ttft_ms), _number(c.latency_ms),
                _cost(table.cost(c.model, c.prompt_tokens, c.completion_tokens, c.cached_tokens)),
                one_line(c.error) or "",
            ]
            for n, c in enumerate(found, 1)
        ],
        flex=["error"],
    )  # fmt: skip
    ctx.out.table(
        ["node", "calls", "errors", "tokens", "cost", "model ms", "wall ms"],
        [
            [node, t.calls, t.errors, _number(t.total_tokens), _cost(t.cost),
             _number(t.model_ms), _number(t.wall_ms)]
            for node, t in sorted(totals.nodes.items())
        ],
    )  # fmt: skip
    t = totals.run
    unpriced = f" ({t.unpriced} call(s) of unpriced models not counted)" if t.unpriced else ""
    ctx.out.line(
        f"{t.calls} call(s), {t.errors} failed, {t.total_tokens:,} tokens "
        f"({t.prompt_tokens:,} prompt, {t.completion_tokens:,} completion), cost "
        f"{_cost(t.cost)}{unpriced}; model time {_number(t.model_ms)} ms of "
        f"{_number(t.wall_ms)} ms in attempts; first call {when(found[0].started_at_ms)}"
    )
