"""Labels in the lineage: a ``labels`` column on ``runs`` and a ``run_labels`` view, with
every reader, on both backends."""

from __future__ import annotations

import json

import pytest

import smithers_tt as st
from smithers_tt.lineage import Lineage


@pytest.mark.parametrize("options", [{}, {"snapshot": True}, {"reader": "arrow"}],
                         ids=["live", "snapshot", "arrow"])  # fmt: skip
def test_runs_view_has_labels_and_run_labels_one_row_per_label(
    db: st.Database, options: dict
) -> None:
    a, _ = db.store.create_run("wf", labels={"case": "retry", "owner": "ana"})
    b, _ = db.store.create_run("wf")

    with db.lineage(**options) as lin:
        runs = lin.runs().set_index("run_id")["labels"].to_dict()
        labels = lin.run_labels().to_dict("records")
        retried = lin.sql(
            "SELECT run_id FROM runs JOIN run_labels USING (run_id) "
            "WHERE key = 'case' AND value = 'retry'"
        ).run_id.tolist()

    assert {k: json.loads(v) for k, v in runs.items()} == {
        a.run_id: {"case": "retry", "owner": "ana"},
        b.run_id: {},
    }
    assert labels == [
        {"run_id": a.run_id, "key": "case", "value": "retry"},
        {"run_id": a.run_id, "key": "owner", "value": "ana"},
    ]
    assert retried == [a.run_id]


def test_run_labels_method_documents_its_columns() -> None:
    assert all(f"``{c}``" in (Lineage.run_labels.__doc__ or "") for c in ("run_id", "key", "value"))
