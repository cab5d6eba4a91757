"""One node's frames found in the database (``store.for_widgets``: :func:`node_frame_near`,
:func:`attempt_span`): the same answers as walking the run's frames, on the demo's runs (a
clean run, a retry, a schema correction, a cancelled run, a resumed one, a fork, a replay)
and a looping workflow, on both backends."""

from __future__ import annotations

import smithers_tt as st
from smithers_tt import GenerateRequest, Loop, Workflow
from smithers_tt.demo.showcase import build_demo
from smithers_tt.store.for_widgets import attempt_span, node_frame_near


def _looping() -> Workflow:
    async def work(request: GenerateRequest) -> dict:
        return {"n": request.iteration}

    wf = Workflow("loops")
    wf.task("plan", agent=work)
    wf.task("again", agent=work, needs=["plan"], loop=Loop(max=3))
    return wf


def _walked(frames: list[st.Frame], node: str, at: int) -> int | None:
    """What a walk over the visible frames finds (what the graph view did before)."""
    mine = [f.frame_no for f in frames if f.node_id == node]
    before = [n for n in mine if n <= at]
    after = [n for n in mine if n > at]
    return before[-1] if before else (after[0] if after else None)


def test_a_nodes_frame_near_another_is_what_walking_the_frames_finds(db: st.Database) -> None:
    build_demo(db)
    db.run(_looping())
    for run in db.runs(limit=100):
        frames = db.get_run(run.id).frames()
        nodes = sorted({f.node_id for f in frames if f.node_id} | {"nowhere"})
        for node in nodes:
            for at in range(len(frames)):
                found = node_frame_near(db.engine, run.id, node, at)
                assert found == _walked(frames, node, at), (run.labels, node, at)


def test_the_first_frame_after_stops_at_upto(db: st.Database) -> None:
    run = db.run(_looping())
    frames = run.frames()
    first = min(f.frame_no for f in frames if f.node_id == "again")
    assert node_frame_near(db.engine, run.id, "again", 0) == first
    assert node_frame_near(db.engine, run.id, "again", 0, upto=first - 1) is None


def test_an_attempts_span_is_where_it_started_and_ended(db: st.Database) -> None:
    build_demo(db)
    for run in db.runs(limit=100):
        frames = db.get_run(run.id).frames()
        for attempt in db.get_run(run.id).attempts():
            k = attempt.key
            mine = [
                f
                for f in frames
                if (f.node_id, f.iteration, f.attempt) == (k.node_id, k.iteration, k.attempt)
            ]
            started = [f.frame_no for f in mine if f.kind == "attempt_started"]
            ended = [f.frame_no for f in mine if f.kind == "attempt_finished"]
            assert attempt_span(db.engine, run.id, k.node_id, k.iteration, k.attempt) == (
                started[0] if started else None,
                ended[-1] if ended else None,
            ), (run.labels, k)
    assert attempt_span(db.engine, run.id, "nowhere", 0, 1) == (None, None)
