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


def test_promote_asks_first_and_a_cancel_changes_nothing(db: st.Database, sweep: st.Sweep) -> None:
    view = sweep.view()
    assert view.promote_choice.options == ("<i>as is</i>", "bees")
    view.promote_choice.value = "bees"
    view.promote_button.click()
    assert view.confirm_box.layout.display is None
    assert "Promote &#x27;bees&#x27;" in view.confirm_text.value
    assert "other branches stay" in view.confirm_text.value
    view.cancel_button.click()
    assert view.confirm_box.layout.display == "none"
    assert db.get_sweep(sweep.id).promoted is None and "promoted" not in view.table.value


def test_promote_after_confirming_marks_the_branch_in_the_table(
    db: st.Database, sweep: st.Sweep
) -> None:
    view = sweep.view()
    bees = sweep.branches()["bees"].id
    view.promote_choice.value = "bees"
    view.promote_button.click()
    view.confirm_button.click()
    assert db.get_sweep(sweep.id).promoted == "bees"
    assert "promoted bees: branch" in view.report.value and bees[:6] in view.report.value
    promoted_rows = [row for row in view.table.value.split("<tr") if "stt-promoted-mark" in row]
    assert len(promoted_rows) == 1 and "&lt;script&gt;bees" in promoted_rows[0]
    assert view.confirm_box.layout.display == "none"


def test_promote_with_delete_others_deletes_them_and_closes_a_debugger_on_one(
    db: st.Database, sweep: st.Sweep
) -> None:
    view = sweep.view()
    first = sweep.branches()["<i>as is</i>"].id
    view.open_choice.value = first
    view.open_button.click()
    view.diff_button.click()
    assert "outputs" in view.diff_html.value
    view.promote_choice.value = "bees"
    view.delete_others.value = True
    view.promote_button.click()
    assert "delete the 1 other branch(es) (&lt;i&gt;as is&lt;/i&gt;)" in view.confirm_text.value
    assert view.confirm_button.description == "Promote and delete"
    view.confirm_button.click()
    assert "deleted branch" in view.report.value
    assert db.get_sweep(sweep.id).status() == {"<i>as is</i>": "deleted", "bees": "finished"}
    assert view.debugger is None and view.opened.children == ()
    assert view.diff_html.value == ""  # it diffed the deleted branch
    assert view.left.options == (("bees", sweep.branches()["bees"].id),)
    assert "deleted" in view.table.value


def test_promote_is_off_on_a_read_only_store(db: st.Database, sweep: st.Sweep) -> None:
    with st.connect(db.url, read_only=True) as ro:
        view = ro.get_sweep(sweep.id).view()
        assert view.promote_button.disabled and "Actions are off" in view.report.value
        view.promote_button.click()
        assert view.pending is None
