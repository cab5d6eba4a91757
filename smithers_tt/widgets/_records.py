"""What the debugger's state holds and its views read: typed records of messages, pending
actions and their results, pages of checkpoint refs, checkpoint edits and diffs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.store import CheckpointRef
from smithers_tt.timetravel import Change
from smithers_tt.widgets._conversation import ChatMessage

RefKey = tuple[str, int, int, int]


@dataclass(frozen=True)
class Message:
    """What the debugger tells the person: ``kind`` is info, success or error."""

    kind: str
    text: str


@dataclass(frozen=True)
class Pending:
    """An action that waits for Confirm or Cancel; ``summary`` says what it will do."""

    action: str
    run_id: str
    frame_no: int
    summary: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ActionResult:
    """What a confirmed action did (``ok``), in words, and the run and frame it produced."""

    action: str
    ok: bool
    text: str
    run_id: str | None = None
    frame_no: int | None = None


@dataclass(frozen=True)
class RefPage:
    """One page of the checkpoint refs visible at a frame, in key order (node, iteration,
    attempt, sequence), filtered by a search text."""

    keys: list[RefKey]
    total: int
    matched: int
    page: int
    pages: int
    query: str = ""
    refs: list[CheckpointRef] = field(default_factory=list, compare=False)
    """The refs of :attr:`keys`, in the same order."""


@dataclass(frozen=True)
class EditPreview:
    """What an edited checkpoint would be: valid or not (``error`` says why), the changes
    from the current payload, and how it stands against the agent's declared formats."""

    node_id: str
    before: Any
    after: Any = None
    error: str | None = None
    changes: list[Change] = field(default_factory=list)
    format_note: str = ""
    checkpoint: AgentCheckpoint | None = None

    @property
    def ok(self) -> bool:
        """Whether the edit is valid (Fork and Replay would accept it)."""
        return self.error is None


@dataclass
class DiffResult:
    """The differences the diff view shows: two labelled sides and sections of changes."""

    a: str
    b: str
    sections: list[tuple[str, list[Change]]] = field(default_factory=list)
    note: str | None = None
    conversations: list[tuple[str, list[tuple[str, ChatMessage]]]] = field(default_factory=list)
    """Per node whose payloads hold chat transcripts: its messages marked same / add /
    remove."""
    whole: tuple[str, str] = ("", "")
    """The sides as :attr:`a` and :attr:`b` with whole run ids (shown on hover), or empty when
    they name no run."""

    @property
    def empty(self) -> bool:
        """Whether no section holds a change."""
        return not any(changes for _, changes in self.sections)
