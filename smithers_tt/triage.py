"""Failure triage: the store's failures grouped by what went wrong and where.

``db.failures()`` reads every failed attempt (in failed runs and in runs that finished after a
retry), every run that failed outside its nodes, and every run stuck in ``running`` (its owner
silent for ``stuck_after`` seconds), and groups them by workflow, node, error class and
normalised message: the message with its numbers, ids, hex digests and quoted values replaced
by placeholders, so "timed out after 31 s on run 1a24..." and "timed out after 30 s on run
1a25..." are one group. Each :class:`FailureGroup` has its count, the runs, the first and last
time it was seen and an example to open in the debugger; :meth:`Failures.frame` gives the
groups as a pandas DataFrame (``lineage`` extra), and :meth:`Failures.retry` resets the
failing node of every run of a group that can run again and resumes it, reporting each run.
In a notebook, :class:`smithers_tt.widgets.TriageView` shows the groups with buttons.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from smithers_tt._extras import require_extra
from smithers_tt.engine import positive_seconds
from smithers_tt.errors import InvalidArgument, SmithersError
from smithers_tt.store import FailureRow, RunRecord, failure_rows, now_ms

if TYPE_CHECKING:  # pragma: no cover
    import pandas

    from smithers_tt.engine import Workflow

__all__ = ["FailureGroup", "Failures", "RetryResult", "error_class", "failures", "normalise"]

MESSAGE_CHARS = 200
"""Longest normalised message kept (the rest is cut with an ellipsis)."""

FRAME_COLUMNS = (
    "kind",
    "workflow",
    "node_id",
    "error_class",
    "message",
    "count",
    "runs",
    "retryable",
    "first_seen",
    "last_seen",
    "example_run_id",
    "run_ids",
)
"""The columns of :meth:`Failures.frame`, in order."""

RETRYABLE = frozenset({"failed", "interrupted"})
"""Run statuses a retry resets and resumes; the others are left as they are and reported."""

_CLASS = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failed))\s*:")
_PLACEHOLDERS = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.I), "<hex>"),
    (re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\""), "<str>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<addr>"),
    (re.compile(r"-?\b\d+(?:\.\d+)*\b"), "<n>"),
    (re.compile(r"\s+"), " "),
)


def error_class(code: str | None, error: str | None) -> str:
    """The class of an error: its stored code, else the exception name its text starts with,
    else ``Error``."""
    if code:
        return code
    found = _CLASS.match(error or "")
    return found.group(1) if found else "Error"


def normalise(error: str | None) -> str:
    """An error's message without its class prefix, its first line only, with the parts that
    differ between occurrences of one failure replaced by placeholders."""
    text = (error or "").strip()
    found = _CLASS.match(text)
    if found:
        text = text[found.end() :]
    text = text.strip().splitlines()[0] if text.strip() else ""
    for pattern, placeholder in _PLACEHOLDERS:
        text = pattern.sub(placeholder, text)
    text = text.strip()
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


@dataclass
class FailureGroup:
    """Failures of one workflow's node with one error class and normalised message."""

    kind: str
    """``attempt`` (failed attempts), ``run`` (runs that failed outside a node) or ``stuck``."""
    workflow: str
    node_id: str | None
    error_class: str
    message: str
    count: int = 0
    first_ms: int = 0
    last_ms: int = 0
    example: FailureRow | None = None
    """The newest failure of the group (what "open an example" shows)."""
    run_ids: list[str] = field(default_factory=list)
    """The runs it happened in, newest first, each once."""
    run_status: dict[str, str] = field(default_factory=dict)
    """Each run's status now."""

    @property
    def key(self) -> tuple[str, str, str | None, str, str]:
        return (self.kind, self.workflow, self.node_id, self.error_class, self.message)

    @property
    def retryable(self) -> list[str]:
        """The runs a retry would reset and resume (failed or interrupted, with a node)."""
        if self.node_id is None:
            return []
        return [r for r in self.run_ids if self.run_status[r] in RETRYABLE]

    def describe(self) -> dict[str, Any]:
        """What the group says, as plain values (what ``--json`` prints and the frame's
        columns are made of)."""
        return {
            "kind": self.kind,
            "workflow": self.workflow,
            "node_id": self.node_id,
            "error_class": self.error_class,
            "message": self.message,
            "count": self.count,
            "run_ids": list(self.run_ids),
            "retryable": self.retryable,
            "first_seen_ms": self.first_ms,
            "last_seen_ms": self.last_ms,
            "example": None if self.example is None else self.example._asdict(),
        }

    def add(self, row: FailureRow) -> None:
        self.count += 1
        if self.example is None or row.at_ms > self.example.at_ms:
            self.example = row
        self.first_ms = row.at_ms if self.count == 1 else min(self.first_ms, row.at_ms)
        self.last_ms = max(self.last_ms, row.at_ms)
        if row.run_id not in self.run_status:
            self.run_ids.append(row.run_id)
            self.run_status[row.run_id] = row.run_status


@dataclass(frozen=True)
class RetryResult:
    """What a retry did to one run of a group."""

    run_id: str
    outcome: str
    """``resumed`` (then ``status`` is the run's status after), ``skipped`` or ``error``."""
    status: str | None
    detail: str = ""


