"""A run's labels, written with the run: the change that records them in ``tt_run_labels``.

Labels are given once, when a run is created or forked, and never changed: so they are a
frameless change of the entry that creates the run (:attr:`Entry.create`), written in the same
transaction and round trip as its row and frame 0. Deleting the run deletes them (the foreign
key cascades).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from smithers_tt.store.ledger._write import Change, Write


class Labelled(Change):
    """The new run ``run_id`` carries ``labels`` (checked by ``smithers_tt._labels``)."""

    __slots__ = ("labels", "run_id")

    ticks = 0
    executes = False  # rows deferred: the run's row may go with the frames' round trip

    def __init__(self, run_id: str, labels: Mapping[str, str]) -> None:
        self.run_id, self.labels = run_id, dict(labels)

    def apply(self, w: Write, frame_no: int, early: Any) -> None:
        for key, value in self.labels.items():
            w.defer(w.sql.insert_label, (self.run_id, key, value))
