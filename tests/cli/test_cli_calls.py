"""``smithers-tt calls``: a run's model calls as a table and as JSON, priced only by
``--prices``; ``replay`` says what it reused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from smithers_tt.cli import cli


@pytest.fixture
def demo_db(demo_copy: Path) -> str:
    return str(demo_copy)


def _json(db: str, *args: str) -> object:
    result = CliRunner().invoke(cli, ["--db", db, "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _finished(db: str) -> str:
    runs = _json(db, "runs")
    return next(r["run_id"] for r in runs if r["status"] == "finished")  # type: ignore[union-attr]


def test_calls_lists_a_runs_calls_with_totals_per_node_as_json(demo_db: str) -> None:
    run_id = _finished(demo_db)
    shown = _json(demo_db, "calls", run_id)
    calls = shown["calls"]  # type: ignore[index]
    assert calls and {c["node_id"] for c in calls} >= {"research", "write"}
    assert all(c["cost"] is None for c in calls)  # no --prices: no cost, never a guess
    totals = shown["totals"]  # type: ignore[index]
    assert totals["calls"] == len(calls)
    assert totals["total_tokens"] == sum(c["total_tokens"] or 0 for c in calls)
    assert sum(n["calls"] for n in shown["nodes"].values()) == len(calls)  # type: ignore[index]


def test_calls_prices_only_the_models_its_price_file_names(demo_db: str, tmp_path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"demo-small": {"input": 1.0, "output": 1.0}}))
    shown = _json(demo_db, "calls", _finished(demo_db), "--prices", str(prices))
    calls = shown["calls"]  # type: ignore[index]
    for c in calls:
        if c["model"] == "demo-small" and c["total_tokens"] is not None:
            assert c["cost"] == pytest.approx(c["total_tokens"] / 1e6)
        else:
            assert c["cost"] is None


def test_calls_table_shows_each_call_and_the_run_totals(demo_db: str) -> None:
    run_id = _finished(demo_db)
    result = CliRunner().invoke(cli, ["--db", demo_db, "calls", run_id], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "demo-small" in result.output and "research" in result.output
    assert "call(s)" in result.output and "tokens" in result.output


def test_replay_says_how_many_calls_and_tokens_it_reused(demo_db: str) -> None:
    run_id = _finished(demo_db)
    frames = _json(demo_db, "timeline", run_id)["frames"]  # type: ignore[index]
    last = frames[-1]["frame_no"]
    out = _json(demo_db, "replay", run_id, str(last))  # the demo workflow by default
    reused = out["reused_model_calls"]  # type: ignore[index]
    calls = _json(demo_db, "calls", run_id)["totals"]  # type: ignore[index]
    assert reused == {"calls": calls["calls"], "tokens": calls["total_tokens"]}


def test_the_demos_model_time_stays_within_its_attempts(demo_db: str) -> None:
    """The demo's made-up calls take the time they report, so no run or node shows more
    model time than the wall time of its attempts (as a real agent's calls cannot)."""
    import smithers_tt as st

    db = st.connect(demo_db)
    try:
        seen = 0
        for run in db.runs():
            totals = run.model_call_totals()
            for name, part in [("run", totals.run), *totals.nodes.items()]:
                if part.calls and part.wall_ms is not None:
                    seen += 1
                    assert part.model_ms <= part.wall_ms + 1, (run.id, name, part)
        assert seen > 10
    finally:
        db.close()


def test_totals_at_an_earlier_frame_count_the_time_up_to_that_frame(demo_db: str) -> None:
    """At frame N the run's wall time ends at frame N (not at the run's end), and each node's
    at N or at its attempts' ends before it, so model time stays within it at every frame."""
    import smithers_tt as st

    db = st.connect(demo_db)
    try:
        run = db.get_run(_finished(demo_db))
        frames = run.frames()
        start = frames[0].created_at_ms
        newest = run.model_call_totals().run.wall_ms
        assert newest is not None
        checked = 0
        for frame in frames:
            totals = run.model_call_totals(frame_no=frame.frame_no)
            wall = totals.run.wall_ms
            if wall is None:
                continue
            assert wall <= frame.created_at_ms - start + 1, (frame.frame_no, wall)
            for name, part in [("run", totals.run), *totals.nodes.items()]:
                if part.calls and part.wall_ms is not None:
                    checked += 1
                    assert part.model_ms <= part.wall_ms + 1, (frame.frame_no, name, part)
        assert checked > len(frames) // 2
        first_call = next(f for f in frames if run.model_call_totals(frame_no=f.frame_no).run.calls)
        early = run.model_call_totals(frame_no=first_call.frame_no).run.wall_ms
        assert early is not None and early < newest
    finally:
        db.close()
