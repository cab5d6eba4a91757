"""What a person sees: agent strings never drive the terminal, tables fit it, JSON is exact."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from click.testing import CliRunner

import smithers_tt as st
from smithers_tt.cli import cli
from smithers_tt.demo.agents import Researcher

# Window title, clipboard write (OSC 52), a hyperlink, SGR, the C1 CSI, DEL, a bidi override.
EVIL = (
    "\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\"
    "\x1b[31m\x9b2J\x7f\u202e"
)
# What a terminal could obey: C0 except the line break, DEL, C1, bidi and line separators.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class Agent:
    id = "agent" + EVIL
    checkpoint_formats = [st.CheckpointFormat("codec" + EVIL, versions=[1])]

    async def generate(self, request: st.GenerateRequest) -> st.GenerateResult:
        cp = st.AgentCheckpoint("codec" + EVIL, 1, {"key" + EVIL: "value" + EVIL})
        await request.on_checkpoint(cp)
        return st.GenerateResult({"out": EVIL})


class Failing:
    id = "failing"

    async def generate(self, request: st.GenerateRequest) -> st.GenerateResult:
        raise RuntimeError("boom" + EVIL)


def hostile_workflow() -> st.Workflow:
    wf = st.Workflow("wf" + EVIL)
    wf.task("node" + EVIL, agent=Agent())
    wf.task("failing", agent=Failing())
    return wf


RUN = "run" + EVIL


@pytest.fixture
def hostile(db_url: str) -> str:
    """A store whose run, workflow, node, agent, codec, payload, output and error all carry
    terminal escape sequences."""
    with st.connect(db_url) as db:
        run = db.run(hostile_workflow(), {"in": EVIL}, run_id=RUN)
        assert run.status == "failed"
    return db_url


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


COMMANDS = {
    "runs": ["runs"],
    "show": ["show", RUN],
    "show-frame": ["show", RUN, "--frame", "4"],
    "timeline": ["timeline", RUN],
    "diff": ["diff", RUN, "1", "8"],
    "lineage": ["lineage", "SELECT * FROM checkpoints"],
    "error-message": ["show", RUN, "--frame", "999"],
    "lineage-column": ["lineage", f'SELECT 1 AS "{EVIL}"'],
    "fork": ["fork", RUN, "2"],
    "reset": ["reset", RUN, "node" + EVIL, "--yes"],
    "resume": ["resume", RUN, "--workflow", "tests.cli.test_cli_output:hostile_workflow"],
    "rewind": ["rewind", RUN, "2", "--yes"],
    "cancel": ["cancel", RUN],
}


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_cli_human_output_escapes_control_characters(hostile: str, command: list[str]) -> None:
    code, out, err = invoke("--db", hostile, *command)
    assert code in (0, 1), err
    shown = out + err
    assert not UNSAFE.findall(shown)
    # shown, visibly (where the run id is all a message names, its short id: ``run\x1b]0;p``)
    assert "\\x1b]0;" in shown or "\\u001b]0;" in shown


def test_cli_timeline_says_where_an_attempt_resumed_readably_and_escaped(db_url: str) -> None:
    wf = st.Workflow("flaky")
    wf.task("node" + EVIL, agent=Researcher(fail_first_attempt_after=2), retries=1)
    with st.connect(db_url) as db:
        run = db.run(wf, {"topic": "bees"})
    code, out, err = invoke("--db", db_url, "--wide", "timeline", run.id)
    assert code == 0, err
    assert not UNSAFE.findall(out)
    # it printed the stored key as JSON: {"resumed_from": [RUN, "node...", 0, 1, 1]}
    second = [line for line in out.splitlines() if "attempt_started" in line][1]
    detail = second.split("in_progress", 1)[1].strip()
    assert detail.startswith("resumed from node\\x1b]0;pwned") and detail.endswith("#1.1")


@pytest.mark.parametrize("command", ["show", "timeline", "runs"])
def test_cli_json_output_keeps_hostile_strings_exact(hostile: str, command: str) -> None:
    args = [command] if command == "runs" else [command, RUN]
    code, out, _ = invoke("--db", hostile, *args, "--json")
    assert code == 0
    assert not UNSAFE.findall(out)  # escaped as JSON \u escapes ...
    data = json.loads(out)
    assert RUN in set(strings(data))  # ... which decode to the exact strings
    if command == "show":
        outputs = {n["node_id"]: n["output"] for n in data["nodes"]}
        assert outputs["node" + EVIL] == {"out": EVIL}
        assert data["checkpoints"][0]["codec"] == "codec" + EVIL


def strings(data: object) -> list[str]:
    """Every string in a JSON document, keys included."""
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in (k, *strings(v))]
    if isinstance(data, list):
        return [s for v in data for s in strings(v)]
    return []


def run_in_pty(args: list[str], columns: int, program: list[str] | None = None) -> str:
    """Run the CLI (or ``program``: a command line before ``args``) on a real pseudo-terminal
    of ``columns`` and return what it printed."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen(
        [*(program or [sys.executable, "-m", "smithers_tt.cli"]), *args],
        stdin=child,
        stdout=child,
        stderr=child,
        env=env,
        close_fds=True,
    )
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.wait(timeout=60) == 0
    return b"".join(chunks).decode()


