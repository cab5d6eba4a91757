"""``smithers-tt sweep``, ``sweep-show``, ``sweep-cancel`` and ``sweep-promote``: a sweep of a
demo run from the command line, shown as a table with short ids, whole in --json; every option
says what it does; promoting with --delete-others asks first."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import smithers_tt as st
from smithers_tt.cli import cli
from smithers_tt.demo import demo_workflow

COMMANDS = ["sweep", "sweep-show", "sweep-cancel", "sweep-promote"]


@pytest.fixture
def parent(tmp_path: Path) -> tuple[str, str]:
    url = str(tmp_path / "sweep.db")
    with st.connect(url) as db:
        run = db.run(demo_workflow()[0], {"topic": "ants"})
    return url, run.id


def invoke(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", url, *args])
    return result.exit_code, result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_every_sweep_option_says_what_it_does(command: str) -> None:
    for param in cli.commands[command].params:
        if isinstance(param, click.Option):
            assert param.help, f"{command} {param.opts} has no help line"


def test_sweep_forks_and_runs_each_variant_and_sweep_show_lists_them(
    parent: tuple[str, str], tmp_path: Path
) -> None:
    url, run_id = parent
    bees = tmp_path / "bees.json"
    bees.write_text(json.dumps({"input": {"topic": "bees"}, "reset": ["research"]}))

    code, out = invoke(url, "sweep", run_id[:8], "9", "--variant", "base=", "--variant",
                       f"bees={bees}")  # fmt: skip

    assert code == 0, out
    sweep_id = re.search(r"sweep (\S+) of run (\S+) at frame 9", out)
    assert sweep_id is not None and run_id.startswith(sweep_id.group(2))
    assert len(sweep_id.group(2)) < len(run_id)  # shown short
    assert re.search(r"base\s+\S+\s+finished", out) and re.search(r"bees\s+\S+\s+finished", out)
    code, out = invoke(url, "--json", "sweep-show", sweep_id.group(1))
    shown = json.loads(out)
    assert code == 0 and shown["run_id"] == run_id and shown["frame_no"] == 9
    assert [v["variant"] for v in shown["variants"]] == ["base", "bees"]
    assert [v["status"] for v in shown["variants"]] == ["finished", "finished"]
    assert shown["variants"][1]["output"]["research"]["topic"] == "bees"
    assert all(v["model_calls"] > 0 for v in shown["variants"])  # the demo's agents' own calls
    assert shown["variants"][1]["edits"] == {"input": {"topic": "bees"}, "reset": ["research"]}


def test_sweep_cancel_marks_the_sweep_cancelled(parent: tuple[str, str]) -> None:
    url, run_id = parent
    code, out = invoke(url, "--json", "sweep", run_id, "9", "--variant", "a=")
    assert code == 0, out
    code, out = invoke(url, "sweep-cancel", json.loads(out)["sweep_id"])
    assert code == 0 and "(cancelled)" in out and re.search(r"a\s+\S+\s+finished", out)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variant", "nofile"], "NAME=EDITS.json"),
        (["--variant", "a=/no/such/file.json"], "cannot read the edits file"),
        ([], "at least one --variant"),
        (["--variant", "a=", "--variant", "a="], "given twice"),
    ],
)
def test_sweep_refuses_a_bad_variant_in_one_line(
    parent: tuple[str, str], args: list[str], message: str
) -> None:
    url, run_id = parent
    code, out = invoke(url, "sweep", run_id, "9", *args)
    assert code == 1 and message in out and "Traceback" not in out


def test_sweep_show_of_no_such_sweep_says_so_and_where_a_terminal_finds_sweep_ids(
    parent: tuple[str, str],
) -> None:
    code, out = invoke(parent[0], "sweep-show", "nope")
    assert code == 1 and "no sweep 'nope'" in out
    # there is no command listing sweeps: the message says where a terminal finds their ids
    assert "`smithers-tt runs --wide` shows each branch's sweep=ID label" in out


@pytest.fixture
def swept(db_url: str) -> tuple[str, str, dict[str, str]]:
    """A finished sweep of three variants on each backend: its URL, id and variant -> branch."""
    with st.connect(db_url) as db:
        wf = demo_workflow()[0]
        run = db.run(wf, {"topic": "ants"})
        variants = {"base": {}, "bees": {"input": {"topic": "bees"}}, "wasps": {}}
        sweep = db.sweep(run.id, 9, variants, workflow=wf)
        branches = {name: branch.id for name, branch in sweep.branches().items()}
    return db_url, sweep.id, branches


def test_sweep_promote_marks_the_branch_and_leaves_the_others(swept) -> None:
    url, sweep_id, _ = swept
    code, out = invoke(url, "sweep-promote", sweep_id, "bees")
    assert code == 0, out
    assert re.search(r"promoted bees \(branch \S+\)", out)
    assert re.search(r"bees \(promoted\)\s+\S+\s+finished", out)
    assert re.search(r"base\s+\S+\s+finished", out) and "deleted" not in out
    code, out = invoke(url, "--json", "sweep-show", sweep_id)
    shown = json.loads(out)
    assert shown["promoted"] == "bees"
    assert [v["promoted"] for v in shown["variants"]] == [False, True, False]


def test_sweep_promote_delete_others_refuses_without_yes_and_deletes_with_it(swept) -> None:
    url, sweep_id, branches = swept
    code, out = invoke(url, "sweep-promote", sweep_id, "bees", "--delete-others")
    assert code == 1 and "Refusing without --yes" in out
    with st.connect(url) as db:
        assert db.get_sweep(sweep_id).promoted is None
        assert db.get_sweep(sweep_id).status() == dict.fromkeys(branches, "finished")

    code, out = invoke(url, "--json", "sweep-promote", sweep_id, "bees", "--delete-others", "--yes")

    assert code == 0, out
    done = json.loads(out)
    assert done["run_id"] == branches["bees"] and done["kept"] == {}
    assert sorted(done["deleted"]) == sorted([branches["base"], branches["wasps"]])
    with st.connect(url) as db:
        assert db.get_sweep(sweep_id).status() == {
            "base": "deleted", "bees": "finished", "wasps": "deleted"
        }  # fmt: skip


def test_sweep_promote_asks_on_a_terminal_and_a_no_changes_nothing(swept, monkeypatch) -> None:
    url, sweep_id, _ = swept
    # The runner's stdin stands for a terminal (it is a pipe otherwise: refused without --yes).
    monkeypatch.setattr(click.testing._NamedTextIOWrapper, "isatty", lambda _: True, raising=False)
    result = CliRunner().invoke(
        cli, ["--db", url, "sweep-promote", sweep_id, "wasps", "--delete-others"], input="n\n"
    )
    assert result.exit_code == 1 and "delete its other branches (base, bees)?" in result.output
    with st.connect(url) as db:
        assert db.get_sweep(sweep_id).promoted is None
    result = CliRunner().invoke(
        cli, ["--db", url, "sweep-promote", sweep_id, "wasps", "--delete-others"], input="y\n"
    )
    assert result.exit_code == 0 and "deleted branch" in result.output, result.output


def test_sweep_promote_of_an_unknown_variant_says_which_there_are(swept) -> None:
    url, sweep_id, _ = swept
    code, out = invoke(url, "sweep-promote", sweep_id, "nope")
    assert code == 1 and "no variant 'nope'" in out and "'bees'" in out
