"""A workflow whose runs fail in two ways, for the triage tests (``tests/test_triage.py``,
``tests/widgets/test_triage_view.py``) and the CLI's ``--workflow tests._triage_flows:healed``."""

from __future__ import annotations

from typing import Any

import smithers_tt as st
from smithers_tt import GenerateRequest, Retry, Workflow


def workflow(mended: set[str] = frozenset()) -> Workflow:
    """``fetch`` times out (a message with numbers and a host in it) on input ``down``;
    ``parse`` fails on input ``bad`` with another error; input ``flaky`` fails its first fetch
    attempt only (its retry finishes the run); the faults named in ``mended`` are gone."""

    async def fetch(request: GenerateRequest) -> Any:
        key, n = request.input["key"], request.input["n"]
        if (key == "down" and "down" not in mended) or (key == "flaky" and request.attempt == 1):
            raise TimeoutError(f"fetch of 'doc-{n}' timed out after {n + 30}.5 s on 10.0.0.{n}")
        return {"page": key}

    async def parse(request: GenerateRequest) -> Any:
        if request.input["key"] == "bad" and "bad" not in mended:
            raise ValueError("no title in page")
        return {"title": request.needs["fetch"]["page"]}

    wf = Workflow("triage-flow")
    wf.task("fetch", agent=fetch, retry=Retry(count=1, on=(TimeoutError,)))
    wf.task("parse", agent=parse, needs=["fetch"])
    return wf


def failing_runs(db: st.Database) -> dict[str, str]:
    """Three runs that time out in ``fetch`` (twice each), one whose ``parse`` fails, one that
    finishes after its first ``fetch`` failed; by a name saying which."""
    wf = workflow()
    runs = {}
    for n, key in enumerate(["down", "down", "down", "bad", "flaky"]):
        runs[f"{key}-{n}"] = db.run(wf, {"key": key, "n": n}).id
    return runs


def healed() -> Workflow:
    """The workflow with its faults mended (for ``--workflow tests._triage_flows:healed``)."""
    return workflow({"down", "bad"})
