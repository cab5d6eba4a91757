"""Loading the shown run: its frames (read when first needed: a run opens on its newest
frame without them, :class:`~smithers_tt.widgets._newest.NewestView`), their fold, the read
of a long history behind the newest frame in a thread, and switching to another run.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt.errors import InvalidArgument
from smithers_tt.store import Frame
from smithers_tt.store.for_widgets import FrameRow, frame_rows, frame_span
from smithers_tt.timetravel import ForkEdge, Snapshot
from smithers_tt.widgets._breakpoints import Breakpoints
from smithers_tt.widgets._bulk import paused_gc
from smithers_tt.widgets._frames import JUMP_KINDS, FrameList
from smithers_tt.widgets._layers import task_order
from smithers_tt.widgets._newest import NewestView
from smithers_tt.widgets._preload import HistoryRead, SharedFold
from smithers_tt.widgets._records import RefKey
from smithers_tt.widgets._scrub import FoldCache
from smithers_tt.widgets._state import DebuggerState

LIVE_STATUSES = ("running", "queued")
"""A run in one of these states may still get frames: the debugger keeps refreshing."""

PRELOAD_AT = 20_000
"""A run opened on its newest frame with this many frames or more has its history read and
folded in a thread while it is shown (:mod:`~smithers_tt.widgets._preload`)."""
PRELOAD_STEP = 2_500
"""Frames the thread reads and folds in one step (between two turns it gives the model, and
looks at whether it should stop): a selection waits at most one step for the thread."""


def load_frames(
    db: Any, run_id: str, after: int | None = None, upto: int | None = None
) -> list[FrameRow]:
    """A run's frames in order as rows, base frames (below 0) included; only
    ``after < frame_no <= upto`` if given."""
    with paused_gc():
        return frame_rows(db.store.engine, run_id, after=after, upto=upto)


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
    frames: FrameList
    fold: FoldCache
    seen: dict[str, None]
    sizes: dict[str, int]


@dataclass
class _Reading:
    """A history being read behind the newest frame: the rows read so far (frames 0 to
    ``job.progress``, in order) and their fold, shared with the thread."""

    job: HistoryRead[_Read]
    rows: list[FrameRow]
    fold: SharedFold


def _check_dense(run_id: str, frames: Sequence[FrameRow]) -> None:
    if frames and frames[-1].frame_no - frames[0].frame_no != len(frames) - 1:
        tt.fold(run_id, frames)  # raises SnapshotInvalid naming the first gap
        raise InvalidArgument(f"the frames of run {run_id} are not numbered densely")


class Loading(DebuggerState):
    """The shown run and its history (see the module docstring)."""

    def _load_run(self, run_id: str) -> None:
        # Everything read first, then set: a read that fails (the run deleted, the store
        # away) leaves the run shown before whole, never half of each.
        record = self.db.store.get_run(run_id)  # RunNotFound before anything changes
        run_id = record.run_id
        # What a fork by reference inherits, read before its frames: if it is materialised
        # in between, its new base frames restate that same state (folding them changes none).
        base = tt.inherited(self.db.store, run_id)
        clock = record.clock
        newest: NewestView | None = None
        if (
            base is None
            and self.lens is None
            and record.status not in LIVE_STATUSES
            and frame_span(self.db.store.engine, run_id, clock) == (clock + 1, 0)
        ):  # nothing inherited, no base frames, none missing, not changing: open on the newest
            rows = load_frames(self.db, run_id, after=clock - 1)
            if rows and rows[-1].frame_no == clock:
                newest = NewestView(self.db, run_id, rows[-1], self.load)
        every = load_frames(self.db, run_id) if newest is None else None
        root, tree = tt.fork_tree(self.db.store, run_id)
        self.run_id, self.record, self._base = run_id, record, base
        self._nodes_seen: dict[str, None] | None = {} if newest is None else None  # when asked
        self._history: _History | None = None
        self._newest: NewestView | None = newest
        self._drop_preload()  # another run's
        self._stale = False
        if every is not None:
            self._set_history(every, base)
        self.root, self.tree = root, tree
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
        self._history = _History(FrameList(rows) if read is None else read.frames, fold)
        self._drop_preload()
        self._newest = None
        self._stale = False
        self._nodes_seen = {}
        if read is None:
            self._note_frames(rows)
        else:
            self._nodes_seen = read.seen
            self._sizes.update(read.sizes)

    def _reading(self) -> _Reading | None:
        """The history the thread reads behind the newest frame, while it reads (None once
        it has finished: the model takes it over, :meth:`_loaded`)."""
        reading = self._partial
        if self._history is not None or reading is None or reading.job.done:
            return None
        return reading

    def _holding(self) -> AbstractContextManager[Any]:
        """Keep the thread reading the history from folding while the block uses what it
        read (a selection: the snapshots, the inspector and the diff all at once)."""
        reading = self._reading()
        return nullcontext() if reading is None else reading.job.holding()

    def _loaded(self) -> _History:
        """The run's frames and their fold, read now if they were not yet (the newest frame
        was shown without them: :class:`~smithers_tt.widgets._newest.NewestView`)."""
        if self._history is None:
            known = self._last_row()
            ready = None if self._preload is None else self._preload.result()
            upto = known[-1].frame_no if known else None  # the newest shown, else all
            rows = ready.rows if ready else load_frames(self.db, self.run_id, upto=upto)
            self._set_history(rows, self._base, ready)
            # rewritten since the newest frame was read (rewound elsewhere): the next refresh
            # reads it all again, as for any history rewritten under the debugger
            self._stale = rows[-1:] != known
        assert self._history is not None
        return self._history

    def read_history_behind(self) -> None:
        """Start reading and folding the shown run's history in a thread, a step at a time
        (:mod:`~smithers_tt.widgets._preload`), if it was opened without it and has
        ``PRELOAD_AT`` frames or more: a selection meanwhile uses what it read, and the first
        step back once it is done finds it all. Call it once the views are drawn (the thread
        would slow their drawing down)."""
        if self._newest is None or self._preload is not None:
            return
        upto = self._newest.frame_no
        if upto + 1 < PRELOAD_AT:
            return
        db, run_id = self.db, self.run_id
        rows: list[FrameRow] = []
        fold = FoldCache(run_id, rows, self.load, self._base)

        def read(job: HistoryRead[_Read]) -> _Read | None:
            # the collector paused for the whole read, not step by step: each step would
            # start it again over what the steps before made (twice the time, measured)
            with paused_gc():
                return read_steps(job)

        def read_steps(job: HistoryRead[_Read]) -> _Read | None:
            done = -1  # frames 0 to done are read and folded (the run has no base frames)
            while done < upto:
                # a step at a time, in order, as far as the model waits; read in the turn
                # too: a selection is not kept waiting long (a step is tens of ms) and has
                # the interpreter to itself meanwhile (a read beside it doubled its time)
                with job.turn() as go:
                    if not go:
                        return None
                    # up to the frame the model waits for and no further, else a step (a
                    # short first one: a click right after the build waits for it)
                    size = PRELOAD_STEP if done >= 0 else max(1, PRELOAD_STEP // 5)
                    stop = min(upto, job.wanted if job.wanted > done else done + size)
                    step = load_frames(db, run_id, after=done, upto=stop)
                    if not step:
                        break  # rewound elsewhere meanwhile: the model finds it stale
                    rows.extend(step)
                    _check_dense(run_id, rows)
                    fold.fold_through(rows[-1].frame_no)
                    done = rows[-1].frame_no
                    job.reached(done)
            with job.turn() as go:
                if not go:
                    return None
                if not job.asked:  # the inspector's first page at the first step back
                    fold.sorted_ref_keys(fold.at(max(upto - 1, 0)))
            seen: dict[str, None] = {}
            sizes: dict[str, int] = {}
            note_frames(rows, seen, sizes)
            frames = FrameList(rows)
            for kinds in JUMP_KINDS:  # the scrubber asks at the first step back
                frames.numbers_of(kinds)
            return _Read(rows, frames, fold, seen, sizes)

        job = HistoryRead(read)
        self._preload = job
        self._partial = _Reading(job, rows, SharedFold(fold, job, lambda: self._loaded().fold))

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
        self._partial: _Reading | None = None

    @property
    def _at_newest(self) -> NewestView | None:
        """The newest frame's view while that frame is selected (and the history was not
        taken over; another frame may be selected while the history is read behind it)."""
        newest = self._newest
        return newest if newest is not None and self.frame_no == newest.frame_no else None

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
    def _fold(self) -> FoldCache | SharedFold:
        reading = self._reading()  # a selection while the history is read: what it read
        return reading.fold if reading is not None else self._loaded().fold

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
        """The newest frame known, as a list of at most one row (none when neither the
        newest frame nor the history is held: a run switch that stopped half-way; the
        history is then read whole). Never reads the history itself: :meth:`_loaded` asks
        this, and the two called each other until the stack ran out (a RecursionError seen
        in the browser sequences after a replay and a run switch)."""
        newest = self._newest  # once: a live poll reads this from a worker thread
        if newest is not None:
            return [newest.last]
        history = self._history
        return history.frames.rows[-1:] if history is not None else []

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
        reading = self._reading()
        if reading is not None and n >= 0 and reading.job.reach(n):
            return reading.rows[n].frame()  # frames 0 to n are read (numbered densely)
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
    def task_order(self) -> list[str]:
        """The tasks of the run's graph in the order every view lists them (layer by layer,
        as the graph view draws them: see :mod:`smithers_tt.widgets._layers`)."""
        graph = self.record.graph
        kept = getattr(self, "_task_order", None)
        if kept is None or kept[0] is not graph:
            kept = self._task_order = (graph, task_order(graph))
        return kept[1]

    @property
    def node_ids(self) -> list[str]:
        """Task ids of the run: from its graph in :attr:`task_order`, then any other node
        seen in its frames."""
        names = self.task_order
        known = set(names)
        return names + [n for n in self._seen() if n not in known]

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