class Failures:
    """The groups of failures of a store, largest first (``len``, iteration, indexing)."""

    def __init__(self, rows: list[FailureRow], *, more: bool, db: Any) -> None:
        groups: dict[tuple[Any, ...], FailureGroup] = {}
        for row in rows:
            cls = "Stuck" if row.kind == "stuck" else error_class(row.error_code, row.error)
            msg = "no heartbeat" if row.kind == "stuck" else normalise(row.error)
            key = (row.kind, row.workflow, row.node_id, cls, msg)
            group = groups.get(key)
            if group is None:
                group = groups[key] = FailureGroup(row.kind, row.workflow, row.node_id, cls, msg)
            group.add(row)
        self.groups = sorted(groups.values(), key=lambda g: (-g.count, -g.last_ms, g.key))
        self.truncated = more
        """True when the store held more failures than were read (``limit``)."""
        self._db = db

    def __len__(self) -> int:
        return len(self.groups)

    def __iter__(self) -> Iterator[FailureGroup]:
        return iter(self.groups)

    def __getitem__(self, index: int) -> FailureGroup:
        return self.groups[index]

    def frame(self) -> pandas.DataFrame:
        """The groups as a DataFrame, one row per group, largest first (``lineage`` extra)."""
        require_extra("pandas", needed_for="failures as a DataFrame")
        import pandas

        rows = []
        for g in self.groups:
            said = g.describe()
            rows.append(
                {
                    **{k: said[k] for k in FRAME_COLUMNS[:6]},
                    "runs": len(g.run_ids),
                    "retryable": len(g.retryable),
                    "first_seen": pandas.to_datetime(g.first_ms, unit="ms", utc=True),
                    "last_seen": pandas.to_datetime(g.last_ms, unit="ms", utc=True),
                    "example_run_id": g.example.run_id if g.example else None,
                    "run_ids": said["run_ids"],
                }
            )
        return pandas.DataFrame(rows, columns=list(FRAME_COLUMNS))

    def retry(
        self,
        group: FailureGroup | int,
        wf: Workflow,
        *,
        on_result: Callable[[RetryResult], None] | None = None,
    ) -> list[RetryResult]:
        """Reset the failing node (and what needs it) of every failed or interrupted run of
        ``group`` and resume it with ``wf``, one run after another; a run in another state is
        skipped, and a run that cannot be retried is reported, never stops the others.

        Raises:
            InvalidArgument: ``wf`` is not the group's workflow, or the group has no node.
        """
        g = self.groups[group] if isinstance(group, int) else group
        if getattr(wf, "name", None) != g.workflow:
            raise InvalidArgument(
                f"this group's runs are of workflow {g.workflow!r}; pass that workflow, "
                f"not {getattr(wf, 'name', wf)!r}"
            )
        if g.node_id is None:
            raise InvalidArgument(
                "this group's runs failed outside a node: there is no step to retry; open one "
                "in the debugger to see why"
            )
        results = []
        runs = self._db.store.get_runs(g.run_ids)  # one read for the group, not one per run
        for run_id in g.run_ids:
            result = self._retry_one(g, run_id, runs.get(run_id), wf)
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results

    def _retry_one(
        self, g: FailureGroup, run_id: str, run: RunRecord | None, wf: Workflow
    ) -> RetryResult:
        assert g.node_id is not None
        if run is None:
            return RetryResult(run_id, "skipped", None, "the run is not in the store any more")
        if run.status not in RETRYABLE:
            return RetryResult(run_id, "skipped", run.status, f"the run is {run.status}")
        try:
            self._db.reset(run_id, g.node_id, dependents=True, reason="retried from triage")
            resumed = self._db.resume(run_id, wf)
        except SmithersError as error:
            return RetryResult(run_id, "error", self._db.get_run(run_id).status, error.message)
        return RetryResult(run_id, "resumed", resumed.status, "")


def failures(
    db: Any,
    *,
    workflow: str | None = None,
    since: datetime.datetime | float | None = None,
    stuck_after: float = 60.0,
    limit: int = 100_000,
) -> Failures:
    """``db``'s failures grouped by workflow, node, error class and normalised message: failed
    attempts, runs that failed outside a node and runs stuck in ``running`` with no heartbeat
    for ``stuck_after`` seconds. ``since`` (a datetime, or seconds ago) and ``workflow`` (a
    workflow's name) narrow them; at most ``limit`` are read, newest first
    (:attr:`Failures.truncated` says when there were more).
    """
    stuck_ms = int(positive_seconds("stuck_after", stuck_after) * 1000)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit must be an int >= 1, got {limit!r}")
    now = now_ms()
    since_ms = None
    if isinstance(since, datetime.datetime):
        since_ms = int(since.timestamp() * 1000)
    elif since is not None:
        since_ms = now - int(positive_seconds("since", since) * 1000)
    rows, more = failure_rows(
        db.engine, stuck_before_ms=now - stuck_ms, since_ms=since_ms, workflow=workflow, limit=limit
    )
    return Failures(rows, more=more, db=db)
