"""The debugger's controller: pure Python, no widgets, so every behaviour is testable without a
browser (and without ipywidgets).

It holds what is selected (run, frame, checkpoint ref, diff pair), reads the database, and
runs the actions (rewind, fork, replay) behind an explicit confirmation step. Views subscribe
with :meth:`DebuggerModel.on` and redraw from the model when it announces a change:

``run``      another run is shown, or its history was reloaded (rewind)
``frames``   new frames arrived (live refresh)
``frame``    the selected frame changed
``ref``      the selected checkpoint ref changed
``diff``     the diff settings changed
``pending``  an action waits for confirmation (or no longer does)
``message``  an action reported what it did, or why it could not
``tree``     the fork tree changed
``breakpoints`` a breakpoint was toggled (``model.breakpoints``)
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt.checkpoint import AgentCheckpoint, canonical_bytes, read_json
from smithers_tt.errors import ForkPointRewound, InvalidArgument, SmithersError
from smithers_tt.store import (
    PAUSE_KINDS,
    CheckpointRef,
    Frame,
    FrameRow,
    RunRecord,
    content_sizes,
    frame_rows,
    frame_span,
)
from smithers_tt.timetravel import Change, ForkEdge, Snapshot
from smithers_tt.widgets._breakpoints import Breakpoints
from smithers_tt.widgets._bulk import paused_gc
from smithers_tt.widgets._conversation import ChatMessage, find_transcript, transcript_diff
from smithers_tt.widgets._frames import FrameList
from smithers_tt.widgets._lens import ask
from smithers_tt.widgets._newest import NewestView, NodeTable, node_table
from smithers_tt.widgets._preload import HistoryRead
from smithers_tt.widgets._scrub import FoldCache
from smithers_tt.widgets._trim import Touched, newest_refs, trimmed

log = logging.getLogger(__name__)

LIVE_STATUSES = ("running", "queued")
"""A run in one of these states may still get frames: the debugger keeps refreshing."""

RefKey = tuple[str, int, int, int]
AttemptKey = tuple[str, int, int]

_PAYLOAD_CACHE = 64
PRELOAD_AT = 20_000
"""A run opened on its newest frame with this many frames or more has its history read and
folded in a thread while it is shown (:mod:`~smithers_tt.widgets._preload`)."""
PRELOAD_STEP = 10_000
"""Frames the thread folds between two looks at whether it should stop."""
REF_PAGE = 50
"""Checkpoint refs listed per page in the inspector."""


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

    @property
    def empty(self) -> bool:
        """Whether no section holds a change."""
        return not any(changes for _, changes in self.sections)


# --- reading -------------------------------------------------------------------------------


NO_CHANGES = "no changes, an exact copy of the state"
"""What a fork or replay with nothing edited, reset or given is said to make."""


def load_frames(
    db: Any, run_id: str, after: int | None = None, upto: int | None = None
) -> list[FrameRow]:
    """A run's frames in order as rows, base frames (below 0) included; only
    ``after < frame_no <= upto`` if given."""
    with paused_gc():
        return frame_rows(db.store.engine, run_id, after=after, upto=upto)


def describe_frame(frame: Frame | FrameRow) -> str:
    """One line of plain text (not escaped) saying what a frame changed."""
    kind = frame.kind
    data = frame.data if isinstance(frame.data, dict) else {}
    where = ""
    if frame.node_id is not None:
        where = frame.node_id if not frame.iteration else f"{frame.node_id}[{frame.iteration}]"
    if kind == "checkpoint":
        size = data.get("size")
        extra = f", {size} B" if size is not None else ""
        return (
            f"checkpoint of {where} attempt #{frame.attempt} seq {frame.sequence} "
            f"({frame.purpose}, {frame.codec} v{frame.version}{extra}, "
            f"{(frame.content_hash or '')[:12]})"
        )
    if kind == "attempt_started":
        src = data.get("resumed_from")
        resumed = ""
        if isinstance(src, list) and len(src) == 5:  # [run, node, iteration, attempt, seq]
            # named: a task fork resumes from another node's checkpoint
            source = f"{src[1]}[{src[2]}]" if src[2] else f"{src[1]}"
            resumed = f", resumed from {source} #{src[3]} seq {src[4]}"
        return f"attempt #{frame.attempt} of {where} started{resumed}"
    if kind == "attempt_finished":
        error = data.get("error")
        return f"attempt #{frame.attempt} of {where} {frame.state}" + (
            f": {error}" if error else ""
        )
    if kind in ("node_state", "cache_hit"):
        return f"{where} is {frame.state}" + (" (cache hit)" if kind == "cache_hit" else "")
    if kind == "forked":
        forked = (
            f"forked from run {data.get('parent_run_id')} at frame {data.get('parent_frame_no')}"
        )
        if frame.state == "interrupted":  # the status a fork has until something runs it
            return f"{forked}: not run yet (Replay or resume runs what is left)"
        return forked
    if kind == "reset":
        return f"reset {', '.join(map(str, data.get('nodes') or []))}"
    if kind == "run_claimed":
        return f"run claimed by {data.get('owner_id')} (epoch {data.get('epoch')})"
    if kind == "run_released":
        return "run given back to the queue"
    if kind in ("run_finished", "run_failed", "run_cancelled"):
        error = data.get("error")
        return f"run {kind[4:]}" + (f": {error}" if error else "")
    if kind == "run_created":
        return "run created"
    if kind == "cancel_requested":
        return "cancel requested"
    if kind == "run_paused":
        when = "while running" if data.get("when") == "ask" else data.get("when", "at")
        question = data.get("question")
        asked = "" if question is None else f": {json.dumps(question, ensure_ascii=False)}"
        return f"paused ({data.get('reason')}) {when} {where}{asked}"
    if kind == "breakpoints_set":
        marks = data.get("breakpoints") or {}
        said = [f"{w} {', '.join(marks.get(w) or [])}" for w in ("before", "after") if marks.get(w)]
        return "breakpoints set: " + ("; ".join(said) if said else "none")
    if kind == "run_continued":
        answer = data.get("answer")
        said = "" if answer is None else f" with {json.dumps(answer, ensure_ascii=False)}"
        return f"run continued ({data.get('action')}){said}"
    return kind


def clock_time(ms: int | None) -> str:
    """A wall-clock time in the kernel's time zone, to the millisecond (plain text)."""
    if ms is None:
        return "?"
    # the C library's local time: a quarter of the cost of ``datetime.astimezone()`` (a
    # frame table page and a timeline's markers format thousands), the same text
    whole = math.floor(ms)
    local = time.localtime(whole // 1000)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", local)
    return f"{stamp}.{whole % 1000:03d} {local.tm_zone or ''}".strip()


def duration(ms: int | float | None) -> str:
    """``850 ms``, ``12.3 s``, ``4 min 05 s`` style durations (plain text)."""
    if ms is None:
        return "?"
    if ms < 1000:
        return f"{int(ms)} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(int(ms // 1000), 60)
    return f"{minutes} min {seconds:02d} s"


def frame_time(frame: Frame | FrameRow) -> str:
    """When a frame was committed (wall clock, for people; frames are ordered by number)."""
    return f"at {clock_time(frame.created_at_ms)}"


def node_label(node_id: str, iteration: int) -> str:
    """``node`` or ``node[2]`` for loop iterations."""
    return node_id if iteration == 0 else f"{node_id}[{iteration}]"


def ref_label(ref: CheckpointRef, size: int | None = None) -> str:
    """One line of plain text describing a checkpoint ref."""
    size_text = "?" if size is None else f"{size} B"
    return (
        f"{node_label(ref.node_id, ref.iteration)} #{ref.attempt}.{ref.sequence} "
        f"{ref.purpose} · {ref.codec} v{ref.version} · {size_text} · {ref.short_hash}"
    )


@dataclass
class Update:
    """What one poll of the database found (read in a worker thread, applied in the loop)."""

    record: RunRecord
    frames: list[FrameRow] | None = None
    reload: bool = False
    tree: tuple[str, list[ForkEdge]] | None = None
    base: Snapshot | None = None
    """With ``reload``: what the run inherits, if it is a fork by reference."""


@dataclass
class _History:
    """Every frame of the shown run, and their fold."""

    frames: FrameList
    fold: FoldCache


def note_frames(frames: Iterable[FrameRow], seen: dict[str, None], sizes: dict[str, int]) -> None:
    """Add the node ids the frames name to ``seen`` (in first-seen order) and the content
    sizes their checkpoints record to ``sizes``."""
    for f in frames:
        if f.node_id is not None and f.node_id not in seen:
            seen[f.node_id] = None
        if f.kind == "checkpoint" and f.content_hash and isinstance(f.data, dict):
            size = f.data.get("size")
            if isinstance(size, int):
                sizes[f.content_hash] = size


@dataclass
class _Read:
    """A history read behind the newest frame: the rows, their fold, and what they name."""

    rows: list[FrameRow]
    fold: FoldCache
    seen: dict[str, None]
    sizes: dict[str, int]


def _key_at_newest(newest: NewestView) -> RefKey | None:
    """:meth:`DebuggerModel.frame_ref_key` of the newest frame, read from the live tables."""
    frame = newest.last
    if frame.kind == "checkpoint" and frame.node_id is not None:
        key = (frame.node_id, frame.iteration or 0, frame.attempt or 0, frame.sequence or 0)
        if newest.ref(key) is not None:
            return key
    ref = None
    if frame.node_id is not None:
        ref = newest.newest_ref((frame.node_id, frame.iteration or 0))
    if ref is None:
        ref = newest.newest_ref()
    return None if ref is None else (ref.node_id, ref.iteration, ref.attempt, ref.sequence)


# --- the controller ------------------------------------------------------------------------


class DebuggerModel:
    """Selected run, frame, ref and diff pair of one debugger, and its actions.

    Args:
        db: a :class:`smithers_tt.Database`.
        run_id: the run to show first.
        workflow: the workflow definition; needed only by Replay.
        lens: what to call the run's frames, nodes and checkpoints, and what to diff (a
            :class:`~smithers_tt.widgets.FrameLens`; None: smithers_tt's own terms).
    """

    def __init__(self, db: Any, run_id: str, workflow: Any = None, lens: Any = None) -> None:
        self.db = db
        self.workflow = workflow
        self.lens = lens
        self._observers: dict[str, list[Callable[[], None]]] = {}
        self._payloads: OrderedDict[str, AgentCheckpoint] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self.background: asyncio.Task[Any] | None = None
        self.message: Message | None = None
        self.pending: Pending | None = None
        self.last_result: ActionResult | None = None
        self._preload: HistoryRead[_Read] | None = None
        self._load_run(run_id)

    # --- observers ---------------------------------------------------------------------

    def on(self, event: str, callback: Callable[[], None]) -> None:
        """Call ``callback()`` whenever ``event`` happens (see the module docstring)."""
        self._observers.setdefault(event, []).append(callback)

    def _emit(self, *events: str) -> None:
        for event in events:
            for callback in list(self._observers.get(event, ())):
                callback()

    # --- loading -----------------------------------------------------------------------

    def _load_run(self, run_id: str) -> None:
        record = self.db.store.get_run(run_id)  # RunNotFound before anything changes
        self.run_id = record.run_id
        self.record = record
        # What a fork by reference inherits, read before its frames: if it is materialised
        # in between, its new base frames restate that same state (folding them changes none).
        self._base = tt.inherited(self.db.store, run_id)
        self._nodes_seen: dict[str, None] | None = {}
        self._history: _History | None = None
        self._newest: NewestView | None = None
        self._drop_preload()  # another run's
        self._stale = False
        clock = record.clock
        if (
            self._base is None
            and self.lens is None
            and record.status not in LIVE_STATUSES
            and frame_span(self.db.store.engine, run_id, clock) == (clock + 1, 0)
        ):  # nothing inherited, no base frames, none missing, not changing: open on the newest
            rows = load_frames(self.db, run_id, after=clock - 1)
            if rows and rows[-1].frame_no == clock:
                self._newest = NewestView(self.db, run_id, rows[-1], self.load)
                self._nodes_seen = None  # read when asked
        if self._newest is None:
            self._set_history(load_frames(self.db, run_id), self._base)
        self.root, self.tree = tt.fork_tree(self.db.store, run_id)
        self._other_snapshots: OrderedDict[tuple[str, int], Snapshot] = OrderedDict()
        self.frame_no = self.last_frame
        self.ref_key: RefKey | None = None
        self.ref_pinned = False
        self.diff_mode = "frames"
        self.compare_frame: int | None = None
        self.compare_run: str | None = None
        self.compare_run_frame: int | None = None
        self.attempt_pair: tuple[str, int, int, int] | None = None
        self.pending = None
        self._default_ref()
        self.breakpoints = Breakpoints(self)

    def _set_history(
        self, rows: list[FrameRow], base: Snapshot | None, read: _Read | None = None
    ) -> None:
        """Hold ``rows`` (every frame of the run) and fold them from now on (``read``: their
        fold and what they name, made ahead)."""
        _check_dense(self.run_id, rows)
        fold = FoldCache(self.run_id, rows, self.load, base) if read is None else read.fold
        self._history = _History(FrameList(rows), fold)
        self._drop_preload()
        self._newest = None
        self._stale = False
        self._nodes_seen = {}
        if read is None:
            self._note_frames(rows)
        else:
            self._nodes_seen = read.seen
            self._sizes.update(read.sizes)

    def _loaded(self) -> _History:
        """The run's frames and their fold, read now if they were not yet (the newest frame
        was shown without them: :class:`~smithers_tt.widgets._newest.NewestView`)."""
        if self._history is None:
            known = self._last_row()
            ready = None if self._preload is None else self._preload.result()
            rows = ready.rows if ready else load_frames(self.db, self.run_id, upto=self.last_frame)
            self._set_history(rows, self._base, ready)
            # rewritten since the newest frame was read (rewound elsewhere): the next refresh
            # reads it all again, as for any history rewritten under the debugger
            self._stale = rows[-1:] != known
        assert self._history is not None
        return self._history

    def read_history_behind(self) -> None:
        """Start reading the shown run's history and folding it to the frame before the
        newest in a thread (:mod:`~smithers_tt.widgets._preload`), if it was opened without it
        and has ``PRELOAD_AT`` frames or more: the first step back then finds them. Call it
        once the views are drawn (the thread would slow their drawing down)."""
        if self._newest is None or self._preload is not None:
            return
        upto = self._newest.frame_no
        if upto + 1 < PRELOAD_AT:
            return
        db, run_id, base, load = self.db, self.run_id, self._base, self.load

        def read(cancelled: Callable[[], bool]) -> _Read | None:
            rows = load_frames(db, run_id, upto=upto)
            _check_dense(run_id, rows)
            fold = FoldCache(run_id, rows, load, base)
            for n in [*range(PRELOAD_STEP, upto - 1, PRELOAD_STEP), max(upto - 1, 0)]:
                if cancelled():
                    return None
                with paused_gc():
                    fold.at(n)
            fold.sorted_ref_keys(fold.at(max(upto - 1, 0)))  # the inspector's first page
            seen: dict[str, None] = {}
            sizes: dict[str, int] = {}
            note_frames(rows, seen, sizes)
            return _Read(rows, fold, seen, sizes)

        self._preload = HistoryRead(read)

    def history_ready(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for the history read behind the newest frame
        (:meth:`read_history_behind`); whether the first step back will find it, or the
        history is read already."""
        if self._history is not None:
            return True
        preload = self._preload
        return preload is not None and preload.wait(timeout) and preload.failed is None

    def _drop_preload(self) -> None:
        if self._preload is not None:
            self._preload.cancel()  # its thread stops at its next step
            self._preload = None

    @property
    def history_loaded(self) -> bool:
        """Whether the run's frames are read (they are, once anything but its newest frame
        was asked for)."""
        return self._history is not None

    @property
    def frames(self) -> FrameList:
        """Every frame of the shown run, base frames (below 0) included."""
        return self._loaded().frames

    @property
    def _fold(self) -> FoldCache:
        return self._loaded().fold

    def _note_frames(self, frames: Iterable[FrameRow]) -> None:
        """Remember content sizes and node ids the frames mention."""
        note_frames(frames, self._seen(), self._sizes)

    @property
    def first_frame(self) -> int:
        """The first frame a person can select (0)."""
        return 0

    @property
    def last_frame(self) -> int:
        """The newest frame loaded."""
        newest = self._newest
        if newest is not None:
            return newest.frame_no
        rows = self._loaded().frames.rows
        return rows[-1].frame_no if rows else 0

    def _last_row(self) -> list[FrameRow]:
        """The newest frame known, as a list of at most one row."""
        newest = self._newest  # once: a live poll reads this from a worker thread
        if newest is not None:
            return [newest.last]
        return self._loaded().frames.rows[-1:]

    @property
    def visible_frames(self) -> FrameList:
        """Frames 0 and later (base frames of a fork restate its parent and are not shown)."""
        return FrameList(self.visible_rows)

    @property
    def visible_rows(self) -> list[FrameRow]:
        """The rows of :attr:`visible_frames` (what walks the whole history reads)."""
        return self.frames.rows[self._index(0) :]

    def _index(self, frame_no: int) -> int:
        rows = self.frames.rows
        return frame_no - rows[0].frame_no if rows else 0

    def frame(self, frame_no: int | None = None) -> Frame:
        """The frame ``frame_no`` (default: the selected one)."""
        n = self.frame_no if frame_no is None else frame_no
        if self._newest is not None and n == self._newest.frame_no:
            return self._newest.last.frame()
        return self.frames[self._index(n)]

    @property
    def live(self) -> bool:
        """Whether the shown run may still change (running or queued, or replaying here)."""
        busy = self.background is not None and not self.background.done()
        return busy or self.record.status in LIVE_STATUSES

    def edge(self, run_id: str) -> ForkEdge | None:
        """The fork-tree entry of a run."""
        return next((e for e in self.tree if e.run_id == run_id), None)

    def _seen(self) -> dict[str, None]:
        if self._nodes_seen is None:
            assert self._newest is not None
            self._nodes_seen = dict.fromkeys(self._newest.node_ids())
        return self._nodes_seen

    @property
    def node_ids(self) -> list[str]:
        """Task ids of the run: from its graph, then any other node seen in its frames."""
        names = list(self.record.graph or {})
        return names + [n for n in self._seen() if n not in names]

    # --- snapshots and content ----------------------------------------------------------

    @property
    def inherited(self) -> Snapshot | None:
        """What the shown run reads from its parent (a fork by reference), or None."""
        return self._base

    def snapshot_at(self, frame_no: int | None = None) -> Snapshot:
        """The snapshot of the shown run at a frame (default: the selected one), folded from
        the nearest one kept (:class:`~smithers_tt.widgets._scrub.FoldCache`)."""
        n = self.frame_no if frame_no is None else frame_no
        if not 0 <= n <= self.last_frame:
            raise InvalidArgument(f"run {self.run_id} has frames 0 to {self.last_frame}, not {n}")
        return self._fold.at(n)

    @property
    def snapshot(self) -> Snapshot:
        """The snapshot at the selected frame."""
        return self.snapshot_at()

    def _newest_refs(self, snap: Snapshot) -> dict[tuple[str, int], CheckpointRef]:
        """Each node's newest ref in a snapshot of the shown run."""
        return self._fold.newest(snap)

    def checkpointed_nodes(self) -> list[str]:
        """Ids of the nodes with a checkpoint visible at the selected frame, sorted."""
        if self._newest is not None:
            return self._newest.checkpointed()
        return sorted({node_id for node_id, _ in self._newest_refs(self.snapshot)})

    def status_at(self) -> str:
        """The run's status at the selected frame."""
        if self._newest is not None:
            return self._newest.status
        return self.snapshot.status

    def node_table(self, limit: int) -> NodeTable:
        """The first ``limit`` rows of the nodes table at the selected frame."""
        if self._newest is not None:
            return self._newest.node_table(limit)
        snap = self.snapshot
        return node_table(snap, limit, self._fold.node_keys(snap))

    def other_snapshot(self, run_id: str, frame_no: int) -> Snapshot:
        """A snapshot of another run (for comparisons), cached."""
        if run_id == self.run_id:
            return self.snapshot_at(frame_no)
        key = (run_id, frame_no)
        snap = self._other_snapshots.get(key)
        if snap is None:
            snap = self.db.snapshot(run_id, frame_no)
            snap.loader = self.load
            self._other_snapshots[key] = snap
            while len(self._other_snapshots) > 8:
                self._other_snapshots.popitem(last=False)
        return snap

    def load(self, ref: CheckpointRef) -> AgentCheckpoint:
        """The verified checkpoint of a ref (cached by content hash: content is immutable)."""
        found = self._payloads.get(ref.content_hash)
        if found is not None:
            self._payloads.move_to_end(ref.content_hash)
            return found
        checkpoint = self.db.store.load(ref)
        self._sizes.setdefault(ref.content_hash, len(canonical_bytes(checkpoint.to_json())))
        self._payloads[ref.content_hash] = checkpoint
        while len(self._payloads) > _PAYLOAD_CACHE:
            self._payloads.popitem(last=False)
        return checkpoint

    def sizes(self, refs: Iterable[CheckpointRef]) -> dict[str, int]:
        """Stored sizes (canonical bytes) of the refs' contents, read in one query if needed."""
        wanted = {r.content_hash for r in refs}
        missing = [h for h in wanted if h not in self._sizes]
        if missing:
            self._sizes.update(content_sizes(self.db.engine, missing))
        return {h: self._sizes[h] for h in wanted if h in self._sizes}

    # --- names (the lens's, else smithers_tt's) ----------------------------------------------

    def frame_title(self, frame: Frame | None = None) -> str:
        """One line of plain text saying what a frame (default: the selected one) is."""
        frame = self.frame() if frame is None else frame
        return self._named("frame_title", frame) or describe_frame(frame)

    def node_label(self, node_id: str, iteration: int) -> str:
        """What the debugger calls a node."""
        return self._named("node_label", node_id, iteration) or node_label(node_id, iteration)

    def ref_label(self, ref: CheckpointRef, size: int | None = None) -> str:
        """One line of plain text describing a checkpoint ref."""
        return self._named("ref_label", ref) or ref_label(ref, size)

    def _named(self, method: str, *args: Any) -> Any:
        """What the lens says, or None (a lens that cannot read what it names, say a corrupt
        checkpoint, leaves smithers_tt's own name; the inspector says why)."""
        try:
            return ask(self.lens, method, *args)
        except SmithersError as error:
            log.warning("the debugger's lens could not name this: %s", error.message)
            return None

    def view(self, ref: CheckpointRef) -> Any:
        """What the inspector shows of a checkpoint: the lens's view, else its payload."""
        shown = ask(self.lens, "view", ref)
        return self.load(ref).payload if shown is None else shown

    def outside_pause(self) -> dict[str, Any] | None:
        """A pause the lens's framework knows (a LangGraph interrupt), or None."""
        found = self._named("pause", self.run_id)
        return found if isinstance(found, dict) else None

    def related(self) -> list[tuple[str, str]]:
        """Other runs the lens offers to open from this one, as ``(label, run_id)``."""
        return list(self._named("related", self.run_id) or [])

    # --- selection -----------------------------------------------------------------------

    def select_frame(self, frame_no: int) -> None:
        """Select a frame (clamped to the run's frames); every view follows."""
        n = max(self.first_frame, min(int(frame_no), self.last_frame))
        if n == self.frame_no:
            return
        self._loaded()  # any frame but the newest is folded from the history
        self.frame_no = n
        self._default_ref()
        self._emit("frame", "ref")

    def step(self, delta: int) -> None:
        """Select the frame ``delta`` frames away."""
        self.select_frame(self.frame_no + delta)

    def jump(
        self, direction: int, kinds: Sequence[str] = ("attempt_started", "attempt_finished")
    ) -> None:
        """Select the next (``direction`` 1) or previous (-1) frame of one of ``kinds``."""
        frames = self.visible_rows
        index = self.frame_no  # frame numbers of visible frames start at 0
        rng = range(index + 1, len(frames)) if direction > 0 else range(index - 1, -1, -1)
        for i in rng:
            if frames[i].kind in kinds:
                self.select_frame(frames[i].frame_no)
                return

    def frame_ref_key(self, frame_no: int | None = None) -> RefKey | None:
        """The checkpoint a frame is about: the one it published (a checkpoint frame), else
        the newest of its node, else the newest visible at all (None when none is)."""
        newest = self._newest
        if newest is not None and frame_no in (None, newest.frame_no):
            return _key_at_newest(newest)
        frame = self.frame(frame_no)
        snap = self.snapshot_at(frame.frame_no)
        if frame.kind == "checkpoint" and frame.node_id is not None:
            key = (frame.node_id, frame.iteration or 0, frame.attempt or 0, frame.sequence or 0)
            if key in snap.refs:
                return key
        if frame.node_id is not None:
            ref = self._newest_refs(snap).get((frame.node_id, frame.iteration or 0))
            if ref is not None:
                return (ref.node_id, ref.iteration, ref.attempt, ref.sequence)
        if snap.refs:
            # refs are in publication order: of two in the same millisecond, the later one
            newest = max(reversed(snap.refs.values()), key=lambda r: r.created_at_ms)
            return (newest.node_id, newest.iteration, newest.attempt, newest.sequence)
        return None

    def _default_ref(self) -> None:
        """Follow the selected frame: its own checkpoint, unless the person pinned one."""
        if self.ref_pinned and self.ref_key is not None:
            return  # a pinned ref stays selected (and shows as hidden where it is not visible)
        self.ref_pinned = False
        self.ref_key = self.frame_ref_key()

    def select_ref(self, key: RefKey | None, *, pin: bool | None = None) -> None:
        """Select a checkpoint ref of the selected frame (its payload shows in the inspector).

        The choice lasts until another frame is selected, unless it is pinned (``pin=True``,
        or :meth:`pin_ref`): a pinned ref stays selected on every frame until unpinned.
        """
        if key is not None and self._visible(tuple(key)) is None:
            raise InvalidArgument(f"frame {self.frame_no} shows no checkpoint ref {key}")
        key = None if key is None else (str(key[0]), int(key[1]), int(key[2]), int(key[3]))
        pinned = self.ref_pinned if pin is None else bool(pin and key is not None)
        if key != self.ref_key or pinned != self.ref_pinned:
            self.ref_key, self.ref_pinned = key, pinned
            self._emit("ref")

    def pin_ref(self, pinned: bool = True) -> None:
        """Pin (or unpin) the selected ref; unpinning shows the selected frame's own ref."""
        pinned = bool(pinned and self.ref_key is not None)
        if pinned == self.ref_pinned:
            return
        self.ref_pinned = pinned
        if not pinned:
            self.ref_key = self.frame_ref_key()
        self._emit("ref")

    def _visible(self, key: tuple[Any, ...]) -> CheckpointRef | None:
        """The ref of ``key`` visible at the selected frame, or None."""
        if self._newest is not None and len(key) == 4:
            return self._newest.ref((str(key[0]), int(key[1]), int(key[2]), int(key[3])))
        return self.snapshot.refs.get(key)  # type: ignore[call-overload]

    @property
    def ref(self) -> CheckpointRef | None:
        """The selected checkpoint ref (None when none is, or a pinned one is not visible)."""
        return None if self.ref_key is None else self._visible(self.ref_key)

    def ref_page(self, query: str = "", page: int | None = None, size: int = REF_PAGE) -> RefPage:
        """A page of the refs visible at the selected frame, ordered by key (so by sequence
        within an attempt), those whose label contains ``query`` (any case) only.

        ``page`` counts from 0 and is clamped; None is the page holding the selected ref
        (else the last page: the newest sequences).
        """
        needle = query.strip().lower()
        if self._newest is not None and not needle:
            return self._newest_ref_page(page, size)
        snap = self.snapshot
        keys = self._fold.sorted_ref_keys(snap)
        if needle:
            keys = [k for k in keys if needle in self.ref_label(snap.refs[k]).lower()]
        pages = max(1, -(-len(keys) // size))
        if page is None:
            at = None if self.ref_key is None else bisect.bisect_left(keys, self.ref_key)
            if at is not None and at < len(keys) and keys[at] == self.ref_key:
                page = at // size
            else:
                page = 0 if needle else pages - 1
        page = max(0, min(int(page), pages - 1))
        chosen = keys[page * size : (page + 1) * size]
        refs = [snap.refs[k] for k in chosen]
        return RefPage(chosen, len(snap.refs), len(keys), page, pages, query, refs)

    def _newest_ref_page(self, page: int | None, size: int) -> RefPage:
        """:meth:`ref_page` at the newest frame, without a query, read a page at a time."""
        newest = self._newest
        assert newest is not None
        total = newest.ref_count()
        pages = max(1, -(-total // size))
        if page is None:
            at = None if self.ref_key is None else newest.rank(self.ref_key)
            page = pages - 1 if at is None else at // size
        page = max(0, min(int(page), pages - 1))
        refs = newest.page(page, size)
        keys = [(r.node_id, r.iteration, r.attempt, r.sequence) for r in refs]
        return RefPage(keys, total, total, page, pages, "", refs)

    @property
    def ref_hidden(self) -> bool:
        """Whether a pinned ref is not visible at the selected frame (published later, or
        removed)."""
        return self.ref_pinned and self.ref_key is not None and self._visible(self.ref_key) is None

    def switch_run(self, run_id: str) -> None:
        """Show another run (from the fork tree); nothing changes if it does not exist."""
        if run_id == self.run_id:
            return
        self._load_run(run_id)
        self.message = None  # it was about the run shown before
        self._emit("run", "tree", "frame", "ref", "diff", "pending", "message")
        self.read_history_behind()

    def drop_caches(self) -> None:
        """Let go of the snapshots kept for scrubbing and of the fold they are rebuilt from
        (tens of MB for a 100,000-frame run); it is folded again when needed."""
        if self._history is not None:
            self._history.fold.clear()
        self._drop_preload()
        self._other_snapshots.clear()

    # --- live refresh ------------------------------------------------------------------

    def fetch_update(self) -> Update:
        """Read what changed since the last load (safe to call from a worker thread)."""
        record = self.db.store.get_run(self.run_id)
        known = self.last_frame
        if self._stale:
            return self._reload(record, tt.fork_tree(self.db.store, self.run_id))
        if (record.clock, record.status, record.owner_epoch, record.inherits) == (
            known,
            self.record.status,
            self.record.owner_epoch,
            self.record.inherits,
        ):  # a rewind (and a resume after it) gives the run a new epoch
            return Update(record)
        tree = tt.fork_tree(self.db.store, self.run_id)
        if record.clock < known or record.inherits != self.record.inherits:  # materialised
            return self._reload(record, tree)
        new = load_frames(self.db, self.run_id, after=known - 1)  # the newest known one again
        if new[:1] != self._last_row():  # history was rewritten under us (rewound, resumed)
            return self._reload(record, tree)
        return Update(record, new[1:], tree=tree)

    def _reload(self, record: RunRecord, tree: Any) -> Update:
        base = tt.inherited(self.db.store, self.run_id)  # before the frames: see _load_run
        return Update(record, load_frames(self.db, self.run_id), reload=True, tree=tree, base=base)

    def apply_update(self, update: Update) -> bool:
        """Apply a fetched update (in the thread that owns the widgets); True if it changed
        anything. A selection at the newest frame follows new frames."""
        if update.record.run_id != self.run_id:
            return False  # the person switched runs meanwhile
        status_changed = update.record.status != self.record.status
        self.record = update.record
        events: list[str] = []
        if update.tree is not None and update.tree[1] != self.tree:
            self.root, self.tree = update.tree
            events.append("tree")
        if update.reload and update.frames is not None:
            following = self.frame_no == self.last_frame
            self._base = update.base
            self._set_history(update.frames, update.base)
            self.frame_no = self.last_frame if following else min(self.frame_no, self.last_frame)
            self._default_ref()
            events = ["run", "tree", "frame", "ref", "diff"]
        elif update.frames:
            following = self.frame_no == self.last_frame
            self._loaded().frames.rows.extend(update.frames)  # the run changes: fold it
            self._note_frames(update.frames)
            events.append("frames")
            if following:
                self.frame_no = self.last_frame
                self._default_ref()
                events += ["frame", "ref"]
        elif status_changed:
            events.append("frames")
        if update.reload or any(f.kind in PAUSE_KINDS for f in update.frames or ()):
            self.breakpoints.load()  # another process (or a continue) changed them
        if events:
            self._emit(*events)
        return bool(events)

    def refresh(self) -> bool:
        """Read the database again now (fetch and apply in this thread)."""
        return self.apply_update(self.fetch_update())

    # --- diff --------------------------------------------------------------------------

    def set_diff(self, mode: str | None = None, **settings: Any) -> None:
        """Change what the diff compares; settings left out keep their value.

        ``mode`` is ``frames`` (another frame of this run, by default the previous one, with
        the selected frame), ``runs`` (another run of the fork tree at a frame, with the
        selected frame) or ``attempts`` (the newest checkpoints of two attempts of a node).
        Settings: ``compare_frame`` (None: the previous frame), ``compare_run`` and
        ``compare_run_frame`` (None: the fork point for the parent, else its newest frame),
        ``attempt_pair`` ``(node_id, iteration, attempt_a, attempt_b)``.
        """
        if mode is not None and mode not in ("frames", "runs", "attempts"):
            raise InvalidArgument(f"diff mode is frames, runs or attempts, not {mode!r}")
        known = ("compare_frame", "compare_run", "compare_run_frame", "attempt_pair")
        unknown = sorted(set(settings) - set(known))
        if unknown:  # refused before anything changes
            raise InvalidArgument(f"unknown diff settings {unknown}; use {list(known)}")
        if mode is not None:
            self.diff_mode = mode
        for name, value in settings.items():
            setattr(self, name, value)
        self._emit("diff")

    def default_compare_run(self) -> tuple[str, int] | None:
        """The run compared in ``runs`` mode when none was chosen: the parent at the fork
        frame, else the first child at its newest frame."""
        edge = self.edge(self.run_id)
        if edge is not None and edge.parent_run_id and self.edge(edge.parent_run_id):
            return edge.parent_run_id, int(edge.parent_frame_no or 0)
        for child in self.tree:
            if child.parent_run_id == self.run_id:
                return child.run_id, self._clock_of(child.run_id)
        return None

    def default_frame_of(self, run_id: str) -> int:
        """The frame of another run compared by default: the fork point when it is this
        run's parent, else its newest frame."""
        edge = self.edge(self.run_id)
        if edge is not None and edge.parent_run_id == run_id and edge.parent_frame_no is not None:
            return int(edge.parent_frame_no)
        return self._clock_of(run_id)

    def fork_gap(self, run_id: str) -> tuple[int, int] | None:
        """``(fork frame, parent's newest frame)`` when ``run_id`` was forked at a frame its
        parent no longer has (the parent was rewound past the fork point), else None."""
        edge = self.edge(run_id)
        if edge is None or edge.parent_run_id is None or edge.parent_frame_no is None:
            return None
        try:
            clock = self._clock_of(edge.parent_run_id)
        except SmithersError:  # the parent is gone: the child's own history still stands
            return None
        return (int(edge.parent_frame_no), clock) if clock < edge.parent_frame_no else None

    def _clock_of(self, run_id: str) -> int:
        return self.db.store.get_run(run_id).clock

    def attempts_with_history(self, least: int = 1) -> list[tuple[str, int, list[int]]]:
        """Nodes (and iterations) with at least ``least`` attempts at the selected frame, and
        their attempt numbers."""
        rows = self._fold.attempts_by_node(self.snapshot)
        return [row for row in rows if len(row[2]) >= least]

    def default_attempt_pair(self) -> tuple[str, int, int, int] | None:
        """The last two attempts of the selected frame's node, else of any node with two."""
        nodes = self.attempts_with_history(2)
        frame = self.frame()
        preferred = [n for n in nodes if n[0] == frame.node_id and len(n[2]) >= 2]
        candidates = preferred or [n for n in nodes if len(n[2]) >= 2]
        if not candidates:
            return None
        node_id, iteration, attempts = candidates[0]
        return node_id, iteration, attempts[-2], attempts[-1]

    def diff(self) -> DiffResult:
        """The differences the diff settings ask for (computed here, in Python)."""
        newest = self._newest
        if (
            newest is not None
            and self.diff_mode == "frames"
            and self.compare_frame in (None, newest.frame_no - 1)
            and self.lens is None
        ):
            change = newest.last_change()
            if change is not None:
                return self._frames_diff(*change)
        if self.diff_mode == "attempts":
            return self._attempt_diff()
        if self.diff_mode == "runs":
            other = (
                (self.compare_run, self.compare_run_frame)
                if self.compare_run is not None
                else self.default_compare_run()
            )
            if other is None:
                return DiffResult("", "", note="this run has no parent or forks to compare with")
            run_id, frame_no = other
            if frame_no is None:
                frame_no = self.default_frame_of(run_id)
            a = self.other_snapshot(run_id, int(frame_no))
        else:
            a_no = self.compare_frame
            if a_no is None:
                a_no = max(self.frame_no - 1, 0)
            a_no = max(0, min(a_no, self.last_frame))
            a = self.snapshot_at(a_no)
        b = self.snapshot
        sections = ask(self.lens, "diff", a, b)
        if sections is not None:
            result = DiffResult("", "", sections=list(sections))
            return self._labelled(result, a, b)
        touched = None
        if self.diff_mode == "frames":
            touched = self._fold.touched(min(a.frame_no, b.frame_no), max(a.frame_no, b.frame_no))
        return self._frames_diff(a, b, touched, self._newest_refs)

    def _frames_diff(
        self,
        a: Snapshot,
        b: Snapshot,
        touched: Touched | None,
        newest: Callable[[Snapshot], dict[tuple[str, int], CheckpointRef]] = newest_refs,
    ) -> DiffResult:
        """The diff of two snapshots, of only what ``touched`` names when given."""
        ta, tb = trimmed(a, b, newest(a), newest(b), touched)
        result = _sections(tt.diff(ta, tb, load=self.load))
        result.conversations = self._conversations(ta, tb)
        return self._labelled(result, a, b)

    def _labelled(self, result: DiffResult, a: Snapshot, b: Snapshot) -> DiffResult:
        result.a = f"run {a.run_id} frame {a.frame_no}"
        result.b = f"run {b.run_id} frame {b.frame_no}"
        if self.diff_mode == "frames" and a.frame_no == b.frame_no:
            result.note = "both sides are the same frame; pick another frame to compare with"
        return result

    def _conversations(
        self, a: Snapshot, b: Snapshot
    ) -> list[tuple[str, list[tuple[str, ChatMessage]]]]:
        """Transcript diffs of the nodes whose newest checkpoints differ (either side a chat)."""
        na, nb = newest_refs(a), newest_refs(b)
        out = []
        for key in sorted(set(na) | set(nb)):
            sides = [self.load(s[key]).payload if key in s else None for s in (na, nb)]
            old, new = (find_transcript(p) for p in sides)
            if old is None and new is None:
                continue
            out.append((node_label(*key), transcript_diff(old, new)))
        return out

    def _attempt_diff(self) -> DiffResult:
        pair = self.attempt_pair or self.default_attempt_pair()
        if pair is None:
            return DiffResult("", "", note="no node has two attempts at this frame")
        node_id, iteration, first, second = pair
        snap = self.snapshot
        label = node_label(node_id, iteration)
        result = DiffResult(f"{label} attempt #{first}", f"{label} attempt #{second}")
        views = [snap.attempts.get((node_id, iteration, n)) for n in (first, second)]
        if views[0] is None or views[1] is None:
            result.note = f"{label} has no attempts #{first} and #{second} at frame {snap.frame_no}"
            return result
        a, b = views
        changes = [
            Change("change", f"${'.' + name}", getattr(a, name), getattr(b, name))
            for name in ("state", "error", "error_code", "resumed_from")
            if getattr(a, name) != getattr(b, name)
        ]
        result.sections.append(("attempt", changes))
        payloads = []
        for n in (first, second):
            keys = [k for k in snap.refs if k[:3] == (node_id, iteration, n)]
            payloads.append(self.load(snap.refs[max(keys)]).to_json() if keys else None)
        result.sections.append((f"checkpoint {label}", tt.json_diff(payloads[0], payloads[1])))
        return result

    # --- actions -----------------------------------------------------------------------

    def _say(self, kind: str, text: str) -> None:
        self.message = Message(kind, text)
        self._emit("message")

    def request_rewind(self, reason: str = "") -> Pending | None:
        """Ask to rewind the run to the selected frame; nothing changes until :meth:`confirm`.
        ``reason`` (why) is recorded in the audit with the rewind."""
        n, last = self.frame_no, self.record.clock
        if n >= last:
            self._say("info", f"run {self.run_id} is already at frame {last}: nothing to rewind")
            return None
        options = {"reason": reason.strip()} if reason.strip() else {}
        summary = (
            f"Rewind run {self.run_id} to frame {n}: frames {n + 1} to {last} are deleted "
            "in place (Undo rewind brings them back)"
            + (f"; reason: {options['reason']}." if options else ".")
        )
        return self._set_pending(Pending("rewind", self.run_id, n, summary, options))

    def undo_refusal(self) -> str | None:
        """Why Undo rewind cannot act on the run now, or None when it can."""
        return tt.undo_refusal(self.db.store, self.run_id)

    def request_undo_rewind(self, reason: str = "") -> Pending | None:
        """Ask to undo the run's newest rewind; nothing changes until :meth:`confirm`."""
        options = {"reason": reason.strip()} if reason.strip() else {}
        summary = (
            f"Undo the newest rewind of run {self.run_id}: its removed frames come back and "
            "the run is as it was before it"
            + (f"; reason: {options['reason']}." if options else ".")
        )
        return self._set_pending(
            Pending("undo_rewind", self.run_id, self.frame_no, summary, options)
        )

    def fork_options(
        self,
        *,
        reset: Sequence[str] = (),
        input_text: str = "",
        edit_node: str | None = None,
        edit_text: str | None = None,
        reason: str = "",
    ) -> dict[str, Any]:
        """Validate the fork form into ``db.fork`` options before anything is written.

        Raises:
            InvalidArgument: input or payload is not JSON, or a node is unknown.
            CheckpointInvalid: the input or edited payload is not strict JSON (the error names
                the path), or the edited envelope is not a valid ``AgentCheckpoint``.
        """
        options: dict[str, Any] = {"reset": [str(r) for r in reset]}
        if reason.strip():
            options["reason"] = reason.strip()  # kept in the audit
        known = set(self.node_ids)
        unknown = sorted(set(options["reset"]) - known)
        if unknown:
            raise InvalidArgument(f"run {self.run_id} has no node(s) {unknown} to reset")
        if input_text.strip():
            value = read_json(input_text, "the input override")
            canonical_bytes(value)
            options["input"] = value
        if edit_node:
            checkpoint = self._edited(edit_node, edit_text or "")
            current = self.load(self._edit_ref(edit_node))
            if checkpoint.encode().content_hash != current.encode().content_hash:
                options["checkpoints"] = {edit_node: checkpoint}
        return options

    def _edit_ref(self, node_id: str) -> CheckpointRef:
        ref = self.newest_ref(node_id)
        if ref is None:
            raise InvalidArgument(
                f"{node_id!r} has no checkpoint at frame {self.frame_no}; nothing to edit"
            )
        return ref

    def declared_formats(self, node_id: str) -> list[tuple[str, tuple[int, ...], bool]] | None:
        """What the node's agent declares it publishes: (codec, versions, resumable), where
        ``resumable`` says it also declares consuming that format in ``resume`` mode (a fork
        resumes the node from the edited checkpoint). None without the workflow."""
        task = None if self.workflow is None else self.workflow.tasks.get(node_id)
        if task is None:
            return None
        agent = task.agent
        out = []
        for fmt in agent.formats:
            resumable = any(
                cap.codec == fmt.codec
                and "resume" in cap.modes
                and set(fmt.versions) & set(cap.versions)
                for cap in agent.capabilities
            )
            out.append((fmt.codec, tuple(fmt.versions), resumable))
        return out

    def _edited(self, node_id: str, text: str) -> AgentCheckpoint:
        """The edited checkpoint of a node, validated: JSON, strict JSON (the error names the
        path), and the format the agent declares (when the workflow is known)."""
        ref = self._edit_ref(node_id)
        payload = read_json(text, f"the edited checkpoint of {node_id!r}")
        checkpoint = AgentCheckpoint(ref.codec, ref.version, payload)  # validates
        declared = self.declared_formats(node_id)
        if declared is not None:
            match = [d for d in declared if d[0] == ref.codec and ref.version in d[1]]
            if not match:
                names = ", ".join(f"{c} v{list(v)}" for c, v, _ in declared) or "none"
                raise InvalidArgument(
                    f"agent of {node_id!r} does not declare {ref.codec} v{ref.version} "
                    f"(it declares: {names}); it could not resume from this checkpoint"
                )
            if not match[0][2]:
                raise InvalidArgument(
                    f"agent of {node_id!r} declares no resume capability for {ref.codec} "
                    f"v{ref.version}; a fork could not hand it this checkpoint"
                )
        return checkpoint

    def preview_edit(self, node_id: str, text: str) -> EditPreview:
        """Validate an edited checkpoint without writing anything, and say what it changes."""
        ref = self.newest_ref(node_id)
        if ref is None:
            return EditPreview(node_id, None, error=f"{node_id!r} has no checkpoint here")
        before = self.load(ref).payload
        declared = self.declared_formats(node_id)
        if declared is None:
            note = (
                f"{ref.codec} v{ref.version}, as stored (open the debugger with workflow= to "
                "check it against the agent's declared formats)"
            )
        else:
            note = f"{ref.codec} v{ref.version}, checked against the agent's declared formats"
        try:
            checkpoint = self._edited(node_id, text)
        except SmithersError as error:
            return EditPreview(node_id, before, error=error.message, format_note=note)
        changes = tt.json_diff(before, checkpoint.payload, "$.payload")
        return EditPreview(node_id, before, checkpoint.payload, None, changes, note, checkpoint)

    def newest_ref(self, node_id: str) -> CheckpointRef | None:
        """The newest checkpoint of a node (its newest iteration) at the selected frame."""
        if self._newest is not None:
            top = self._newest.top_iteration(node_id)
            return None if top is None else self._newest.newest_ref((node_id, top))
        snap = self.snapshot
        keys = [k for k in snap.refs if k[0] == node_id]
        if not keys:
            return None
        iteration = max(k[1] for k in keys)
        return snap.newest_ref(node_id, iteration)

    def checkpoint_text(self, node_id: str) -> str:
        """The payload of a node's newest checkpoint as indented JSON, for the editor."""
        ref = self.newest_ref(node_id)
        if ref is None:
            return ""
        return json.dumps(self.load(ref).payload, indent=2, ensure_ascii=False)

    def _describe_options(self, options: dict[str, Any]) -> str:
        parts = []
        if options.get("reset"):
            parts.append(f"reset {', '.join(options['reset'])}")
        if options.get("checkpoints"):
            parts.append(f"edited checkpoint of {', '.join(options['checkpoints'])}")
        if "input" in options:
            text = json.dumps(options["input"], ensure_ascii=False)
            parts.append(f"input {text[:120]}{'…' if len(text) > 120 else ''}")
        if options.get("reason"):
            parts.append(f"reason: {options['reason']}")
        return "; ".join(parts)

    def request_fork(self, **form: Any) -> Pending | None:
        """Validate the fork form and ask for confirmation (see :meth:`fork_options`)."""
        try:
            options = self.fork_options(**form)
        except SmithersError as error:
            self._refuse(f"Cannot fork: {error.message}")
            return None
        summary = (
            f"Fork run {self.run_id} at frame {self.frame_no} into a new run: "
            f"{self._describe_options(options) or NO_CHANGES}."
        )
        return self._set_pending(Pending("fork", self.run_id, self.frame_no, summary, options))

    def request_replay(self, **form: Any) -> Pending | None:
        """Validate the form and ask to replay (fork, then execute) from the selected frame."""
        if self.workflow is None:
            self._refuse(REPLAY_NEEDS_WORKFLOW)
            return None
        try:
            options = self.fork_options(**form)
        except SmithersError as error:
            self._refuse(f"Cannot replay: {error.message}")
            return None
        summary = (
            f"Replay run {self.run_id} from frame {self.frame_no}: fork it with "
            f"{self._describe_options(options) or 'no changes'}, then execute the new run "
            f"with workflow {self.workflow.name!r} (agents are called again)."
        )
        return self._set_pending(Pending("replay", self.run_id, self.frame_no, summary, options))

    def _refuse(self, text: str) -> None:
        """Say why a request was refused; an action asked for before is no longer pending (a
        Confirm now must not carry out an earlier, other request)."""
        self.pending = None
        self._emit("pending")
        self._say("error", text)

    def _set_pending(self, pending: Pending) -> Pending:
        self.pending = pending
        self.message = None
        self._emit("pending", "message")
        return pending

    def cancel(self) -> None:
        """Drop the pending action; nothing was changed."""
        if self.pending is not None:
            action = self.pending.action
            self.pending = None
            self._emit("pending")
            self._say(
                "info", f"{action.replace('_', ' ').capitalize()} cancelled; nothing was changed."
            )

    def confirm(self) -> ActionResult | None:
        """Carry out the pending action and report what it did (or why it could not)."""
        pending = self.pending
        if pending is None:
            return None
        self.pending = None
        self._emit("pending")
        try:
            if pending.run_id != self.run_id:
                raise InvalidArgument("the debugger shows another run now; ask again")
            result = getattr(self, f"_do_{pending.action}")(pending)
        except ForkPointRewound as error:  # ask again, offering to rewind past the forks
            self._set_pending(
                replace(
                    pending,
                    summary=f"{error.message}. Confirm to rewind anyway: the forked runs stay "
                    "as they are, and the fork tree marks their fork point as rewound away.",
                    options={**pending.options, "force": True},
                )
            )
            result = ActionResult("rewind", False, f"Rewind not done yet: {error.message}")
        except SmithersError as error:
            result = ActionResult(
                pending.action,
                False,
                f"{pending.action.replace('_', ' ').capitalize()} failed: {error.message}",
            )
        except Exception as error:  # report, never a traceback in the widget
            log.exception("%s failed", pending.action)
            result = ActionResult(
                pending.action,
                False,
                f"{pending.action.replace('_', ' ').capitalize()} failed unexpectedly: "
                f"{type(error).__name__}: {error}",
            )
        self.last_result = result
        self._say("success" if result.ok else "error", result.text)
        return result

    def _do_rewind(self, pending: Pending) -> ActionResult:
        before = self.record.clock
        self.db.rewind(pending.run_id, pending.frame_no, confirm=True, **pending.options)
        self._load_run(pending.run_id)
        self.frame_no = min(pending.frame_no, self.last_frame)
        self._default_ref()
        self._emit("run", "tree", "frame", "ref", "diff")
        return ActionResult(
            "rewind",
            True,
            f"Rewound run {pending.run_id} to frame {pending.frame_no}; "
            f"{before - pending.frame_no} later frame(s) removed.",
            pending.run_id,
            pending.frame_no,
        )

    def _do_undo_rewind(self, pending: Pending) -> ActionResult:
        snap = self.db.undo_rewind(pending.run_id, **pending.options)
        self._load_run(pending.run_id)
        self.frame_no = min(snap.frame_no, self.last_frame)
        self._default_ref()
        self._emit("run", "tree", "frame", "ref", "diff")
        return ActionResult(
            "undo_rewind",
            True,
            f"Undid the rewind of run {pending.run_id}: it is back at frame {snap.frame_no}.",
            pending.run_id,
            snap.frame_no,
        )

    def _do_fork(self, pending: Pending) -> ActionResult:
        child = self.db.fork(pending.run_id, pending.frame_no, **pending.options)
        self.breakpoints.give_to(child.id)
        self.root, self.tree = tt.fork_tree(self.db.store, self.run_id)
        self._emit("tree")
        return ActionResult(
            "fork",
            True,
            f"Forked run {pending.run_id} at frame {pending.frame_no}: new run {child.id} "
            f"({child.status}, frame 0). Open it in the fork tree; run it with Replay or "
            f"db.resume({child.id!r}, workflow).",
            child.id,
            0,
        )

    def _do_replay(self, pending: Pending) -> ActionResult:
        child = self.db.fork(pending.run_id, pending.frame_no, **pending.options)
        self.breakpoints.give_to(child.id)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            try:
                run = self.db.resume(child.id, self.workflow)
            except SmithersError as error:
                self.root, self.tree = tt.fork_tree(self.db.store, self.run_id)
                self._emit("tree")
                return ActionResult(
                    "replay",
                    False,
                    f"Replay failed: run {pending.run_id} was forked at frame "
                    f"{pending.frame_no} into run {child.id}, but executing it failed: "
                    f"{error.message}",
                    child.id,
                    0,
                )
            self.switch_run(child.id)
            return ActionResult(
                "replay",
                True,
                f"Replayed run {pending.run_id} from frame {pending.frame_no} as run {run.id}: "
                f"{run.status} at frame {self.last_frame}.",
                run.id,
                self.last_frame,
            )
        self.switch_run(child.id)
        task = loop.create_task(self.db.aresume(child.id, self.workflow))
        self.background = task
        task.add_done_callback(lambda t: self._replay_done(t, pending, child.id))
        self._emit("frames")  # live refresh starts following the child
        return ActionResult(
            "replay",
            True,
            f"Replaying run {pending.run_id} from frame {pending.frame_no} as run {child.id}; "
            "the timeline follows it live.",
            child.id,
            0,
        )

    def _replay_done(self, task: asyncio.Task[Any], pending: Pending, child_id: str) -> None:
        if task.cancelled():
            self._say("error", f"Replay of run {child_id} was cancelled.")
            return
        error = task.exception()
        if self.run_id == child_id:
            with contextlib.suppress(SmithersError):
                self.refresh()
        if isinstance(error, SmithersError):
            self._say("error", f"Replay of run {child_id} failed: {error.message}")
        elif error is not None:
            self._say("error", f"Replay of run {child_id} failed: {type(error).__name__}: {error}")
        else:
            record = self.db.store.get_run(child_id)
            self._say(
                "success",
                f"Replayed run {pending.run_id} from frame {pending.frame_no} as run {child_id}: "
                f"{record.status} at frame {record.clock}.",
            )


REPLAY_NEEDS_WORKFLOW = (
    "Replay needs the workflow definition to execute agents: open the debugger with "
    "Debugger(db, run_id, workflow=wf)."
)


def _check_dense(run_id: str, frames: Sequence[FrameRow]) -> None:
    if frames and frames[-1].frame_no - frames[0].frame_no != len(frames) - 1:
        tt.fold(run_id, frames)  # raises SnapshotInvalid naming the first gap
        raise InvalidArgument(f"the frames of run {run_id} are not numbered densely")


def _sections(d: tt.SnapshotDiff) -> DiffResult:
    result = DiffResult("", "")
    if d.status:
        result.sections.append(("run status", [Change("change", "$", d.status[0], d.status[1])]))
    result.sections.append(("nodes", d.nodes))
    result.sections.append(("attempts", d.attempts))
    result.sections.append(("outputs", d.outputs))
    for label, changes in d.checkpoints.items():
        result.sections.append((f"checkpoint {label}", changes))
    return result
