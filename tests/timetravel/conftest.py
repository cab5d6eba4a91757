"""Fixtures of the time-travel tests: a finished demo run on each backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.demo import DemoAgents, demo_workflow
from smithers_tt.engine import Workflow
from smithers_tt.store import Frame
from tests.timetravel._support import TOPIC


@dataclass
class Demo:
    """A finished demo run (flaky researcher, invalid first draft) and its workflow."""

    db: st.Database
    run: st.Run
    wf: Workflow
    agents: DemoAgents

    def frames(self) -> list[Frame]:
        return self.run.frames()

    def frame(self, kind: str, node_id: str | None = None, **match: Any) -> int:
        """The number of the first frame of ``kind`` (of ``node_id``, matching ``match``)."""
        for f in self.frames():
            if f.kind != kind or (node_id is not None and f.node_id != node_id):
                continue
            if all(getattr(f, k) == v for k, v in match.items()):
                return f.frame_no
        raise AssertionError(f"no {kind} frame of {node_id} with {match}")


def fresh_workflow() -> tuple[Workflow, DemoAgents]:
    """The demo workflow with new agents (same definition, so runs resume under it)."""
    return demo_workflow(flaky=True, invalid_first_draft=True)


@pytest.fixture
def demo(db: st.Database) -> Demo:
    wf, agents = fresh_workflow()
    run = db.run(wf, TOPIC)
    assert run.status == "finished"
    return Demo(db, run, wf, agents)
