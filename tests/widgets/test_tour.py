"""The tour notebook's debugger, run as a person runs it: every button it promises works."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "notebooks" / "00_tour.ipynb"


def _run_tour(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Execute the tour's code cells in order, as Run All does, on a fresh demo database;
    ``_shown`` holds what each cell shows (its last expression's value, or None)."""
    monkeypatch.setenv("SMITHERS_TT_DB", f"sqlite:///{db_path}")
    namespace: dict = {"_shown": []}
    for cell in json.loads(TOUR.read_text())["cells"]:
        if cell["cell_type"] == "code":
            body = ast.parse("".join(cell["source"])).body
            last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
            exec(compile(ast.Module(body, []), str(TOUR), "exec"), namespace)
            shown = None if last is None else ast.Expression(last.value)
            value = None if shown is None else eval(compile(shown, str(TOUR), "eval"), namespace)
            namespace["_shown"].append(value)
    return namespace


def test_tour_debugger_replays_the_fork_it_shows(tmp_path: Path, monkeypatch) -> None:
    tour = _run_tour(tmp_path / "smithers.db", monkeypatch)
    debugger, db, fork = tour["debugger"], tour["db"], tour["fork"]
    assert debugger.model.run_id == fork.id

    assert not debugger.actions.replay.disabled  # the tour says "Replay… runs it again"
    assert debugger.actions.replay_note.value == ""
    before = len(db.runs())
    debugger.select_frame(0)
    debugger.actions.reset.value = ("write",)
    debugger.actions.replay.click()
    debugger.actions.confirm.click()

    result = debugger.model.last_result
    assert result.ok, result
    replayed = db.get_run(result.run_id)
    assert replayed.status == "finished" and replayed.record.parent_run_id == fork.id
    assert len(db.runs()) == before + 1
    assert "finished at frame" in debugger.actions.report.value
    debugger.close()


def test_tour_names_every_button_of_the_debugger_it_opens(tmp_path: Path, monkeypatch) -> None:
    text = "".join(
        "".join(cell["source"])
        for cell in json.loads(TOUR.read_text())["cells"]
        if cell["cell_type"] == "markdown"
    )
    tour = _run_tour(tmp_path / "smithers.db", monkeypatch)
    actions = tour["debugger"].actions
    for button in (actions.rewind, actions.undo, actions.fork, actions.replay):
        assert f"**{button.description}**" in text, button.description
    tour["debugger"].close()


def test_the_readme_tour_starts_from_the_run_browser_as_written(
    demo_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = (ROOT / "README.md").read_text().split("## A 30-second tour", 1)[1]
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    shutil.copy(demo_copy, tmp_path / "smithers.db")
    monkeypatch.chdir(tmp_path)
    *setup, shown = ast.parse(code).body
    namespace: dict = {}
    exec(compile(ast.Module(setup, []), "README.md", "exec"), namespace)
    browser = eval(compile(ast.Expression(shown.value), "README.md", "eval"), namespace)

    assert len(browser.rows.children) == 7  # the demo's runs, newest first
    browser.label.value = "case=retry"  # step 1: find the run
    assert len(browser.rows.children) == 1
    debugger = browser.open_run(browser.listing.runs[0].run_id)  # step 2: open it
    assert debugger.model.record.labels == {"case": "retry"}
    assert "$" in debugger.header.value and "no cost" not in debugger.header.value  # priced
    assert {n["id"] for n in debugger.graph.graph["nodes"]} == {"research", "write", "review"}
    browser.in_place.back()
    assert browser.label.value == "case=retry" and len(browser.rows.children) == 1
    view = namespace["TriageView"](namespace["db"], workflows=[namespace["wf"]])  # step 3
    group = view.failures[0]
    assert (group.node_id, group.workflow) == ("research", "demo-report") and group.count >= 1


def test_tour_shows_what_the_demos_model_calls_cost(tmp_path: Path, monkeypatch) -> None:
    tour = _run_tour(tmp_path / "smithers.db", monkeypatch)
    debugger = tour["debugger"]
    header = debugger.header.value  # "model calls at frame N: ... · $0.000123 ..."
    assert "$" in header and "no cost" not in header and "without a price" not in header
    browser, triage = (
        next(w for w in tour["_shown"] if type(w).__name__ == kind)
        for kind in ("RunBrowser", "TriageView")
    )
    for opened in (browser.open_run(tour["fork"].id), triage.open_example(0)):
        assert "$" in opened.header.value and "no cost" not in opened.header.value
        opened.close()
    debugger.close()
