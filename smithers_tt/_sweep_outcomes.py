"""A sweep's outcomes as a pandas DataFrame, and a plotly figure of them (pandas and plotly
are extras: this module is imported only by ``Sweep.outcomes`` and ``Sweep.plot``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from smithers_tt._extras import require_extra

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class Swept(Protocol):
    """What these functions use of a :class:`~smithers_tt.sweeps.Sweep` (which imports this
    module on use: named by protocol, no import cycle)."""

    id: str
    run_id: str
    frame_no: int

    def rows(self, prices: Any = None) -> list[dict[str, Any]]: ...


COLUMNS = ["variant", "run_id", "status", "error", "duration_s", "frames", "model_calls",
           "prompt_tokens", "completion_tokens", "cost"]  # fmt: skip
"""The columns every outcome table starts with; ``output.<task>`` and ``score`` (or
``score.<key>``) follow."""


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    """A top-level dict as ``prefix.key`` columns (nested values as JSON text); anything
    else as the one column ``prefix``."""
    if isinstance(value, dict):
        return {f"{prefix}.{k}": _cell(v) for k, v in value.items()}
    return {prefix: _cell(value)}


def _cell(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value


def _flat_row(row: dict[str, Any]) -> dict[str, Any]:
    flat = {k: row[k] for k in COLUMNS}
    if row["status"] == "finished":
        flat.update(_flat("output", row["output"]))
    if row["score"] is not None:
        flat.update(_flat("score", row["score"]))
    return flat


def outcomes(sweep: Swept, prices: Any = None) -> pd.DataFrame:
    """One row per variant, in the order given: ``variant``, ``run_id`` (its branch),
    ``status``, ``error``, ``duration_s`` (first to newest frame of the branch), ``frames``
    (the branch's own frames after the fork), ``model_calls``, ``prompt_tokens``,
    ``completion_tokens`` and ``cost`` (the branch's own calls, priced by ``prices``),
    ``output.<task>`` per top-level field of a
    finished branch's output (nested values as JSON text), and ``score`` (a number) or
    ``score.<key>`` (a dict) when scored."""
    require_extra("pandas", needed_for="sweep outcomes")
    import pandas as pd

    frame = pd.DataFrame([_flat_row(row) for row in sweep.rows(prices)])
    for column in COLUMNS:
        if column not in frame:
            frame[column] = None
    rest = [c for c in frame.columns if c not in COLUMNS]
    return frame[COLUMNS + rest]


def plot(sweep: Swept) -> Any:
    """A plotly figure: per variant, its score(s) (when scored) above its duration,
    coloured by status."""
    require_extra("plotly", "pandas", needed_for="the sweep plot")
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    table = outcomes(sweep)
    scores = [c for c in table.columns if c == "score" or c.startswith("score.")]
    rows = 2 if scores else 1
    titles = ("score", "duration (s)") if scores else ("duration (s)",)
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, subplot_titles=titles)
    names = [str(v) for v in table["variant"]]
    for column in scores:
        fig.add_trace(
            go.Bar(x=names, y=table[column], name=column, hovertext=table["status"]), 1, 1
        )
    fig.add_trace(
        go.Bar(
            x=names,
            y=table["duration_s"],
            name="duration (s)",
            hovertext=table["status"],
            marker_color=["#d62728" if s == "failed" else "#1f77b4" for s in table["status"]],
        ),
        rows,
        1,
    )
    fig.update_layout(
        title=f"sweep {sweep.id} of run {sweep.run_id[:12]} at frame {sweep.frame_no}",
        barmode="group",
        height=220 * rows + 80,
    )
    return fig
