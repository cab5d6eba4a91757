"""Failure triage: failures grouped across runs (``db.failures()``, ``smithers-tt failures``),
and a retry of one group that resets the failing node of each run and resumes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import smithers_tt as st
from smithers_tt import Workflow
from smithers_tt.cli import cli
from smithers_tt.errors import InvalidArgument
from smithers_tt.triage import error_class, normalise

from ._statements import statements
from ._triage_flows import failing_runs, workflow

ROOT = Path(__file__).resolve().parents[1]


def test_normalised_messages_drop_what_differs_between_occurrences() -> None:
    a = "TimeoutError: fetch of 'doc-1' timed out after 31.5 s on run 1a249f8fdfa165c792b48"
    b = "TimeoutError: fetch of 'doc-22' timed out after 52 s on run 1a249f90165de7de8c2ee"
    assert normalise(a) == normalise(b) == "fetch of <str> timed out after <n> s on run <hex>"
    assert error_class(None, a) == "TimeoutError"
    assert error_class("schema_invalid", a) == "schema_invalid"
    assert error_class(None, "it broke: badly") == "Error"
    assert normalise("KeyError: 'x'\nTraceback (most recent call last):") == "<str>"
    assert len(normalise("ValueError: " + "y" * 5000)) == 200


def test_failures_are_grouped_by_node_class_and_message_across_runs(db: st.Database) -> None:
    runs = failing_runs(db)
    found = db.failures()
    by_node = {(g.node_id, g.error_class): g for g in found}
    assert set(by_node) == {("fetch", "TimeoutError"), ("parse", "ValueError")}

    timeouts = by_node[("fetch", "TimeoutError")]
    # three runs failed twice each (the first attempt and its retry), the flaky run once
    assert timeouts.count == 7
    down = [runs["down-0"], runs["down-1"], runs["down-2"]]
    assert sorted(timeouts.run_ids) == sorted([*down, runs["flaky-4"]])
    assert timeouts.message == "fetch of <str> timed out after <n> s on <n>"
    assert sorted(timeouts.retryable) == sorted(down)  # the flaky run finished
    assert timeouts.example is not None and timeouts.example.run_id in timeouts.run_ids
    assert timeouts.first_ms <= timeouts.last_ms
    assert found[0] is timeouts  # largest group first

    parse = by_node[("parse", "ValueError")]
    assert (parse.count, parse.run_ids, parse.message) == (1, [runs["bad-3"]], "no title in page")

    assert [g.node_id for g in db.failures(workflow="another")] == []
    assert len(db.failures(since=3600)) == 2
    limited = db.failures(limit=2)
    assert limited.truncated and sum(g.count for g in limited) == 2


def test_a_groups_frame_has_one_row_per_group(db: st.Database) -> None:
    failing_runs(db)
    frame = db.failures().frame()
    assert list(frame["node_id"]) == ["fetch", "parse"]
    assert list(frame["count"]) == [7, 1]
    assert list(frame["retryable"]) == [3, 1]
    assert str(frame["last_seen"].dtype).startswith("datetime64")


def test_a_retry_resets_the_failing_node_of_each_failed_run_and_resumes_it(
    db: st.Database,
) -> None:
    runs = failing_runs(db)
    found = db.failures()
    group = found[0]
    seen: list[str] = []
    mended = workflow({"down", "bad"})
    results = found.retry(group, mended, on_result=lambda r: seen.append(r.run_id))

    by_run = {r.run_id: r for r in results}
    assert seen == [r.run_id for r in results]
    for key in ("down-0", "down-1", "down-2"):
        assert (by_run[runs[key]].outcome, by_run[runs[key]].status) == ("resumed", "finished")
        assert db.get_run(runs[key]).nodes()[-1].output == {"title": "down"}
    assert by_run[runs["flaky-4"]].outcome == "skipped"
    assert db.get_run(runs["bad-3"]).status == "failed"  # another group: left alone
    # what is left: the old attempts of the retried runs stay in their frames, not live
    again = db.failures()
    assert {g.node_id for g in again} == {"fetch", "parse"}
    assert next(g for g in again if g.node_id == "fetch").retryable == []


def test_a_retry_refuses_another_workflow_and_a_group_without_a_node(db: st.Database) -> None:
    failing_runs(db)
    found = db.failures()
    with pytest.raises(InvalidArgument, match="triage-flow"):
        found.retry(0, Workflow("another"))
    with pytest.raises(InvalidArgument, match="limit"):
        db.failures(limit=0)


_STUCK_CHILD = textwrap.dedent(
    """
    import asyncio, sys, pathlib
    import smithers_tt as st

    started = pathlib.Path(sys.argv[2])

    async def hang(request):
        started.write_text(request.run_id)
        await asyncio.sleep(3600)

    wf = st.Workflow("hangs")
    wf.task("wait", agent=hang)
    st.connect(sys.argv[1]).run(wf, {})
    """
)


def test_a_run_whose_process_was_killed_shows_as_stuck_in_its_node(
    db: st.Database, db_url: str, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.Popen([sys.executable, "-c", _STUCK_CHILD, db_url, str(started)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the child never started its run"
        run_id = started.read_text()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert db.failures(stuck_after=3600).groups == []  # heard of a moment ago
    deadline = time.monotonic() + 30
    while not (stuck := [g for g in db.failures(stuck_after=0.2) if g.kind == "stuck"]):
        assert time.monotonic() < deadline, "the killed run never showed as stuck"
        time.sleep(0.1)
    (group,) = stuck
    assert (group.workflow, group.node_id, group.run_ids) == ("hangs", "wait", [run_id])
    assert group.error_class == "Stuck" and group.retryable == []


def test_the_cli_lists_groups_and_retries_one_after_asking(db: st.Database, db_url: str) -> None:
    runs = failing_runs(db)
    listed = CliRunner().invoke(cli, ["--db", db_url, "failures"])
    assert listed.exit_code == 0, listed.output
    first = listed.stdout.splitlines()[1].split()
    assert first[:6] == ["1", "7", "4", "attempt", "triage-flow", "fetch"]
    example = first[-1]  # the newest failure's run, shortened to a unique prefix
    down = [runs["down-0"], runs["down-1"], runs["down-2"], runs["flaky-4"]]
    assert len(example) >= 8 and sum(r.startswith(example) for r in down) == 1
    assert "TimeoutError: fetch of <str> timed out" in listed.stdout
    assert "failures --retry 1 --workflow MODULE:ATTR" in listed.stderr

    as_json = json.loads(CliRunner().invoke(cli, ["--db", db_url, "--json", "failures"]).stdout)
    assert [(g["group"], g["node_id"], g["count"]) for g in as_json] == [
        (1, "fetch", 7),
        (2, "parse", 1),
    ]
    assert sorted(as_json[0]["retryable"]) == sorted(
        [runs["down-0"], runs["down-1"], runs["down-2"]]
    )

    nothing = CliRunner().invoke(cli, ["--db", db_url, "failures", "--retry", "9"])
    assert nothing.exit_code == 1 and "there is no group 9" in nothing.output
    refused = CliRunner().invoke(
        cli,
        ["--db", db_url, "failures", "--retry", "2", "--workflow", "tests._triage_flows:healed"],
    )
    assert refused.exit_code == 1 and "--yes" in refused.output  # no terminal to ask
    assert db.get_run(runs["bad-3"]).status == "failed"
    done = CliRunner().invoke(
        cli,
        [
            "--db",
            db_url,
            "failures",
            "--retry",
            "2",
            "--yes",
            "--workflow",
            "tests._triage_flows:healed",
        ],
    )
    assert done.exit_code == 0, done.output
    short = db.store.short_run_ids([runs["bad-3"]])[runs["bad-3"]]
    assert f"run {short} resumed: finished" in done.stdout and runs["bad-3"] not in done.stdout
    assert db.get_run(runs["bad-3"]).status == "finished"


def test_a_groups_retry_reads_its_runs_together_not_one_by_one(db: st.Database) -> None:
    """A group of 2, then of 12, runs whose first fetch failed and whose retry finished: a
    retry skips each, having read their rows together (as many statements for 12 as for 2)."""
    wf, sent = workflow(), {}
    for n in (2, 12):
        for i in range(n - len(sent) * 2):
            db.run(wf, {"key": "flaky", "n": i})
        (group,) = db.failures()
        assert group.count == n
        with statements(db) as seen:
            results = db.failures().retry(group, wf)
        assert [r.outcome for r in results] == ["skipped"] * n
        assert {r.detail for r in results} == {"the run is finished"}
        sent[n] = len(seen)
    assert sent[12] == sent[2], sent
