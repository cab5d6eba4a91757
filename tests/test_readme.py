"""The README's core-API example, pasted into Python as a newcomer pastes it: it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_core_api_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = (ROOT / "README.md").read_text().split("## The core API", 1)[1]
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)  # it makes runs.db where it runs
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # a placeholder such as {...} fails

    db, child = namespace["db"], namespace["child"]
    resumed = db.get_run(child.id)  # the fork with another input, resumed
    assert resumed.status == "finished" and resumed.output["research"]["topic"] == "wasps"
    queued = [r for r in db.runs(limit=100) if r.status == "queued"]
    assert len(queued) == 1  # db.submit's run, waiting for a worker
    db.close()
