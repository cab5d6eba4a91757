"""Creating a run hands back the run as it reads back from the store, without reading it."""

from __future__ import annotations

from dataclasses import fields
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


def test_new_run_is_the_run_record_as_a_write_inserts_it() -> None:
    # One row, two forms: NewRun is RunRecord's columns as stored (JSON as text), less the
    # clock and the stamps the write adds; the insert statement names them in its order.
    from smithers_tt.store._records import RunRecord
    from smithers_tt.store.backend._dialect import DIALECTS
    from smithers_tt.store.ledger import NewRun

    added = ("clock", "created_at_ms", "updated_at_ms")
    stored = {"input": "input_json", "output": "output_json", "graph": "graph_json"}
    # labels are rows of tt_run_labels, written by the same write (Labelled), not a column
    columns = [stored.get(f.name, f.name) for f in fields(RunRecord) if f.name != "labels"]
    assert sorted((*NewRun._fields, *added)) == sorted(columns)
    for dialect in DIALECTS.values():
        insert = dialect.statements.insert_run
        named = insert[insert.index("(") + 1 : insert.index(")")].replace(" ", "").split(",")
        assert named == [*NewRun._fields, *added]
