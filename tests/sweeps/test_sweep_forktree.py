"""The fork tree draws a sweep's branches as one group: a node naming the sweep, its fork
frame and its variants, with the branches under it; other forks stay as they were."""

from __future__ import annotations

import pytest

import smithers_tt as st
from tests.sweeps._flows import sweep_workflow

pytest.importorskip("ipywidgets")


@pytest.fixture
def tree(db: st.Database):
    wf, _ = sweep_workflow()
    parent = db.run(wf, {"topic": "ants"})
    plain = db.fork(parent.id, 2)
    not_a_sweep = db.fork(parent.id, 3, labels={"sweep": "no-such-sweep"})
    sweep = db.sweep(parent.id, 4, {"as-is": {}, "bees": {"input": {"topic": "bees"}}}, workflow=wf)
    dbg = db.debug(parent.id, workflow=wf)
    yield dbg, sweep, plain, not_a_sweep
    dbg.close()


def _margin(widget) -> int:
    return int(widget.layout.margin.split()[-1].removesuffix("px"))


def test_the_branches_of_a_sweep_are_one_node_with_the_branches_under_it(tree) -> None:
    dbg, sweep, plain, not_a_sweep = tree
    ft = dbg.fork_tree
    branches = sweep.branches()
    assert list(ft.groups) == [sweep.id]
    group = ft.groups[sweep.id]
    assert group.description == f"▾ sweep {sweep.id} · fork @ frame 4 · 2 branches: as-is, bees"
    shown = list(ft.list.children)
    at = shown.index(group)
    assert shown[at + 1 : at + 3] == [ft.buttons[branches[n].id] for n in ("as-is", "bees")]
    assert all(_margin(shown[at + i]) == _margin(group) + 16 for i in (1, 2))
    assert ft.buttons[branches["bees"].id].description.startswith("bees · ")
    assert ft.buttons[branches["bees"].id].description.endswith(" · finished · fork @ frame 4")
    # Other forks (one with a label sweep=X of no sweep) are drawn as before, outside it.
    for run in (plain, not_a_sweep):
        assert ft.buttons[run.id] in shown and ft.buttons[run.id] not in shown[at : at + 3]
        assert _margin(ft.buttons[run.id]) == _margin(group)
    assert len(shown) == 6  # root, two forks, the sweep's node and its two branches


def test_the_sweeps_node_marks_the_promoted_branch_and_folds(tree) -> None:
    dbg, sweep, _, _ = tree
    ft = dbg.fork_tree
    sweep.promote("bees")
    ft.update()
    assert ft.groups[sweep.id].description.endswith("2 branches: as-is, bees (promoted)")
    ft.groups[sweep.id].click()
    assert ft.groups[sweep.id].description.startswith("▸ sweep")
    assert not any(ft.buttons[r.id] in ft.list.children for r in sweep.branches().values())
    ft.groups[sweep.id].click()
    assert all(ft.buttons[r.id] in ft.list.children for r in sweep.branches().values())


def test_a_branch_clicked_in_the_group_is_shown_in_the_debugger(tree) -> None:
    dbg, sweep, _, _ = tree
    bees = sweep.branches()["bees"].id
    dbg.fork_tree.buttons[bees].click()
    assert dbg.model.run_id == bees
    assert dbg.fork_tree.buttons[bees].button_style == "info"
    assert list(dbg.fork_tree.groups) == [sweep.id]  # the same group, seen from a branch


def test_a_run_forked_from_a_branch_is_drawn_under_that_branch(db: st.Database, tree) -> None:
    dbg, sweep, _, _ = tree
    bees = sweep.branches()["bees"].id
    grandchild = db.fork(bees, 3)
    dbg.model.switch_run(grandchild.id)  # the tree is read again
    ft = dbg.fork_tree
    assert _margin(ft.buttons[grandchild.id]) == _margin(ft.buttons[bees]) + 16
    assert not ft.buttons[grandchild.id].description.startswith("bees")  # not a branch
