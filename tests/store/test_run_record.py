"""Creating a run hands back the run as it reads back from the store, without reading it."""

from __future__ import annotations

from typing import Any

import pytest

from smithers_tt.store import Store

PARENT = "parent-run"


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"input": {"topic": "bee", "depth": [1, 2.5, None, True]}, "owner_id": "worker-1"},
        {"status": "queued", "workflow_hash": "abc123", "max_checkpoint_bytes": 4096},
        {"graph": {"a": [], "b": ["a"]}, "breakpoints": {"before": ["b"], "after": []}},
        {"parent_run_id": PARENT, "parent_frame_no": 0, "run_id": "child-run"},
        {"labels": {"case": "retry", "by": "ana"}},
    ],
    ids=["plain", "input and owner", "queued", "graph", "child", "labels"],
)
def test_create_run_returns_the_run_as_it_reads_back(store: Store, options: dict[str, Any]) -> None:
    store.create_run("wf", run_id=PARENT)

    record, fence = store.create_run("wf", **options)

    assert record == store.get_run(record.run_id)
    assert record.clock == 0 and not record.inherits
    assert (fence.run_id, fence.epoch) == (record.run_id, record.owner_epoch)
    assert record.status == options.get("status", "running")
    assert record.input == options.get("input")
