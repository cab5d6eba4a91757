"""The command line, driven through click's runner against a real demo database."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import smithers_tt as st
from smithers_tt.cli import cli
from smithers_tt.testing import large_run

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def demo_db(demo_copy: Path) -> str:
    """A copy of the run's one demo database (tests/conftest.py), for this test alone."""
    return str(demo_copy)


def run(db: str, *args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", db, *args], input=input)
    return result.exit_code, result.output


def run_json(db: str, *args: str) -> object:
    result = CliRunner().invoke(cli, ["--db", db, "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def demo_runs(db: str) -> dict[str, str]:
    return {r["run_id"]: r["status"] for r in run_json(db, "runs")}  # type: ignore[union-attr]


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_cli_command_is_documented_in_the_readme_and_its_help(command: str) -> None:
    assert re.search(rf"`{command}`", README.read_text()), f"{command} missing from README"
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0 and "Example" in result.output


def test_cli_demo_builds_seven_runs_that_all_verify(tmp_path: Path) -> None:
    demo_db = str(tmp_path / "demo.db")
    result = CliRunner().invoke(cli, ["--db", demo_db, "--json", "demo"])
    assert result.exit_code == 0, result.output
    statuses = demo_runs(demo_db)
    assert len(statuses) == 7
    assert sorted(set(statuses.values())) == ["cancelled", "finished"]
    assert run_json(demo_db, "verify")["ok"] is True  # type: ignore[index]


def test_cli_timeline_show_and_diff_describe_a_run(demo_db: str) -> None:
    run_id = next(iter(demo_runs(demo_db)))
    timeline = run_json(demo_db, "timeline", run_id)
    frames = timeline["frames"]  # type: ignore[index]
    assert [f["frame_no"] for f in frames] == list(range(len(frames)))
    shown = run_json(demo_db, "show", run_id, "--frame", "3")
    assert shown["frame_no"] == 3  # type: ignore[index]
    # The frame as a second argument, as fork and rewind take it.
    assert run_json(demo_db, "show", run_id, "3") == shown
    code, out = run(demo_db, "show", run_id, "3", "--frame", "4")
    assert code == 2 and "two frames given (3 and --frame 4)" in out
    changes = run_json(demo_db, "diff", run_id, "3", str(len(frames) - 1))
    assert changes["nodes"]  # type: ignore[index]


def test_cli_rewind_refuses_without_yes_and_rewinds_with_it(demo_db: str) -> None:
    run_id = next(iter(demo_runs(demo_db)))
    code, out = run(demo_db, "rewind", run_id, "5")
    assert code == 1 and "--yes" in out and "Traceback" not in out
    # the question says how the rewind is undone, not that everything after is deleted
    assert re.search(rf"undo-rewind {run_id[:8]}\w* brings them back", out), out
    assert "deleting" not in out, out
    # The demo forked this run at frame 9: rewinding below it names the forks, then --force.
    code, out = run(demo_db, "rewind", run_id, "5", "--yes")
    assert code == 1 and "--force" in out and "forked at" in out and "Traceback" not in out
    done = run_json(demo_db, "rewind", run_id, "5", "--yes", "--force")
    assert done["frame_no"] == 5  # type: ignore[index]
    undone = run_json(demo_db, "undo-rewind", run_id)
    assert undone["frame_no"] > 9  # type: ignore[index]
    code, out = run(demo_db, "undo-rewind", run_id)
    assert code == 1 and "no rewind to undo" in out and "Traceback" not in out
    run_json(demo_db, "rewind", run_id, "5", "--yes", "--force")
    assert run_json(demo_db, "resume", run_id)["status"] == "finished"  # type: ignore[index]


def test_cli_materialize_gives_a_fork_its_own_history_once(demo_db: str) -> None:
    run_id = next(iter(demo_runs(demo_db)))
    child = run_json(demo_db, "fork", run_id, "9", "--reset", "write")["run_id"]  # type: ignore[index]
    before = run_json(demo_db, "show", child, "--frame", "0")
    code, out = run(demo_db, "materialize", child)
    assert code == 0 and "own copy" in out and "Traceback" not in out
    assert run_json(demo_db, "show", child, "--frame", "0") == before  # reads the same
    again = run_json(demo_db, "materialize", child)
    assert again == {"run_id": child, "materialized": False}
    code, out = run(demo_db, "materialize", "no-such-run")
    assert code == 1 and "no-such-run" in out and "Traceback" not in out


def test_cli_fork_replay_reset_cancel_and_gc(demo_db: str) -> None:
    run_id = next(iter(demo_runs(demo_db)))
    child = run_json(demo_db, "fork", run_id, "9", "--reset", "write")
    assert child["parent_run_id"] == run_id  # type: ignore[index]
    replayed = run_json(demo_db, "replay", run_id, "9", "--reset", "write")
    assert replayed["status"] == "finished"  # type: ignore[index]
    reset = run_json(demo_db, "reset", child["run_id"], "review", "--yes")  # type: ignore[index]
    assert reset["reset"] == ["review"]  # type: ignore[index]
    assert run_json(demo_db, "cancel", child["run_id"])["status"] == "cancelled"  # type: ignore[index]
    assert "deleted_contents" in run_json(demo_db, "gc")  # type: ignore[operator]


def test_cli_lineage_migrate_tables_and_workers(demo_db: str) -> None:
    rows = run_json(demo_db, "lineage", "SELECT count(*) AS n FROM runs")
    assert rows[0]["n"] >= 7  # type: ignore[index]
    assert run_json(demo_db, "migrate")["applied"] == []  # type: ignore[index]
    assert run_json(demo_db, "tables")["tt_runs"] >= 7  # type: ignore[index]
    assert run_json(demo_db, "workers")["queued"] == 0  # type: ignore[index]


def test_cli_expected_error_is_one_line_without_traceback(demo_db: str) -> None:
    code, out = run(demo_db, "show", "no-such-run")
    assert code == 1
    assert out.strip().startswith("error:") and "Traceback" not in out


def test_cli_says_an_attempt_handed_another_tasks_checkpoint_started_from_it(
    demo_db: str,
) -> None:
    """In the demo, review starts from write's checkpoint (a task fork) and research's second
    attempt of the retry run resumes from its first: the words say which."""
    runs = {r["labels"]["case"]: r["run_id"] for r in run_json(demo_db, "runs")}  # type: ignore[union-attr,index]
    code, out = run(demo_db, "--wide", "timeline", runs["retry"])
    assert code == 0, out
    started = [line.split() for line in out.splitlines() if "attempt_started" in line]
    details = {(words[2], words[3]): " ".join(words[5:]) for words in started}
    assert details[("research", "2")] == "resumed from research#1.1"
    assert details[("review", "1")] == "started from write#1.0"
    code, out = run(demo_db, "--wide", "show", runs["retry"])
    assert code == 0, out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if "#" in line[:12]}
    assert rows["review#1"][2:5] == ["started", "from", "write#1.0"]
    assert rows["research#1"][2] == "fresh"


def test_cli_timeline_shows_a_range_of_a_long_runs_frames(tmp_path: Path) -> None:
    """--from, --to and --tail show part of a history (a long run's tens of thousands of
    frames are not all printed), and say which part of how many; a range past the run's end
    or given twice is refused."""
    db = str(tmp_path / "long.db")
    with st.connect(db) as opened:
        run_id = large_run(opened, 300)

    def shown(*args: str) -> list[int]:
        frames = run_json(db, "timeline", run_id, *args)["frames"]  # type: ignore[index]
        return [f["frame_no"] for f in frames]

    assert shown() == list(range(300))
    assert shown("--from", "100", "--to", "104") == [100, 101, 102, 103, 104]
    assert shown("--tail", "3") == [297, 298, 299]
    assert shown("--tail", "3", "--to", "10") == [8, 9, 10]
    assert shown("--to", "1") == [0, 1]
    code, out = run(db, "timeline", run_id, "--from", "250", "--to", "251")
    assert code == 0 and "frames 250 to 251 of 0 to 299 shown" in out
    assert len([line for line in out.splitlines() if line[:3] in ("250", "251")]) == 2
    code, out = run(db, "timeline", run_id, "--from", "300")
    assert code == 1 and f"run {run_id} has frames 0 to 299; there is no frame 300" in out
    code, out = run(db, "timeline", run_id, "--from", "5", "--to", "4")
    assert code == 2 and "--from 5 is after --to 4" in out
    code, out = run(db, "timeline", run_id, "--tail", "2", "--from", "1")
    assert code == 2 and "--tail and --from both say where to start" in out


def test_cli_show_one_nodes_rows_of_a_long_loop(tmp_path: Path) -> None:
    """--node keeps a loop's one node (every iteration, named write[2]); rows of a loop's
    turns say which turn; a node the run does not have is refused, naming those it has."""
    db = str(tmp_path / "loop.db")
    with st.connect(db) as opened:
        run_id = large_run(opened, 400)
    shown = run_json(db, "show", run_id, "--node", "write")
    assert {n["node_id"] for n in shown["nodes"]} == {"write"}  # type: ignore[index]
    assert {a["node_id"] for a in shown["attempts"]} == {"write"}  # type: ignore[index]
    assert {r["node_id"] for r in shown["checkpoints"]} == {"write"}  # type: ignore[index]
    everything = run_json(db, "show", run_id)
    whole = [n for n in everything["nodes"] if n["node_id"] == "write"]  # type: ignore[index]
    assert shown["nodes"] == whole and len(whole) > 2  # type: ignore[index]
    code, out = run(db, "--wide", "show", run_id, "--node", "write")
    assert code == 0, out
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("write")]
    assert "write[2]" in rows and "write[2]#1" in rows and "write[2]#1.0" in rows
    code, out = run(db, "show", run_id, "--node", "nope")
    assert code == 1 and "has no node 'nope'" in out and "'write'" in out
