"""Bad command-line arguments: one clear line and exit code 1 (2 for a usage error: an argument
that is not JSON), never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import smithers_tt as st
from smithers_tt.cli import cli
from smithers_tt.demo import demo_workflow


@pytest.fixture
def demo_run(tmp_path: Path) -> tuple[str, str]:
    """``(database path, run id)`` of one finished demo run."""
    path = str(tmp_path / "demo.db")
    with st.connect(path) as db:
        wf, _agents = demo_workflow()
        run = db.run(wf, {"topic": "bees"})
    return path, run.id


def fails_cleanly(args: list[str], expected: str, code: int = 1) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert expected in lines[0]
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


def test_cli_fork_input_nested_30000_deep_is_refused(demo_run: tuple[str, str]) -> None:
    db, run = demo_run
    deep = "[" * 30000 + "]" * 30000
    fails_cleanly(["--db", db, "fork", run, "3", "--input", deep], "--input", code=2)


def test_cli_fork_input_deeper_than_the_bound_is_refused(demo_run: tuple[str, str]) -> None:
    db, run = demo_run
    deep = json.dumps({"topic": "x", "deep": json.loads("[" * 600 + "]" * 600)})
    fails_cleanly(["--db", db, "fork", run, "3", "--input", deep], "--input", code=2)


@pytest.mark.parametrize("target", ["missing.json", "."], ids=["missing-file", "directory"])
def test_cli_fork_checkpoint_file_that_cannot_be_read(
    demo_run: tuple[str, str], target: str, tmp_path: Path
) -> None:
    db, run = demo_run
    path = str(tmp_path / target)
    fails_cleanly(["--db", db, "fork", run, "3", "--checkpoint", f"research={path}"], path)


def test_cli_fork_checkpoint_file_nested_too_deep(
    demo_run: tuple[str, str], tmp_path: Path
) -> None:
    db, run = demo_run
    envelope = tmp_path / "deep.json"
    envelope.write_text('{"codec": "demo.notes", "version": 1, "payload": ' + "[" * 30000)
    checkpoint = f"research={envelope}"
    fails_cleanly(["--db", db, "fork", run, "3", "--checkpoint", checkpoint], "--checkpoint", 2)


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--input", "{topic: 'bees'}", "--input is not valid JSON: "),
        ("--input", "NaN", "--input is not strict JSON: non-finite number nan"),
        ("--checkpoint", b"notes", "for --checkpoint research is not valid JSON: "),
        ("--checkpoint", b"\xff\xfe", "for --checkpoint research is not JSON: it is not UTF-8"),
        ("--checkpoint", b'{"notes": []}', "for --checkpoint research: a checkpoint envelope"),
        ("--input", '{"topic": "bees", "topic": "wasps"}', "--input names the key 'topic' twice"),
        (
            "--checkpoint",
            b'{"codec": "demo.notes", "version": 1, "payload": {"notes": [], "notes": ["x"]}}',
            "for --checkpoint research names the key 'notes' twice in one object",
        ),
    ],
    ids=[
        "input",
        "input-nan",
        "file",
        "file-binary",
        "file-no-envelope",
        "input-twice",
        "file-twice",
    ],
)
def test_cli_fork_input_that_is_not_json_is_a_usage_error_naming_it(
    demo_run: tuple[str, str], tmp_path: Path, option: str, value: str | bytes, expected: str
) -> None:
    db, run = demo_run
    if isinstance(value, bytes):  # the content of the file the option names
        (tmp_path / "edited.json").write_bytes(value)
        value = f"research={tmp_path / 'edited.json'}"
    result = CliRunner().invoke(cli, ["--db", db, "fork", run, "3", option, value])
    # it was CheckpointInvalid (exit code 1) naming "the value", or the file without its option
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0]
    with st.connect(db) as opened:
        assert len(opened.runs()) == 1  # no fork was made


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("os:system", "not a smithers_tt Workflow"),
        ("os:getcwd", "not a smithers_tt Workflow"),
        ("subprocess:getoutput", "takes no arguments"),
        ("json:dumps", "takes no arguments"),
        ("no_such_module_xyz:wf", "cannot load workflow"),
        ("smithers_tt:__version__", "not a smithers_tt Workflow"),
        ("nocolon", "module:attribute"),
    ],
)
def test_cli_resume_workflow_must_be_a_workflow_or_its_factory(
    demo_run: tuple[str, str], spec: str, expected: str
) -> None:
    db, run = demo_run
    fails_cleanly(["--db", db, "resume", run, "--workflow", spec], expected)


def test_cli_resume_workflow_factory_still_works(demo_run: tuple[str, str]) -> None:
    db, run = demo_run
    result = CliRunner().invoke(
        cli, ["--db", db, "--json", "resume", run, "--workflow", "smithers_tt.demo:demo_workflow"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "finished"


@pytest.mark.parametrize(
    "args",
    [[b"show", b"run\xff"], [b"--db", b"x\xfe.db", b"runs"], [b"runs", b"--status", b"\xc3"]],
    ids=["run-id", "db", "option"],
)
def test_cli_argument_that_is_not_utf8_is_refused(args: list[bytes], tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable.encode(), b"-m", b"smithers_tt.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith("error: ") and b"Traceback" not in proc.stderr
    assert b"not valid UTF-8" in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "path",
    ["/dev/null/x.db", "/proc/no-such-dir/x.db", "{tmp}/file.txt/x.db", "{tmp}/a\x00b.db"],
    ids=["under-a-device", "under-proc", "under-a-file", "nul"],
)
@pytest.mark.parametrize("command", [["runs"], ["demo"], ["migrate"]], ids=lambda c: c[0])
def test_cli_db_under_a_path_that_cannot_exist(
    path: str, command: list[str], tmp_path: Path
) -> None:
    (tmp_path / "file.txt").write_text("not a folder")
    fails_cleanly(["--db", path.replace("{tmp}", str(tmp_path)), *command], "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_cli_database_from_the_environment_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    env = {k.encode(): v.encode() for k, v in os.environ.items() if k != "SMITHERS_TT_DB"}
    env[b"SMITHERS_TT_DB"] = b"store\xff.db"
    proc = subprocess.run(
        [sys.executable, "-m", "smithers_tt.cli", "runs"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 1 and b"not valid UTF-8" in proc.stderr
    assert b"Traceback" not in proc.stderr and list(tmp_path.iterdir()) == []
