"""A sweep's outcomes: one row per variant (status, error, duration, frames, flattened output,
score), escaped where shown as HTML, and a plotly figure of scores and durations."""

from __future__ import annotations

import pytest

import smithers_tt as st
from tests.sweeps._flows import sweep_workflow

pytest.importorskip("pandas")


def _score(run: st.Run) -> dict[str, float]:
    return {"steps": float(run.output["act"]["steps"]), "long": len(run.output["act"]["answer"])}


@pytest.fixture
def sweep(db: st.Database) -> st.Sweep:
    wf, _ = sweep_workflow()
    parent = db.run(wf, {"topic": "ants"})
    variants = {
        "<b>bees</b>": {"input": {"topic": "<b>bees</b>"}},
        "fails": {"input": {"fail": True}},
        "plain": {},
    }
    return db.sweep(parent.id, 4, variants, workflow=wf, score=_score)


def test_outcomes_are_one_row_per_variant_with_output_fields_and_score(sweep: st.Sweep) -> None:
    table = sweep.outcomes()
    assert list(table["variant"]) == ["<b>bees</b>", "fails", "plain"]
    assert list(table["status"]) == ["finished", "failed", "finished"]
    assert list(table.columns[:6]) == [
        "variant",
        "run_id",
        "status",
        "error",
        "duration_s",
        "frames",
    ]
    row = table.set_index("variant").loc["plain"]
    assert row["output.act"] == '{"answer": "ants after 3 steps", "model": "m1", "steps": 3}'
    assert row["score.steps"] == 3.0 and row["frames"] > 0 and row["duration_s"] >= 0
    failed = table.set_index("variant").loc["fails"]
    assert "asked to fail" in failed["error"] and failed["output.act"] != failed["output.act"]
    # Scored failures too: the score function sees every ended branch (it raises here: none).
    assert set(sweep.scores) == {"<b>bees</b>", "plain"}


def test_a_score_that_raises_on_a_branch_is_left_out_and_the_rest_scored(db: st.Database) -> None:
    wf, _ = sweep_workflow()
    parent = db.run(wf, {"topic": "ants"})
    variants = {"ok": {}, "bad": {"input": {"fail": True}}}
    sweep = db.sweep(parent.id, 4, variants, workflow=wf, score=lambda r: r.output["act"]["steps"])
    assert sweep.scores == {"ok": 3}
    assert "score" in sweep.outcomes().columns


def test_outcomes_shown_as_html_escape_what_branches_produced(sweep: st.Sweep) -> None:
    html = sweep._repr_html_()
    assert "<b>bees</b>" not in html and "&lt;b&gt;bees&lt;/b&gt;" in html


def test_the_plot_has_a_bar_per_score_and_durations_per_variant(sweep: st.Sweep) -> None:
    pytest.importorskip("plotly")
    fig = sweep.plot()
    names = [trace.name for trace in fig.data]
    assert names == ["score.long", "score.steps", "duration (s)"]  # keys sorted, as stored
    assert list(fig.data[-1].x) == ["<b>bees</b>", "fails", "plain"]


def test_outcomes_count_each_branchs_own_model_calls_tokens_and_cost(db: st.Database) -> None:
    from smithers_tt.demo import DEMO_PRICES, demo_workflow

    wf, _ = demo_workflow()
    parent = db.run(wf, {"topic": "ants"})
    frame = [f.frame_no for f in parent.frames() if f.kind == "checkpoint"][1]  # mid research
    sweep = db.sweep(parent.id, frame, {"a": {}, "rewrite": {"reset": ["write"]}}, workflow=wf)
    table = sweep.outcomes(prices=DEMO_PRICES).set_index("variant")
    for name, run in sweep.branches().items():
        records = run.model_call_records()
        own = [c for c in records if not c.inherited]
        assert 0 < len(own) < len(records)  # its parent's calls before the frame are not its
        assert table.loc[name, "model_calls"] == len(own)
        assert table.loc[name, "prompt_tokens"] == sum(c.prompt_tokens or 0 for c in own)
        assert table.loc[name, "cost"] > 0
    assert sweep.outcomes()["cost"].isna().all()  # no prices given: unknown, never guessed
