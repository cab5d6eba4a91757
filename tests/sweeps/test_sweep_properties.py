"""A seeded property test: for any set of variants (inputs, resets, edited checkpoints,
failures), a sweep makes one branch per variant, each branch comes to what its edits on top
of the parent's frame make it, a failure is its own branch's only, and the parent is
unchanged."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as hs

import smithers_tt as st
from tests.sweeps._flows import CODEC, STEPS, sweep_workflow

NAMES = hs.text(alphabet="abcxyz-", min_size=1, max_size=6)


@hs.composite
def edits(draw: hs.DrawFn) -> dict[str, Any]:
    edit: dict[str, Any] = {}
    if draw(hs.booleans()):
        edit["input"] = {"topic": draw(hs.sampled_from(["bees", "wasps"])),
                         "fail": draw(hs.booleans())}  # fmt: skip
    choice = draw(hs.sampled_from(["none", "reset-plan", "reset-act", "edit"]))
    if choice == "reset-plan":
        edit["reset"] = ["plan"]
    elif choice == "reset-act":
        edit["reset"] = ["act"]
    elif choice == "edit":
        n = draw(hs.integers(0, STEPS))
        steps = [f"edited {i}" for i in range(n)]
        edit["checkpoints"] = {"plan": st.AgentCheckpoint(CODEC, 1, {"n": n, "steps": steps})}
    return edit


def _expected_steps(edit: dict[str, Any]) -> list[str]:
    if "checkpoints" in edit:
        start = edit["checkpoints"]["plan"].payload["steps"]
        return [*start, *(f"step {i}" for i in range(len(start) + 1, STEPS + 1))]
    return [f"step {i}" for i in range(1, STEPS + 1)]


@seed(37)
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(variants=hs.dictionaries(NAMES, edits(), min_size=1, max_size=4))
def test_any_set_of_variants_comes_to_what_its_edits_make_it(
    db: st.Database, variants: dict[str, dict[str, Any]]
) -> None:
    wf, calls = sweep_workflow()
    parent = db.run(wf, {"topic": "ants"})
    frame = [f.frame_no for f in parent.frames() if f.kind == "checkpoint"][1]
    frames_before = parent.frames()

    sweep = db.sweep(parent.id, frame, variants, workflow=wf, concurrency=3)

    branches = sweep.branches()
    assert list(branches) == list(variants)
    assert len(db.runs(labels={"sweep": sweep.id})) == len(variants)
    for name, edit in variants.items():
        run = branches[name]
        assert run is not None and run.labels["variant"] == name
        given_input = edit.get("input", {"topic": "ants"})
        if given_input.get("fail"):
            assert run.status == "failed"
            continue
        assert run.status == "finished"
        assert run.output["plan"]["steps"] == _expected_steps(edit)
        assert run.output["act"]["answer"] == f"{given_input['topic']} after {STEPS} steps"
        # plan was in progress at the frame: each branch calls it once (to resume, afresh,
        # or from the edit), then act once.
        assert calls.of(run.id) == ["plan", "act"]
    assert parent.frames() == frames_before and parent.refresh().status == "finished"
