"""A workflow whose agent asks a person, for the ``continue`` command's tests (not a test
module): ``--workflow tests.cli._pause_flows:asking``."""

from __future__ import annotations

from typing import Any

import smithers_tt as st

QUESTION = {"question": "colour?\x1b[31m red or blue"}


async def ask(request: st.GenerateRequest) -> Any:
    return {"colour": await request.ask(QUESTION)}


async def report(request: st.GenerateRequest) -> Any:
    return {"report": request.needs["pick"]["colour"]}


def asking() -> st.Workflow:
    wf = st.Workflow("asking")
    wf.task("pick", agent=ask)
    wf.task("report", agent=report, needs=["pick"])
    return wf
