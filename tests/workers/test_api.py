"""Workers through the Python API and the command line, on both backends.

``db.submit`` queues a run without executing it; a worker claims queued runs of the workflows
it knows (same name *and* definition), executes them, heartbeats, takes over runs whose owner
stopped heartbeating under a higher epoch (the old owner's writes then fail with FenceLost),
stops executing a run it learns it lost, drains and releases on stop, and completes the
cancellation of a run whose owner died before doing so. ``db.workers()``, ``smithers-tt
workers`` and ``smithers-tt runs --status queued`` show who works on what.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

import smithers_tt as st
from smithers_tt import AgentCheckpoint, FenceLost
from smithers_tt.cli import cli
from smithers_tt.demo import demo_workflow
from smithers_tt.demo.agents import NOTES
from smithers_tt.engine import Worker
from smithers_tt.errors import InvalidArgument, TransientStoreError
from smithers_tt.store._claims import claim_next, count_runs, worker_heartbeat

from ._flows import changed

TOPIC = {"topic": "bee"}


def _signatures(*workflows: st.Workflow) -> dict[str, str]:
    return {wf.name: wf.signature() for wf in workflows}


def _kinds(db: st.Database, run_id: str) -> list[str]:
    return [f.kind for f in db.store.frames(run_id)]


def _claims(db: st.Database, run_id: str) -> list[dict[str, Any]]:
    return [f.data for f in db.store.frames(run_id) if f.kind == "run_claimed"]


async def _until(check: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    """Poll ``check`` (in a thread) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = await asyncio.to_thread(check)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or check}")
        await asyncio.sleep(0.05)


def _expected_output(db: st.Database, topic: dict[str, Any]) -> Any:
    wf, _ = demo_workflow()
    return db.run(wf, topic).output


# --- submit and execute --------------------------------------------------------------------


def test_submit_records_a_queued_run_and_executes_nothing(db: st.Database) -> None:
    wf, agents = demo_workflow()
    run = db.submit(wf, TOPIC)
    time.sleep(0.3)  # nobody executes it, not even later

    record = db.store.get_run(run.id)
    assert record.status == "queued" and run.status == "queued"
    assert record.owner_epoch == 0 and record.owner_id is None and record.heartbeat_at_ms is None
    assert record.workflow == "demo-report" and record.workflow_hash == wf.signature()
    assert record.input == TOPIC
    assert record.graph == {"research": [], "write": ["research"], "review": ["write"]}
    assert _kinds(db, run.id) == ["run_created"]
    assert db.store.frames(run.id)[0].state == "queued"
    assert db.store.list_attempts(run.id) == [] and db.store.list_nodes(run.id) == []
    assert agents.researcher.calls == agents.writer.calls == agents.reviewer.calls == 0
    assert [r.id for r in db.runs(status="queued")] == [run.id]
    assert count_runs(db.store, "queued") == 1


def test_a_worker_executes_submitted_runs_to_the_same_outputs(db: st.Database) -> None:
    wf, agents = demo_workflow()
    runs = [db.submit(wf, {"topic": topic}) for topic in ("bee", "ant", "wasp")]
    worker = db.worker([wf], concurrency=2, worker_id="w-1")

    assert asyncio.run(worker.run(idle_exit=0.5)) == 3

    assert worker.completed == 3 and worker.lost == 0
    assert runs[0].refresh().output == _expected_output(db, TOPIC)  # as if run in-process
    for run in runs:
        run = run.refresh()
        assert run.status == "finished"
        assert run.output["research"]["topic"] == run.input["topic"]
        assert _claims(db, run.id) == [{"epoch": 1, "owner_id": "w-1"}]
        assert _kinds(db, run.id).count("run_finished") == 1
        assert {n.node_id: n.state for n in run.nodes()} == {
            "research": "finished",
            "write": "finished",
            "review": "finished",
        }
        assert all(a.state == "finished" and a.owner_epoch == 1 for a in run.attempts())
    assert agents.researcher.calls == agents.writer.calls == agents.reviewer.calls == 3
    assert db.runs(status="queued") == []
    (record,) = db.workers()
    assert (record.worker_id, record.state, record.runs) == ("w-1", "stopped", [])


def test_max_runs_stops_the_worker_and_leaves_the_rest_queued(db: st.Database) -> None:
    wf, _ = demo_workflow()
    runs = [db.submit(wf, {"topic": f"t{i}"}) for i in range(3)]
    worker = db.worker([wf])

    assert asyncio.run(worker.run(max_runs=2)) == 2

    assert [r.refresh().status for r in runs] == ["finished", "finished", "queued"]


