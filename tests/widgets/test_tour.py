"""The tour notebook's debugger, run as a person runs it: every button it promises works."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "notebooks" / "00_tour.ipynb"


def _run_tour(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Execute the tour's code cells in order, as Run All does, on a fresh demo database."""
    monkeypatch.setenv("SMITHERS_TT_DB", f"sqlite:///{db_path}")
    namespace: dict = {}
    for cell in json.loads(TOUR.read_text())["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), str(TOUR), "exec"), namespace)
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
