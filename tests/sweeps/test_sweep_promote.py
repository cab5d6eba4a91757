"""Promoting a sweep's branch, on both backends: the choice is kept with the sweep, the other
branches stay unless the person asks to delete them, and deleting them never touches the
parent, the promoted branch, a branch not ended or a branch another run was forked from."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import InvalidArgument
from smithers_tt.store.backend._migrate import upgrade
from tests.sweeps._flows import sweep_workflow

VARIANTS = {"as-is": {}, "bees": {"input": {"topic": "bees"}}, "wasps": {"input": {"topic": "w"}}}


@pytest.fixture
def sweep(db: st.Database) -> st.Sweep:
    wf, _ = sweep_workflow()
    parent = db.run(wf, {"topic": "ants"})
    return db.sweep(parent.id, 4, VARIANTS, workflow=wf)


def _run_ids(db: st.Database) -> set[str]:
    return {r.id for r in db.runs(limit=100)}


def test_promote_records_the_branch_with_the_sweep_and_leaves_the_others(
    db: st.Database, sweep: st.Sweep
) -> None:
    before = _run_ids(db)
    bees = sweep.branches()["bees"]

    done = sweep.promote("bees")

    assert (done.variant, done.run_id, done.deleted, done.kept) == ("bees", bees.id, [], {})
    reopened = db.get_sweep(sweep.id)
    assert reopened.promoted == "bees" and reopened.record.promoted_run_id == bees.id
    assert {row["variant"]: row["promoted"] for row in reopened.rows()} == {
        "as-is": False, "bees": True, "wasps": False
    }  # fmt: skip
    assert _run_ids(db) == before
    assert reopened.status() == dict.fromkeys(VARIANTS, "finished")


def test_promote_with_delete_others_deletes_the_other_branches_only(
    db: st.Database, sweep: st.Sweep
) -> None:
    parent = db.get_run(sweep.run_id)
    parent_frames = parent.frames()
    branches = sweep.branches()
    others = sorted(branches[n].id for n in ("as-is", "wasps"))

    done = sweep.promote("bees", delete_others=True)

    assert sorted(done.deleted) == others and done.kept == {}
    assert _run_ids(db) == {parent.id, branches["bees"].id}
    assert db.get_run(parent.id).frames() == parent_frames
    assert db.get_run(branches["bees"].id).output["act"]["answer"] == "bees after 3 steps"
    reopened = db.get_sweep(sweep.id)
    assert reopened.status() == {"as-is": "deleted", "bees": "finished", "wasps": "deleted"}
    assert reopened.record.discarded == {"as-is": branches["as-is"].id,
                                         "wasps": branches["wasps"].id}  # fmt: skip
    # A promoted sweep is decided: running it again makes no fork of the deleted variants.
    wf, calls = sweep_workflow()
    assert reopened.run(wf).status() == reopened.status()
    assert calls.lines == [] and _run_ids(db) == {parent.id, branches["bees"].id}
    with pytest.raises(InvalidArgument, match="was deleted"):
        reopened.promote("wasps")


def test_delete_others_keeps_a_branch_not_ended_and_one_forked_from(db: st.Database) -> None:
    wf, _ = sweep_workflow()
    parent = db.run(wf, {"topic": "ants"})
    variants = {"keep": {}, "paused": {"break_before": ["act"]}, "forked": {}, "gone": {}}
    sweep = db.sweep(parent.id, 4, variants, workflow=wf)
    branches = sweep.branches()
    child = db.fork(branches["forked"].id, 2)
    assert child.labels["variant"] == "forked"  # a fork inherits its parent's labels ...
    ids = {name: run.id for name, run in sweep.branches().items()}
    assert ids == {name: run.id for name, run in branches.items()}  # ... not its branch

    done = sweep.promote("keep", delete_others=True)

    assert done.deleted == [branches["gone"].id]
    assert set(done.kept) == {branches["paused"].id, branches["forked"].id}
    assert all(why for why in done.kept.values())
    assert _run_ids(db) == {parent.id, child.id, *(branches[n].id for n in variants if n != "gone")}
    assert sweep.status() == {"keep": "finished", "paused": "paused", "forked": "finished",
                              "gone": "deleted"}  # fmt: skip


def test_promoting_another_branch_replaces_the_choice(db: st.Database, sweep: st.Sweep) -> None:
    sweep.promote("bees")
    sweep.promote("wasps")
    assert db.get_sweep(sweep.id).promoted == "wasps"
    assert [row["variant"] for row in sweep.rows() if row["promoted"]] == ["wasps"]


@pytest.mark.parametrize(
    ("variant", "message"), [("nope", "has no variant 'nope'"), ("bees", "not made yet")]
)
def test_promote_refuses_a_variant_without_a_branch(
    db: st.Database, variant: str, message: str
) -> None:
    wf, _ = sweep_workflow()
    parent = db.run(wf, {"topic": "ants"})
    db.store.sweeps.create("sw-unmade", parent.id, 4, wf.name, {"bees": {}})  # never run
    sweep = db.get_sweep("sw-unmade")
    with pytest.raises(InvalidArgument, match=message):
        sweep.promote(variant)
    assert db.get_sweep(sweep.id).promoted is None


def test_0017_keeps_sweeps_made_before_and_lets_them_be_promoted_and_driven(db_url: str) -> None:
    raw = sa.create_engine(db_url)
    try:
        with raw.begin() as conn:
            upgrade(conn, to="0016_sweeps")
            conn.execute(
                sa.text(
                    "INSERT INTO tt_sweeps (sweep_id, run_id, frame_no, workflow, variants_json,"
                    " cancel_requested, created_at_ms) VALUES ('sw-old', 'r', 4, 'what-if',"
                    " '[[\"a\",{}]]', false, 1)"
                )
            )
        with st.connect(db_url) as db:  # migrates to the head, 0017 included
            old = db.get_sweep("sw-old")
            assert (old.variants, old.promoted, old.record.discarded) == ({"a": {}}, None, {})
            assert old.record.driver is None
            wf, _ = sweep_workflow()
            parent = db.run(wf, {"topic": "ants"})
            sweep = db.sweep(parent.id, 4, {"a": {}, "b": {}}, workflow=wf)
            sweep.promote("b", delete_others=True)
            assert db.get_sweep(sweep.id).promoted == "b"
        columns = {c["name"] for c in sa.inspect(raw).get_columns("tt_sweeps")}
        assert {"promoted_variant", "promoted_run_id", "promoted_at_ms", "discarded_json",
                "driver", "driver_until_ms"} <= columns  # fmt: skip
    finally:
        raw.dispose()
