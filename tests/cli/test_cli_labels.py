"""What a person sees of labels and short ids on the command line: the demo's runs listed
with what each shows, found by label, named by a short prefix, shown shortened."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from smithers_tt.cli import cli

CASES = ["clean", "retry", "schema-correction", "cancelled", "resumed", "fork", "replay"]


@pytest.fixture
def demo_db(demo_copy: Path) -> str:
    return str(demo_copy)


def run(db: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", db, *args])
    return result.exit_code, result.output


def table(out: str) -> list[dict[str, str]]:
    """The rows of a printed table (cells split on runs of two or more spaces)."""
    header, *rows = [line for line in out.splitlines() if line.strip()]
    names = re.split(r"\s{2,}", header.strip())
    return [dict(zip(names, re.split(r"\s{2,}", row.strip()), strict=False)) for row in rows]


def listed(db: str, *args: str) -> list[dict]:
    result = CliRunner().invoke(cli, ["--db", db, "--json", "runs", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_runs_shows_each_demo_run_with_the_case_it_shows(demo_db: str) -> None:
    code, out = run(demo_db, "runs")

    assert code == 0, out
    rows = table(out)
    assert [r["labels"].split()[0] for r in rows] == [f"case={c}" for c in CASES]
    replay = rows[-1]["labels"]
    clean_id = listed(demo_db, "--label", "case=clean")[0]["run_id"]
    assert replay == f"case=replay replay_of={clean_id}"


def test_runs_shows_ids_shortened_to_a_unique_prefix_that_names_the_run(demo_db: str) -> None:
    full = [r["run_id"] for r in listed(demo_db)]

    rows = table(run(demo_db, "runs")[1])

    shown = [r["run"] for r in rows]
    assert all(
        len(s) >= 8 and len(s) < len(f) and f.startswith(s)
        for s, f in zip(shown, full, strict=True)
    )
    for short, whole in zip(shown, full, strict=True):
        code, out = run(demo_db, "--json", "show", short)
        assert code == 0 and f'"run_id": "{whole}"' in out
    parent = rows[CASES.index("fork")]["parent"]
    assert parent == f"{shown[0]}@9"  # the clean run, shortened the same way


def test_runs_wide_shows_whole_ids(demo_db: str) -> None:
    full = [r["run_id"] for r in listed(demo_db)]

    rows = table(run(demo_db, "--wide", "runs")[1])

    assert [r["run"] for r in rows] == full


def test_runs_label_keeps_only_runs_carrying_it(demo_db: str) -> None:
    code, out = run(demo_db, "runs", "--label", "case=retry")

    assert code == 0
    rows = table(out)
    assert [r["labels"] for r in rows] == ["case=retry"]


def test_runs_label_repeated_keeps_runs_carrying_every_one(demo_db: str) -> None:
    clean_id = listed(demo_db, "--label", "case=clean")[0]["run_id"]

    both = listed(demo_db, "--label", "case=replay", "--label", f"replay_of={clean_id}")
    none = listed(demo_db, "--label", "case=clean", "--label", f"replay_of={clean_id}")

    assert [r["labels"]["case"] for r in both] == ["replay"]
    assert none == []


def test_runs_json_has_whole_ids_and_labels(demo_db: str) -> None:
    runs = listed(demo_db)

    assert [r["labels"]["case"] for r in runs] == CASES
    assert all(len(r["run_id"]) == 21 for r in runs)


@pytest.mark.parametrize(
    ("label", "message"),
    [("case", "a label is KEY=VALUE, like case=retry; got 'case'"),
     ("bad key=x", "label key 'bad key' is not allowed")],
)  # fmt: skip
def test_runs_label_that_is_not_key_value_is_a_one_line_error(
    demo_db: str, label: str, message: str
) -> None:
    code, out = run(demo_db, "runs", "--label", label)

    assert code == 1 and message in out.strip().splitlines()[0]
    assert "Traceback" not in out


def test_a_prefix_names_a_run_in_every_command_that_takes_one(demo_db: str) -> None:
    whole = listed(demo_db, "--label", "case=retry")[0]["run_id"]
    prefix = whole[:12]

    code, out = run(demo_db, "timeline", prefix)
    assert code == 0 and "run_created" in out and f"{whole[:8]}" in out.split("fork tree")[1]
    code, out = run(demo_db, "--json", "fork", prefix, "3", "--label", "case=mine")
    assert code == 0 and f'"parent_run_id": "{whole}"' in out
    assert [r["labels"] for r in listed(demo_db, "--label", "case=mine")] == [{"case": "mine"}]
    code, out = run(demo_db, "--json", "cancel", prefix)
    assert code == 0 and f'"run_id": "{whole}"' in out


def test_an_ambiguous_prefix_is_an_error_listing_the_candidates(demo_db: str) -> None:
    runs = listed(demo_db)
    prefix = runs[0]["run_id"][:6]  # the demo's runs were all made within a second

    code, out = run(demo_db, "timeline", prefix)

    assert code == 1 and "Traceback" not in out
    assert f"run id prefix '{prefix}' is ambiguous" in out
    assert f"{runs[0]['run_id']} demo-report finished" in out


def test_a_prefix_under_6_characters_is_refused_clearly(demo_db: str) -> None:
    code, out = run(demo_db, "show", "1a2b")

    assert code == 1
    assert "no run '1a2b'; a run id prefix needs at least 6 characters" in out


def test_messages_name_runs_by_short_id_and_the_short_id_works_in_the_next_command(
    demo_db: str,
) -> None:
    whole = listed(demo_db, "--label", "case=clean")[0]["run_id"]

    code, out = run(demo_db, "fork", whole, "9", "--reset", "write")
    found = re.search(r"forked (\w+) from (\w+) at frame 9 .*resume (\w+)$", out.strip())
    assert code == 0 and found, out
    child, parent, hint = found.groups()
    assert whole.startswith(parent) and 8 <= len(parent) < len(whole)
    # the resume hint, a command to paste later, names the run whole (a prefix may name more
    # runs by then: tests/cli/test_cli_hints.py)
    assert hint.startswith(child) and len(hint) == len(whole)
    code, out = run(demo_db, "show", child)  # the id shown names the run
    assert code == 0 and out.startswith(f"run {child} at frame 0: ")
    code, out = run(demo_db, "cancel", child)
    assert code == 0 and out.startswith(f"cancel requested for {child} (now ")
    code, out = run(demo_db, "cancel", child)  # it said "cancel requested" again
    assert code == 0 and out.strip() == f"{child} is already cancelled; nothing was changed"
    code, out = run(demo_db, "reset", whole, "write", "--yes")
    assert code == 0 and re.search(rf"resume {parent}$", out.strip()), out
    for said in (out, run(demo_db, "show", whole)[1]):
        assert whole not in said  # whole only with --wide or --json
    code, out = run(demo_db, "--json", "show", child)
    assert code == 0 and json.loads(out)["run_id"] not in (child, parent)
