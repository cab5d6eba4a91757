"""A checkpoint ref that disagrees with its frame (missing, not a checkpoint, or another ref's
checkpoint) is never followed silently: every view that follows refs refuses with
``StoreCorrupt`` naming the run, the ref and ``smithers-tt verify``, live or at a snapshot's
open; the views that do not follow refs still answer, and ``raw.*`` shows the damage."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import StoreCorrupt
from smithers_tt.store import CheckpointRef

from .conftest import MODES, TOPIC

DAMAGES = {
    "missing": ("is missing", lambda refs, frames: 1_000_000),
    "not-a-checkpoint": ("is not a checkpoint but a run_created frame", lambda refs, frames: 0),
    "another-checkpoint": (
        "is the checkpoint of another node, attempt or sequence",
        lambda refs, frames: frames[1],
    ),
}
"""How a ref is damaged: what the error says, and the frame it is made to name (given the
run's refs and each one's frame)."""


def _damaged(db: st.Database, kind: str) -> CheckpointRef:
    """Run the demo, point its first ref at the frame ``kind`` says, return that ref."""
    wf, _ = demo_workflow()
    run = db.run(wf, TOPIC)
    refs = db.store.list_refs(run.id).items
    frames = [f.frame_no for ref in refs for f in db.store.frames(run.id) if f.kind == "checkpoint"
              and (f.node_id, f.iteration, f.attempt, f.sequence)
              == (ref.node_id, ref.iteration, ref.attempt, ref.sequence)]  # fmt: skip
    first = refs[0]
    with db.engine.sa.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE tt_checkpoint_refs SET frame_no = :f WHERE run_id = :r AND node_id = :n "
                "AND iteration = :i AND attempt = :a AND sequence = :s"
            ),
            {"f": DAMAGES[kind][1](refs, frames), "r": first.run_id, "n": first.node_id,
             "i": first.iteration, "a": first.attempt, "s": first.sequence},
        )  # fmt: skip
    return first


def _says(error: StoreCorrupt, ref: CheckpointRef, kind: str) -> None:
    text = str(error)
    assert f"(run {ref.run_id}, node {ref.node_id}, iteration {ref.iteration}, " in text
    assert f"attempt {ref.attempt}, sequence {ref.sequence})" in text
    assert DAMAGES[kind][0] in text
    assert "smithers-tt verify" in text


@pytest.mark.parametrize("kind", list(DAMAGES))
def test_live_lineage_refuses_views_that_follow_a_ref_that_disagrees_with_its_frame(
    db: st.Database, kind: str
) -> None:
    ref = _damaged(db, kind)
    with db.lineage() as lin:
        follow = [
            lin.checkpoints,
            lin.contents,
            lin.dedup,
            lambda: lin.dedup(by="run"),
            lambda: lin.sql("SELECT count(*) FROM checkpoints"),
        ]
        for read in follow:
            with pytest.raises(StoreCorrupt) as caught:
                read()
            _says(caught.value, ref, kind)
        assert len(lin.runs()) == 1  # views that do not follow refs still answer
        assert len(lin.sql("FROM raw.tt_checkpoint_refs")) == lin.runs().ref_count[0]


@pytest.mark.parametrize("mode", [m for m in MODES if m != "live"])
@pytest.mark.parametrize("kind", list(DAMAGES))
def test_snapshot_lineage_refuses_to_open_on_a_ref_that_disagrees_with_its_frame(
    db: st.Database, kind: str, mode: str
) -> None:
    ref = _damaged(db, kind)
    with pytest.raises(StoreCorrupt) as caught:
        db.lineage(**MODES[mode])
    _says(caught.value, ref, kind)
