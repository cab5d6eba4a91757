"""A rewind of the last few frames (and its undo) changes only the rows those frames touched:
the live tables it leaves are exactly those a full replace from the history leaves, over
random runs with loops, retries, cache hits, resets and forks (seeded, both backends)."""

from __future__ import annotations

import random
from typing import Any

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt import GenerateRequest, GenerateResult, Loop, Retry, Workflow
from smithers_tt.errors import CheckpointMissing, SnapshotInvalid
from smithers_tt.store.backend import _schema as S
from smithers_tt.timetravel import _delta
from tests.engine._workflows import ScriptedAgent, state
from tests.timetravel._support import dump, execute

SEEDS = range(6)

_SKIPPED = {
    # Stamps of the write itself, not of the history.
    "tt_nodes": {"updated_at_ms"},
    # The epoch an attempt was written under: a full replace writes 0 for every attempt, the
    # engine its owner's; every owner is fenced by the run's new epoch either way.
    "tt_attempts": {"owner_epoch"},
}


def _rows(db: st.Database, run_id: str) -> dict[str, Any]:
    """The run's live rows (and its run row's clock and ending), as sorted tuples."""
    out: dict[str, Any] = {}
    with db.engine.sa.connect() as conn:
        for table in (S.nodes, S.attempts, S.refs):
            columns = [c for c in table.c if c.name not in _SKIPPED.get(table.name, set())]
            rows = conn.execute(sa.select(*columns).where(table.c.run_id == run_id)).all()
            out[table.name] = sorted(tuple(r) for r in rows)
        r = S.runs
        out["tt_runs"] = tuple(
            conn.execute(
                sa.select(
                    r.c.clock, r.c.status, r.c.output_json, r.c.error, r.c.cancel_requested,
                    r.c.lease_owner,
                ).where(r.c.run_id == run_id)
            ).one()
        )  # fmt: skip
    return out


def _workflow(rng: random.Random) -> Workflow:
    """Three tasks: a cached one, a loop with a flaky retried iteration, and one that needs
    both; each call publishes one to three checkpoints."""
    flaky, until = rng.randrange(3), rng.randrange(1, 5)
    steps = {(node, i): rng.randrange(1, 4) for node in ("base", "loop", "last") for i in range(7)}
    seen: set[tuple[str, int]] = set()

    async def work(request: GenerateRequest) -> GenerateResult:
        key = (request.node_id, request.iteration)
        for step in range(steps[key] + len(seen) % 2):
            await request.on_checkpoint(state({"node": request.node_id, "step": step}))
        if request.node_id == "loop" and request.iteration == flaky and key not in seen:
            seen.add(key)
            raise ConnectionError("flaky once")
        seen.add(key)
        return GenerateResult({"n": request.iteration, "node": request.node_id})

    agent = ScriptedAgent(work)
    wf = Workflow("delta")
    wf.task("base", agent=agent, cache=True)
    wf.task(
        "loop",
        agent=agent,
        loop=Loop(until=lambda out: out["n"] >= until, max=6),
        retry=Retry(count=1),
    )
    wf.task("last", agent=agent, needs=["base", "loop"])
    return wf


