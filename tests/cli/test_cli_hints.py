"""What the command line tells a newcomer to type next works where they are, and what it prints
of a frame keeps the part that matters in sight."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from smithers_tt.cli import cli
from smithers_tt.cli._app import how_invoked
from tests.cli.test_cli_output import SGR, run_in_pty

SCRIPT = Path(sys.executable).with_name("smithers-tt")


def _without_the_venv_on_path() -> dict[str, str]:
    """The environment of a shell in a checkout: the venv's bin folder is not on PATH."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    keep = [f for f in folders if f and Path(f).resolve() != SCRIPT.parent.resolve()]
    return {**os.environ, "PATH": os.pathsep.join(keep or ["/usr/bin", "/bin"])}


@pytest.mark.parametrize(
    "program",
    [[str(SCRIPT)], [sys.executable, "-m", "smithers_tt.cli"]],
    ids=["venv-script", "python-m"],
)
def test_the_demos_next_commands_run_as_printed_from_a_shell_without_the_venv(
    program: list[str], tmp_path: Path
) -> None:
    if not SCRIPT.exists():
        pytest.skip(f"no smithers-tt script beside {sys.executable}")
    env = _without_the_venv_on_path()
    built = subprocess.run(
        [*program, "--db", "demo.db", "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    hints = built.stdout.split("Next:\n", 1)[1].splitlines()
    commands = [h.strip() for h in hints if h.strip() and "(the tour notebook" not in h]
    assert len(commands) == 4  # runs, timeline, diff, calls; lab starts a server: left out
    for command in commands:
        assert not command.startswith("smithers-tt ")  # not on this shell's PATH
        ran = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, f"{command!r}: {ran.stderr}"
        assert ran.stdout.strip()
        if " calls " in command:  # the demo's price file prices every call it made
            assert "not counted" not in ran.stdout and "cost $" in ran.stdout, ran.stdout


def test_the_hint_names_smithers_tt_when_that_name_on_path_is_this_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "smithers-tt"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    assert how_invoked(str(script)) == "smithers-tt"
    other = tmp_path / "elsewhere" / "smithers-tt"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    monkeypatch.chdir(tmp_path)
    assert how_invoked(str(other)) == "elsewhere/smithers-tt"  # on PATH is another program
    monkeypatch.chdir(tmp_path / "bin")
    assert how_invoked(str(other)) == str(other)  # not below here: the whole path


# `smithers-tt --db DB timeline RUN` for each RUN, one after another in one process on the same
# terminal (one interpreter's start instead of one per run of the demo).
TIMELINES = """\
import sys
from smithers_tt.cli import cli
db, *runs = sys.argv[1:]
for run in runs:
    try:
        cli.main(["--db", db, "timeline", run], prog_name="smithers-tt")
    except SystemExit as done:
        if done.code:
            raise
    print("(timeline done)")
"""


def test_a_failed_attempts_error_comes_first_on_a_100_column_terminal(demo_copy: Path) -> None:
    db = f"sqlite:///{demo_copy}"
    runs = json.loads(CliRunner().invoke(cli, ["--db", db, "--json", "runs"]).stdout)
    assert len(runs) > 1
    ids = [run["run_id"] for run in runs]
    screen = SGR.sub(
        "", run_in_pty([db, *ids], columns=100, program=[sys.executable, "-c", TIMELINES])
    )
    lines = screen.replace("\r", "").splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines.count("(timeline done)") == len(ids)  # each command ended well (exit code 0)
    shown = [line for line in lines if "attempt_finished" in line]
    failed = [line for line in shown if re.search(r"\sfailed\b", line)]
    assert failed, "the demo has failed attempts"
    for line in failed:  # its error's class at least, before the cut
        assert re.search(r"failed\s+error: \w+Error", line), repr(line)
    finished = [line for line in shown if re.search(r"\sfinished\b", line)]
    assert finished and not any("null" in line or "false" in line for line in finished)


def test_every_option_of_every_command_says_what_it_does_in_its_help() -> None:
    missing = []
    for name, command in sorted(cli.commands.items()):
        shown = " ".join(CliRunner().invoke(cli, [name, "--help"]).output.split())
        with click.Context(command, info_name=name) as ctx:
            for param in command.get_params(ctx):
                record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
                if isinstance(param, click.Option) and not param.hidden:
                    words = " ".join((record[1] if record else "").split())
                    if not words or words not in shown:
                        missing.append(f"{name} {param.opts[0]}")
    assert missing == []


def _examples(help_text: str) -> tuple[str, list[str]]:
    """The heading of a help's examples ("Example:" or "Examples:") and the commands under it."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() in ("Example:", "Examples:"))
    shown = []
    for line in lines[start + 1 :]:
        if not line.strip() or not line.startswith("    "):
            break
        if line.strip().startswith("smithers-tt"):
            shown.append(line.strip())
    return lines[start].strip(), shown


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_commands_help_reads_as_plain_text_with_examples_to_adapt(name: str) -> None:
    shown = CliRunner().invoke(cli, [name, "--help"], terminal_width=100).output
    assert "``" not in shown  # reST markup is for docstrings rendered elsewhere, not a terminal
    heading, examples = _examples(shown)
    assert examples, shown
    assert heading == ("Example:" if len(examples) == 1 else "Examples:"), shown
    for example in examples:  # a placeholder (RUN, SWEEP ...), never some run's real id
        assert not re.search(r"\b[0-9a-f]{16,}\b", example), example


def test_the_resume_hint_of_fork_and_rewind_still_names_that_run_after_more_runs_are_made(
    demo_copy: Path,
) -> None:
    db = f"sqlite:///{demo_copy}"
    runs = json.loads(CliRunner().invoke(cli, ["--db", db, "--json", "runs"]).stdout)
    clean = next(r["run_id"] for r in runs if r["labels"].get("case") == "clean")
    said = CliRunner().invoke(cli, ["--db", db, "fork", clean, "9"]).output
    child = json.loads(CliRunner().invoke(cli, ["--db", db, "--json", "runs"]).stdout)[-1]
    rewound = CliRunner().invoke(cli, ["--db", db, "rewind", clean, "12", "--yes"]).output
    for _ in range(3):  # runs made within the same second: ids that share their first characters
        assert CliRunner().invoke(cli, ["--db", db, "fork", clean, "9"]).exit_code == 0
    for hint, run_id in ((said, child["run_id"]), (rewound, clean)):
        typed = hint.split(" resume ", 1)[1].split()[0]
        assert typed == run_id, hint  # the whole id: no later run can make it ambiguous
        shown = CliRunner().invoke(cli, ["--db", db, "--json", "show", typed])
        assert shown.exit_code == 0 and json.loads(shown.stdout)["run_id"] == run_id