def test_a_worker_never_claims_an_unknown_workflow_or_another_definition(
    db: st.Database,
) -> None:
    demo, agents = demo_workflow()
    other = st.Workflow("other-workflow")
    other.task("t", agent=agents.researcher)
    variant = changed()  # same name as the demo, another definition
    assert variant.name == demo.name and variant.signature() != demo.signature()
    unknown = db.submit(other, TOPIC)
    different = db.submit(variant, TOPIC)
    hashless = db.store.create_run("demo-report", TOPIC, status="queued")[0]  # no definition

    assert asyncio.run(db.worker([demo]).run(idle_exit=0.3)) == 0
    assert claim_next(db.store, "x", _signatures(demo), stale_after_ms=1000) is None

    for run_id in (unknown.id, different.id, hashless.run_id):
        record = db.store.get_run(run_id)
        assert (record.status, record.owner_epoch) == ("queued", 0)
        assert _kinds(db, run_id) == ["run_created"]
    assert agents.researcher.calls == 0

    # A worker with the submitted definition claims the run (and only that one).
    assert asyncio.run(db.worker([variant]).run(idle_exit=0.3)) == 1
    assert db.store.get_run(different.id).status == "finished"
    assert db.store.get_run(unknown.id).status == "queued"
    assert db.store.get_run(hashless.run_id).status == "queued"


# --- takeover and fencing ------------------------------------------------------------------


