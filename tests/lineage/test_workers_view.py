"""Which worker owns which run, and who is silent: the ``workers`` view, the owner columns of
``runs``, ``db.workers()`` and ``smithers-tt workers``, on both backends."""

from __future__ import annotations

import asyncio
import json
import time

from click.testing import CliRunner

import smithers_tt as st
from smithers_tt.cli import cli
from smithers_tt.demo import demo_workflow
from smithers_tt.store._claims import claim_next, register_worker

from .conftest import records


def _fleet(db: st.Database) -> dict[str, str]:
    """A stopped worker that executed one run, a silent one holding a run, one run queued."""
    wf, _ = demo_workflow()
    done = db.submit(wf, {"topic": "done"})
    assert asyncio.run(db.worker([wf], worker_id="finished-w").run(max_runs=1)) == 1
    held = db.submit(wf, {"topic": "held"})
    register_worker(db.store, "silent-w", "elsewhere", 4242, [wf.name])
    claim = claim_next(db.store, "silent-w", {wf.name: wf.signature()}, stale_after_ms=60_000)
    assert claim is not None and claim.fence.run_id == held.id
    queued = db.submit(wf, {"topic": "queued"})
    return {"done": done.id, "held": held.id, "queued": queued.id}


def test_workers_view_and_run_owners_match_the_store(db: st.Database) -> None:
    runs = _fleet(db)
    with db.lineage() as lin:
        workers = {row["worker_id"]: row for row in records(lin.workers())}
        owners = {
            row["run_id"]: (row["status"], row["owner_id"], row["heartbeat_at_ms"])
            for row in records(lin.runs())
        }
    stored = {w.worker_id: w for w in db.workers()}
    assert set(workers) == set(stored) == {"finished-w", "silent-w"}
    for worker_id, row in workers.items():
        w = stored[worker_id]
        assert row == {
            "worker_id": w.worker_id,
            "host": w.host,
            "pid": w.pid,
            "workflows_json": json.dumps(w.workflows),
            "state": w.state,
            "started_at_ms": w.started_at_ms,
            "heartbeat_at_ms": w.heartbeat_at_ms,
            "owned_runs": len(w.runs),
        }
    assert stored["silent-w"].runs == [runs["held"]] and stored["finished-w"].runs == []
    for run_id in runs.values():
        record = db.store.get_run(run_id)
        assert owners[run_id] == (record.status, record.owner_id, record.heartbeat_at_ms)
    assert owners[runs["held"]][:2] == ("running", "silent-w")
    assert owners[runs["queued"]][:2] == ("queued", None)


def test_a_running_worker_that_stopped_heartbeating_is_reported_unresponsive(
    db: st.Database,
) -> None:
    _fleet(db)
    assert {w.worker_id: w.state for w in db.workers()} == {
        "finished-w": "stopped",
        "silent-w": "running",
    }
    time.sleep(0.05)
    silent = {w.worker_id: w.state for w in db.workers(stale_after=0.01)}
    assert silent == {"finished-w": "stopped", "silent-w": "unresponsive"}

    out = CliRunner().invoke(
        cli, ["--db", db.url, "--json", "workers", "--stale-after", "0.01"], catch_exceptions=False
    )
    assert out.exit_code == 0, out.output
    shown = json.loads(out.output)
    assert {w["worker_id"]: w["state"] for w in shown["workers"]} == silent
    assert shown["queued"] == 1
    bad = CliRunner().invoke(cli, ["--db", db.url, "workers", "--stale-after", "-1"])
    assert bad.exit_code != 0 and "stale_after" in bad.output