SGR = re.compile(r"\x1b\[[0-9;]*m")


class Verbose:
    id = "verbose"

    async def generate(self, request: st.GenerateRequest) -> st.GenerateResult:
        return st.GenerateResult({"text": "word " * 200})


class Wordy:
    id = "wordy"

    async def generate(self, request: st.GenerateRequest) -> st.GenerateResult:
        raise RuntimeError("a long explanation " * 20 + "END")


@pytest.fixture
def long_values(tmp_path: Path) -> str:
    """A store with one run whose output and error are far wider than a terminal."""
    wf = st.Workflow("long")
    wf.task("verbose", agent=Verbose())
    wf.task("wordy", agent=Wordy())
    url = f"sqlite:///{tmp_path / 'long.db'}"
    with st.connect(url) as db:
        db.run(wf, run_id="long-run")
    return url


def test_cli_show_on_a_terminal_fits_its_width_and_sends_only_colours(
    long_values: str, hostile: str
) -> None:
    shown = run_in_pty(["--db", long_values, "show", "long-run"], columns=70)
    plain = SGR.sub("", shown).replace("\r", "")
    lines = plain.splitlines()
    assert lines and max(len(line) for line in lines) <= 70
    assert any(line.endswith("…") for line in lines)  # long values were cut to fit
    assert shown != SGR.sub("", shown)  # a terminal gets colours
    evil = SGR.sub("", run_in_pty(["--db", hostile, "show", RUN], columns=70))
    assert "\x1b" not in evil and not UNSAFE.findall(evil.replace("\r", ""))


def test_cli_wide_prints_values_whole_on_a_terminal(long_values: str) -> None:
    shown = run_in_pty(["--db", long_values, "show", "long-run", "--wide"], columns=70)
    assert "a long explanation " * 20 + "END" in SGR.sub("", shown)


def test_cli_piped_output_keeps_long_values_whole(long_values: str) -> None:
    code, out, _ = invoke("--db", long_values, "show", "long-run")
    assert code == 0
    assert "a long explanation " * 20 + "END" in out and "…" not in out


@pytest.mark.parametrize(
    "args",
    [
        ["--json", "--db", "{db}", "runs"],
        ["runs", "--json", "--db", "{db}"],
        ["--db", "{db}", "runs", "--json"],
        ["--json", "runs", "--db", "{db}"],
    ],
    ids=["before", "after", "db-before", "json-before"],
)
def test_cli_json_and_db_work_before_and_after_the_command(hostile: str, args: list[str]) -> None:
    code, out, err = invoke(*(a.replace("{db}", hostile) for a in args))
    assert code == 0, err
    assert [r["run_id"] for r in json.loads(out)] == [RUN]


def test_cli_db_given_twice_with_different_values_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = invoke("--db", str(tmp_path / "a.db"), "runs", "--db", str(tmp_path / "b.db"))
    assert code == 2 and "--db is given twice" in err
    assert list(tmp_path.iterdir()) == []


def test_cli_without_a_command_prints_the_help_readably() -> None:
    result = CliRunner().invoke(cli, [])
    assert result.exit_code == 2
    assert result.stdout.startswith("Usage: ") and "\\x0a" not in result.stdout
    assert "  runs " in result.stdout


def test_cli_worker_log_lines_escape_control_characters(db_url: str) -> None:
    with st.connect(db_url) as db:
        db.submit(hostile_workflow(), {"in": EVIL})
    spec = "tests.cli.test_cli_output:hostile_workflow"
    code, out, err = invoke(
        *["--db", db_url, "worker", "--workflows", spec, "--id", "w" + EVIL],
        *["--max-runs", "1", "--idle-exit", "30"],
    )
    assert code == 0, err
    assert "claimed run" in err and "\\x1b]0;pwned" in err  # the hostile worker id, visibly
    assert not UNSAFE.findall(out + err)
    code, out, _ = invoke("--db", db_url, "workers")
    assert code == 0 and "\\x1b]0;pwned" in out and not UNSAFE.findall(out)