def test_a_stale_run_is_taken_over_with_a_higher_epoch_and_the_old_owner_is_fenced_out(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow()
    run = db.submit(wf, TOPIC)
    sigs = _signatures(wf)
    old = claim_next(db.store, "old-worker", sigs, stale_after_ms=60_000)
    assert old is not None and old.fence.epoch == 1 and not old.takeover
    attempt = db.store.start_attempt(old.fence, "research")
    acked = db.store.publish(
        old.fence, attempt.key, AgentCheckpoint(NOTES, 1, {"topic": "bee", "notes": ["n1"]})
    )

    # Its heartbeat is fresh: nobody takes it over.
    assert claim_next(db.store, "new-worker", sigs, stale_after_ms=60_000) is None
    assert worker_heartbeat(db.store, "old-worker", [old.fence]) == []
    time.sleep(0.4)
    # Now it is older than 300 ms: taken over under a higher epoch.
    new = claim_next(db.store, "new-worker", sigs, stale_after_ms=300)
    assert new is not None
    assert new.fence.run_id == run.id and new.fence.epoch == 2
    assert new.takeover and new.previous_owner == "old-worker" and not new.cancel_requested
    assert _claims(db, run.id)[-1] == {
        "epoch": 2,
        "owner_id": "new-worker",
        "took_over_from": "old-worker",
    }
    record = db.store.get_run(run.id)
    assert (record.status, record.owner_id, record.owner_epoch) == ("running", "new-worker", 2)
    (interrupted,) = db.store.list_attempts(run.id)
    assert interrupted.state == "interrupted" and interrupted.owner_epoch == 1

    # Every write of the old owner fails and writes nothing.
    frames_before = len(db.store.frames(run.id))
    late = AgentCheckpoint(NOTES, 1, {"topic": "bee", "notes": ["n1", "late"]})
    with pytest.raises(FenceLost):
        db.store.publish(old.fence, attempt.key, late)
    with pytest.raises(FenceLost):
        db.store.finish_attempt(old.fence, attempt.key, "finished")
    with pytest.raises(FenceLost):
        db.store.start_attempt(old.fence, "research")
    with pytest.raises(FenceLost):
        db.store.set_node(old.fence, "research", 0, "finished", output={})
    with pytest.raises(FenceLost):
        db.store.finish_run(old.fence, "finished", output={})
    assert db.store.heartbeat(old.fence) is False
    assert worker_heartbeat(db.store, "old-worker", [old.fence]) == [old.fence]
    assert len(db.store.frames(run.id)) == frames_before
    assert [r.content_hash for r in db.store.list_refs(run.id).items] == [acked.content_hash]
    with pytest.raises(st.CheckpointMissing):
        db.store.read_content(late.encode().content_hash)


def test_a_worker_takes_over_a_dead_owners_run_and_resumes_from_its_checkpoint(
    db: st.Database,
) -> None:
    wf, agents = demo_workflow()
    run = db.submit(wf, TOPIC)
    dead = claim_next(db.store, "dead-worker", _signatures(wf), stale_after_ms=60_000)
    assert dead is not None
    attempt = db.store.start_attempt(dead.fence, "research")
    notes = {"topic": "bee", "notes": ["first note"], "tokens": 2}
    acked = db.store.publish(dead.fence, attempt.key, AgentCheckpoint(NOTES, 1, notes))
    time.sleep(0.5)

    worker = db.worker([wf], worker_id="taker", stale_after=0.3)
    assert asyncio.run(worker.run(idle_exit=0.3)) == 1

    record = db.store.get_run(run.id)
    assert record.status == "finished" and record.owner_epoch > 2
    assert [(c["epoch"], c["owner_id"]) for c in _claims(db, run.id)] == [
        (1, "dead-worker"),
        (2, "taker"),
    ]
    first, second = db.store.list_attempts(run.id, "research")
    assert (first.state, first.owner_epoch) == ("interrupted", 1)
    assert (second.state, second.owner_epoch) == ("finished", 2)
    assert second.resumed_from == (run.id, "research", 0, 1, acked.sequence)
    assert db.get_run(run.id).output["research"]["notes"][0] == "first note"
    assert agents.researcher.calls == 1


def test_a_worker_stops_executing_a_run_it_learns_was_taken_over(db: st.Database) -> None:
    wf, agents = demo_workflow(step_delay=0.15, steps=40)
    run = db.submit(wf, TOPIC)
    worker = db.worker([wf], worker_id="slow", stale_after=30.0, heartbeat_interval=0.2)

    async def scenario() -> int:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await _until(lambda: db.store.list_refs(run.id).items, what="a first checkpoint")
        thief = await asyncio.to_thread(db.store.claim_run, run.id, "thief")
        await _until(lambda: worker.lost == 1, timeout=10, what="the worker to notice")
        calls = agents.researcher.calls
        refs = len(db.store.list_refs(run.id, limit=1000).items)
        await asyncio.sleep(0.6)  # several steps' time: the agent was stopped, not just fenced
        assert agents.researcher.calls == calls == 1
        assert len(db.store.list_refs(run.id, limit=1000).items) == refs
        assert db.store.get_run(run.id).owner_epoch == thief.epoch
        stop.set()
        return await task

    assert asyncio.run(scenario()) == 0
    assert worker.lost == 1 and worker.completed == 0
    (attempt,) = db.store.list_attempts(run.id)
    assert attempt.state == "interrupted"
    record = db.store.get_run(run.id)
    assert (record.status, record.owner_id) == ("running", "thief")  # not released by "slow"


# --- stopping -----------------------------------------------------------------------------


def test_a_stopping_worker_releases_unfinished_runs_and_another_resumes_them(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow(step_delay=0.3)
    run = db.submit(wf, TOPIC)
    first = db.worker([wf], worker_id="first", drain_timeout=0.1)

    async def start_then_stop() -> int:
        stop = asyncio.Event()
        task = asyncio.create_task(first.run(stop))
        await _until(lambda: db.store.list_refs(run.id).items, what="a first checkpoint")
        stop.set()
        return await task

    assert asyncio.run(start_then_stop()) == 0
    record = db.store.get_run(run.id)
    assert (record.status, record.owner_id, record.heartbeat_at_ms) == ("queued", None, None)
    assert record.owner_epoch == 2  # the release fenced out any late write of "first"
    (interrupted,) = db.store.list_attempts(run.id)
    assert interrupted.state == "interrupted"
    kept = db.store.list_refs(run.id).items
    assert db.workers()[0].state == "stopped"

    second = db.worker([demo_workflow()[0]], worker_id="second")
    assert asyncio.run(second.run(idle_exit=0.3)) == 1
    record = db.store.get_run(run.id)
    assert record.status == "finished"
    assert [c["owner_id"] for c in _claims(db, run.id)] == ["first", "second"]
    resumed = db.store.list_attempts(run.id, "research")[-1]
    assert resumed.resumed_from is not None
    assert resumed.resumed_from[3] == 1 and resumed.resumed_from[4] == kept[-1].sequence


def test_a_stopping_worker_lets_runs_finish_within_the_drain_timeout(db: st.Database) -> None:
    wf, _ = demo_workflow(step_delay=0.05)
    run = db.submit(wf, TOPIC)
    worker = db.worker([wf], drain_timeout=30.0)

    async def start_then_stop() -> int:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await _until(lambda: db.store.list_refs(run.id).items, what="a first checkpoint")
        stop.set()
        return await task

    assert asyncio.run(start_then_stop()) == 1
    assert db.store.get_run(run.id).status == "finished"
    assert len(_claims(db, run.id)) == 1


def test_a_draining_worker_keeps_heartbeating_so_nobody_takes_its_runs_over(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow(step_delay=0.3, steps=6)
    run = db.submit(wf, TOPIC)
    # A run's executor heartbeats only every ~2 s on its own: longer than stale_after here.
    draining = db.worker([wf], worker_id="draining", stale_after=1.0, drain_timeout=30.0)
    other = db.worker([wf], worker_id="other", stale_after=1.0)

    async def scenario() -> tuple[int, int]:
        stop_draining, stop_other = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(draining.run(stop_draining))
        await _until(lambda: db.store.list_refs(run.id).items, what="a first checkpoint")
        second = asyncio.create_task(other.run(stop_other))
        stop_draining.set()  # it drains for up to 30 s: the run needs about 2.5 s more
        done = await first
        stop_other.set()
        return done, await second

    assert asyncio.run(scenario()) == (1, 0)
    assert db.store.get_run(run.id).status == "finished"
    assert [c["owner_id"] for c in _claims(db, run.id)] == ["draining"]


def test_idle_exit_counts_from_the_end_of_the_last_run(db: st.Database) -> None:
    wf, _ = demo_workflow(step_delay=0.12, steps=6)  # a run takes 1 s and more
    first = db.submit(wf, TOPIC)
    worker = db.worker([wf])

    async def scenario() -> int:
        task = asyncio.create_task(worker.run(idle_exit=0.6))
        await _until(lambda: db.store.get_run(first.id).status == "finished", what="run 1")
        await asyncio.sleep(0.3)  # idle for less than idle_exit, though busy for longer
        await asyncio.to_thread(db.submit, wf, {"topic": "late"})
        return await task

    assert asyncio.run(scenario()) == 2
    assert [r.status for r in db.runs()] == ["finished", "finished"]


def test_a_run_whose_owner_died_after_a_cancel_request_is_cancelled_not_executed(
    db: st.Database,
) -> None:
    wf, agents = demo_workflow()
    run = db.submit(wf, TOPIC)
    dead = claim_next(db.store, "dead", _signatures(wf), stale_after_ms=60_000)
    assert dead is not None
    attempt = db.store.start_attempt(dead.fence, "research")
    db.cancel(run.id)  # running: only a request, which its (dead) owner never completes
    assert db.store.get_run(run.id).status == "running"
    time.sleep(0.4)

    worker = db.worker([wf], stale_after=0.3)
    assert asyncio.run(worker.run(idle_exit=0.3)) == 1

    record = db.store.get_run(run.id)
    assert record.status == "cancelled"
    assert db.store.get_attempt(attempt.key).state in ("interrupted", "cancelled")
    assert agents.researcher.calls == 0
    assert _kinds(db, run.id).count("run_cancelled") == 1


# --- robustness and validation -------------------------------------------------------------


def test_a_worker_keeps_going_when_the_database_is_briefly_unavailable(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import smithers_tt.engine._worker as worker_module

    real = worker_module.claim_next
    failures = iter([True, True])

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if next(failures, False):
            raise TransientStoreError("the database stayed unavailable (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(worker_module, "claim_next", flaky)
    wf, _ = demo_workflow()
    run = db.submit(wf, TOPIC)
    assert asyncio.run(db.worker([wf], poll_interval=0.05).run(idle_exit=0.5)) == 1
    assert db.store.get_run(run.id).status == "finished"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"stale_after": 0}, "stale_after"),
        ({"stale_after": 2.0, "heartbeat_interval": 2.0}, "heartbeat_interval"),
        ({"poll_interval": -1}, "poll_interval"),
        ({"stale_after": float("inf")}, "stale_after"),
        ({"drain_timeout": -1}, "drain_timeout"),
    ],
)
def test_worker_options_are_checked(db: st.Database, options: dict, message: str) -> None:
    wf, _ = demo_workflow()
    with pytest.raises(InvalidArgument, match=message):
        db.worker([wf], **options)
    with pytest.raises(InvalidArgument, match="at least one workflow"):
        Worker(db.store, [])


def test_the_heartbeat_interval_follows_the_stale_timeout(db: st.Database) -> None:
    wf, _ = demo_workflow()
    assert db.worker([wf]).heartbeat_interval == 1.0
    assert db.worker([wf], stale_after=2.0).heartbeat_interval == 0.5


# --- who works on what --------------------------------------------------------------------


def test_db_workers_shows_owners_and_their_last_heartbeats(db: st.Database) -> None:
    wf, _ = demo_workflow(step_delay=0.2, steps=8)
    run = db.submit(wf, TOPIC)
    worker = db.worker([wf], worker_id="watched", heartbeat_interval=0.2, drain_timeout=0.1)

    async def scenario() -> tuple[Any, Any]:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        first = await _until(
            lambda: [w for w in db.workers() if w.runs == [run.id]], what="the worker's run"
        )
        await asyncio.sleep(0.5)
        later = db.workers()
        assert db.store.get_run(run.id).owner_id == "watched"
        stop.set()
        await task
        return first[0], later[0]

    started = time.time() * 1000
    first, later = asyncio.run(scenario())
    assert first.worker_id == "watched" and first.state == "running"
    assert first.pid == os.getpid() and first.host and first.workflows == ["demo-report"]
    assert abs(first.heartbeat_at_ms - started) < 30_000
    assert later.heartbeat_at_ms > first.heartbeat_at_ms  # it keeps heartbeating
    record = db.store.get_run(run.id)  # released when the worker stopped (drain 0.1 s)
    assert (record.status, record.owner_id) == ("queued", None)
    (stopped,) = db.workers()
    assert stopped.state == "stopped" and stopped.runs == []


def test_the_command_line_lists_workers_and_queued_runs(db: st.Database, db_url: str) -> None:
    wf, _ = demo_workflow(step_delay=0.2, steps=8)
    queued = [db.submit(wf, {"topic": f"t{i}"}) for i in range(3)]
    runner = CliRunner()

    result = runner.invoke(cli, ["--db", db_url, "runs", "--status", "queued"])
    assert result.exit_code == 0, result.output
    shown = db.store.short_run_ids([run.id for run in queued])
    for run in queued:  # shortened to a unique prefix (whole in --json, below)
        assert shown[run.id] in result.output and run.id.startswith(shown[run.id])
    result = runner.invoke(cli, ["--db", db_url, "--json", "runs", "--status", "queued"])
    assert result.exit_code == 0, result.output
    assert sorted(r["run_id"] for r in json.loads(result.output)) == sorted(r.id for r in queued)

    worker = db.worker([wf], worker_id="cli-seen", heartbeat_interval=0.2, drain_timeout=0.1)

    async def scenario() -> tuple[Any, Any, Any]:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await _until(lambda: [w for w in db.workers() if w.runs], what="a claimed run")
        table = await asyncio.to_thread(runner.invoke, cli, ["--db", db_url, "workers"])
        data = await asyncio.to_thread(runner.invoke, cli, ["--db", db_url, "--json", "workers"])
        waiting = await asyncio.to_thread(db.store.list_runs, status="queued")
        stop.set()
        await task
        return table, data, waiting.items

    table, data, owned = asyncio.run(scenario())
    assert table.exit_code == 0, table.output
    (line,) = [line for line in table.output.splitlines() if line.startswith("cli-seen")]
    assert "running" in line and "demo-report" in line and "s ago" in line
    assert "2 run(s) queued" in table.output
    assert data.exit_code == 0, data.output
    report = json.loads(data.output)
    assert report["queued"] == 2
    (entry,) = report["workers"]
    assert entry["worker_id"] == "cli-seen" and entry["state"] == "running"
    assert len(entry["runs"]) == 1 and entry["runs"][0] in line
    assert entry["runs"][0] not in {r.run_id for r in owned}


def test_the_worker_command_executes_queued_runs(db: st.Database, db_url: str) -> None:
    wf, _ = demo_workflow()
    runs = [db.submit(wf, {"topic": f"t{i}"}) for i in range(2)]
    result = CliRunner().invoke(
        cli,
        [
            "--db",
            db_url,
            "worker",
            "--workflows",
            "smithers_tt.demo:demo_workflow",
            "--concurrency",
            "2",
            "--id",
            "cli-worker",
            "--idle-exit",
            "0.5",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "worker cli-worker stopped after 2 run(s)" in result.output
    assert "claimed run" in result.output  # its log, on stderr
    assert all(r.refresh().status == "finished" for r in runs)
    result = CliRunner().invoke(cli, ["--db", db_url, "workers"])
    assert "cli-worker" in result.output and "stopped" in result.output
    assert "0 run(s) queued" in result.output


def test_the_worker_command_refuses_bad_options(db_url: str) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "--db",
            db_url,
            "worker",
            "--workflows",
            "smithers_tt.demo:demo_workflow",
            "--stale-after",
            "0",
        ],
    )
    assert result.exit_code == 1
    assert "stale_after" in result.output
    result = CliRunner().invoke(
        cli, ["--db", db_url, "worker", "--workflows", "no.such.module:wf", "--idle-exit", "0"]
    )
    assert result.exit_code == 1 and "cannot load workflow" in result.output
