"""The sweep view: what a person sees of a sweep's branches (escaped), a diff of two of them,
and a branch opened in its debugger."""

from __future__ import annotations

import pytest

import smithers_tt as st
from tests.sweeps._flows import sweep_workflow

pytest.importorskip("ipywidgets")


@pytest.fixture
def sweep(db: st.Database) -> st.Sweep:
    wf, _ = sweep_workflow()
    parent = db.run(wf, {"topic": "ants"})
    variants = {"<i>as is</i>": {}, "bees": {"input": {"topic": "<script>bees</script>"}}}
    return db.sweep(parent.id, 4, variants, workflow=wf, score=lambda r: 1.0)


def test_the_view_shows_each_branch_escaped_and_diffs_two_of_them(sweep: st.Sweep) -> None:
    view = sweep.view()
    table = view.table.value
    assert "&lt;i&gt;as is&lt;/i&gt;" in table and "<i>as is" not in table
    assert "<script>" not in table and "&lt;script&gt;bees" in table
    assert table.count("finished") >= 2
    a, b = (row["run_id"] for row in sweep.rows())
    assert (view.left.value, view.right.value) == (a, b)
    view.diff_button.click()
    shown = view.diff_html.value
    assert "outputs" in shown and "&lt;script&gt;bees" in shown and "<script>" not in shown


def test_open_shows_the_chosen_branchs_debugger(sweep: st.Sweep) -> None:
    view = sweep.view()
    branch = sweep.rows()[1]["run_id"]
    view.open_choice.value = branch
    view.open_button.click()
    assert view.opened.children == (view.debugger,)
    assert view.debugger.model.run_id == branch
    view.debugger.close()
