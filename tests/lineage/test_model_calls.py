"""Model calls in the lineage: the ``model_calls`` view has the columns of
``run.model_calls()``, prices from the lineage's ``prices`` (never guessed), hides rewound
calls, and answers "the most expensive runs this week by workflow and label" in one query;
every reader, both backends."""

from __future__ import annotations

import math

import pytest

import smithers_tt as st
from smithers_tt._model_calls import CALL_COLUMNS
from smithers_tt.demo import DEMO_PRICES, demo_workflow
from smithers_tt.lineage import VIEWS, Lineage

OPTIONS = pytest.mark.parametrize(
    "options", [{}, {"snapshot": True}, {"reader": "arrow"}], ids=["live", "snapshot", "arrow"]
)

TOP_RUNS = """
SELECT r.workflow, coalesce(l.value, '-') AS label, c.run_id, sum(c.cost) AS cost,
       sum(c.total_tokens) AS tokens
FROM model_calls AS c JOIN runs AS r USING (run_id)
LEFT JOIN run_labels AS l ON l.run_id = c.run_id AND l.key = 'case'
WHERE c.started_at >= now() - INTERVAL 7 DAY
GROUP BY ALL ORDER BY cost DESC NULLS LAST LIMIT 20
"""


def _run(db: st.Database, topic: str, **labels: str) -> st.Run:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run = db.run(wf, {"topic": topic}, labels=labels)
    assert run.status == "finished"
    return run


def test_the_view_and_the_dataframe_have_the_same_columns(db: st.Database) -> None:
    run = _run(db, "bee")
    view = next(v for v in VIEWS if v.name == "model_calls")
    assert [name for name, _ in view.columns] == list(CALL_COLUMNS)
    assert list(run.model_calls().columns) == list(CALL_COLUMNS)
    assert all(f"``{name}``" in (Lineage.model_calls.__doc__ or "") for name in CALL_COLUMNS)


@OPTIONS
def test_the_view_lists_each_call_once_priced_as_the_dataframe_prices_it(
    db: st.Database, options: dict
) -> None:
    run = _run(db, "bee")
    ours = run.model_calls(DEMO_PRICES)
    with db.lineage(prices=DEMO_PRICES, **options) as lin:
        seen = lin.model_calls(run.id)
    assert seen["call_id"].tolist() == ours["call_id"].tolist()
    assert seen["total_tokens"].tolist() == ours["total_tokens"].tolist()
    assert [None if math.isnan(c) else round(c, 12) for c in seen["cost"]] == [
        None if math.isnan(c) else round(c, 12) for c in ours["cost"]
    ]
    assert seen["status"].tolist() == ours["status"].tolist()


def test_without_prices_every_cost_is_null_and_tokens_stay(db: st.Database) -> None:
    run = _run(db, "bee")
    with db.lineage() as lin:
        seen = lin.model_calls(run.id)
    assert seen["cost"].isna().all() and seen["prompt_tokens"].notna().any()


def test_prices_come_from_a_toml_or_json_file(db: st.Database, tmp_path) -> None:
    run = _run(db, "bee")
    path = tmp_path / "prices.toml"
    path.write_text('["demo-large"]\ninput = 2.5\noutput = 10.0\n')
    with db.lineage(prices=path) as lin:
        seen = lin.model_calls(run.id).set_index("call_id")
    expected = run.model_calls(path).set_index("call_id")
    large = expected["model"] == "demo-large"
    assert (
        seen.loc[large, "cost"].round(12).tolist() == expected.loc[large, "cost"].round(12).tolist()
    )
    assert seen.loc[~large, "cost"].isna().all()  # demo-small is not in that file


def test_the_most_expensive_runs_by_workflow_and_label_are_one_query(db: st.Database) -> None:
    cheap = _run(db, "ant", case="cheap")
    dear = _run(db, "a very long topic name that makes every prompt longer", case="dear")
    with db.lineage(prices=DEMO_PRICES) as lin:
        top = lin.sql(TOP_RUNS)
    assert top["run_id"].tolist() == [dear.id, cheap.id]
    assert top["label"].tolist() == ["dear", "cheap"]
    assert set(top["workflow"]) == {"demo-report"}
    assert (top["cost"] > 0).all()


def test_rewound_calls_leave_the_view(db: st.Database) -> None:
    run = _run(db, "bee")
    keep = run.model_call_records()[0].frame_no
    db.rewind(run.id, keep, confirm=True)
    with db.lineage() as lin:
        seen = lin.model_calls(run.id)
    assert seen["call_id"].tolist() == [c.call_id for c in run.model_call_records()]
    assert (seen["frame_no"] <= keep).all()