def _history(db: st.Database, rng: random.Random) -> tuple[str, Workflow]:
    """A finished run after random resets and forks (cache hits from an earlier run)."""
    wf = _workflow(rng)
    first = db.run(wf, {"seed": rng.random()})
    run = db.run(wf, first.input) if rng.random() < 0.5 else first  # ``base`` from the cache
    run_id = run.id
    for _ in range(rng.randrange(1, 4)):
        if rng.random() < 0.4:
            frames = db.get_run(run_id).record.clock
            run_id = db.fork(run_id, rng.randrange(frames // 2, frames), reset=["last"]).id
        else:
            db.reset(run_id, rng.choice(["base", "loop", "last"]), dependents=True)
        assert db.resume(run_id, wf).status == "finished"
    return run_id, wf


def _cuts(db: st.Database, run_id: str, rng: random.Random) -> list[int]:
    """Random frames to rewind to, newest first, and whether the set-based path takes each
    (not across a reset: that goes to the full path)."""
    frames = db.get_run(run_id).frames()
    clock = frames[-1].frame_no
    resets = [f.frame_no for f in frames if f.kind == "reset"]
    cuts = sorted({rng.randrange(0, clock) for _ in range(6)} | {clock - 1}, reverse=True)
    return [(cut, not any(r > cut for r in resets)) for cut in cuts]


@pytest.mark.parametrize("seed", SEEDS)
def test_rewind_and_undo_leave_what_a_full_replace_leaves(
    db: st.Database, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    run_id, wf = _history(db, rng)
    monkeypatch.setattr(_delta, "SHARE", 1)  # every cut, not only those near the end
    deltas: list[bool] = []
    real = _delta.write

    def spy(*args: Any, **kwargs: Any) -> None:
        deltas.append(kwargs["rewind"])
        real(*args, **kwargs)

    monkeypatch.setattr(_delta, "write", spy)
    for cut, set_based in _cuts(db, run_id, rng):
        clock = db.get_run(run_id).record.clock
        before = _rows(db, run_id)
        deltas.clear()
        rewound = db.rewind(run_id, cut, confirm=True)
        after = _rows(db, run_id)
        db.rewind(run_id, cut, confirm=True)  # to the newest frame: rebuilt from the history
        assert _rows(db, run_id) == after
        assert rewound == db.snapshot(run_id, cut)
        db.undo_rewind(run_id)
        undone = db.undo_rewind(run_id)
        assert _rows(db, run_id) == before
        assert undone == db.snapshot(run_id, clock)
        db.rewind(run_id, clock, confirm=True)  # the run as the full replace leaves it
        assert _rows(db, run_id) == before
        db.undo_rewind(run_id)
        assert deltas == ([True, False] if set_based else []), (cut, clock)
    assert db.resume(run_id, wf).status == "finished"


def _set_based(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every cut goes the set-based way when it can; the list says, per rewind or undo,
    whether it did."""
    monkeypatch.setattr(_delta, "SHARE", 1)
    taken: list[bool] = []
    real = _delta.tail_of

    def spy(*args: Any) -> Any:
        tail = real(*args)
        taken.append(tail is not None)
        return tail

    monkeypatch.setattr(_delta, "tail_of", spy)
    return taken


def _last_attempt(db: st.Database, run_id: str) -> tuple[int, int]:
    """The frame that starts the run's last attempt and a cut between its start and end."""
    frames = db.get_run(run_id).frames()
    start = max(f.frame_no for f in frames if f.kind == "attempt_started")
    end = min(f.frame_no for f in frames if f.kind == "attempt_finished" and f.frame_no > start)
    return start, end - 1


def test_a_rewind_that_reads_a_corrupt_frame_refuses_and_changes_nothing(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = _set_based(monkeypatch)
    db, run_id = demo.db, demo.run.id
    start, cut = _last_attempt(db, run_id)
    execute(db, "UPDATE tt_frame_rows SET data_json = '[1]' WHERE run_id = :r AND frame_no = :n",
            r=run_id, n=start)  # fmt: skip
    before = dump(db)
    with pytest.raises(SnapshotInvalid, match="nothing was changed"):
        db.rewind(run_id, cut, confirm=True)  # the attempt it puts back starts there
    assert dump(db) == before
    assert taken == [True]


def test_an_undo_whose_frames_name_missing_content_refuses_and_changes_nothing(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = _set_based(monkeypatch)
    db, run_id = demo.db, demo.run.id
    cut, _ = _last_attempt(db, run_id)  # its checkpoints go, and come back with the undo
    gone = [f.content_hash for f in db.get_run(run_id).frames()[cut + 1 :] if f.content_hash]
    db.rewind(run_id, cut, confirm=True)
    in_use = {r.content_hash for r in db.get_run(run_id).checkpoints()}
    gone = [h for h in gone if h not in in_use][:1]
    assert gone
    execute(db, "DELETE FROM tt_checkpoint_contents WHERE content_hash = :h", h=gone[0])
    before = dump(db)
    with pytest.raises(CheckpointMissing, match="nothing was changed") as error:
        db.undo_rewind(run_id)
    assert error.value.details["missing"] == gone
    assert dump(db) == before
    assert taken == [True, True]
