"""The selection: which frame is shown, which checkpoint ref (following the frame, or pinned
across frames), and the pages of refs the inspector lists.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from smithers_tt.errors import InvalidArgument
from smithers_tt.store import CheckpointRef
from smithers_tt.widgets._bulk import one_read
from smithers_tt.widgets._newest import NewestView
from smithers_tt.widgets._records import RefKey, RefPage
from smithers_tt.widgets._state import DebuggerState

REF_PAGE = 50
"""Checkpoint refs listed per page in the inspector."""


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


class Selection(DebuggerState):
    """Selecting frames and checkpoint refs."""

    def select_frame(self, frame_no: int) -> None:
        """Select a frame (clamped to the run's frames); every view follows. The run is read
        again first if it changed in the database (:meth:`catch_up`): a frame is never
        selected in a history that is no longer there. What the views read for it (the
        payloads, the model calls, the run) shares one read transaction."""
        with one_read(self.db), self._holding():
            self.catch_up()
            n = max(self.first_frame, min(int(frame_no), self.last_frame))
            if n == self.frame_no:
                return
            reading = self._reading()  # the history is read behind the newest frame
            if reading is None or not reading.job.reach(n):
                self._loaded()  # any frame but the newest is folded from the history
            self.frame_no = n
            self._default_ref()
            self._emit("frame", "ref")

    def check_frame(self, frame_no: Any) -> int:
        """``frame_no`` as a frame of the shown run, or an ``InvalidArgument`` that says which
        frames it has (a link or a caller naming a frame gets that frame, never a nearby one)."""
        first, last = self.first_frame, self.last_frame
        if isinstance(frame_no, bool) or not isinstance(frame_no, int):
            raise InvalidArgument(
                f"frame must be a whole number from {first} to {last}, not {frame_no!r}"
            )
        if not first <= frame_no <= last:
            raise InvalidArgument(
                f"run {self.run_id} has no frame {frame_no}: its frames are {first} to {last}"
            )
        return frame_no

    def step(self, delta: int) -> None:
        """Select the frame ``delta`` frames away."""
        self.select_frame(self.frame_no + delta)

    def jump(
        self, direction: int, kinds: Sequence[str] = ("attempt_started", "attempt_finished")
    ) -> None:
        """Select the next (``direction`` 1) or previous (-1) frame of one of ``kinds``."""
        target = self._jump_target(direction, kinds)
        if target is not None:
            self.select_frame(target)

    def can_jump(self, direction: int, kinds: Sequence[str]) -> bool:
        """Whether :meth:`jump` would go anywhere: never past the first or newest frame; in a
        history already read, only when such a frame lies that way (a history not read yet
        is not read to answer: a long run opens without it)."""
        if self.frame_no >= self.last_frame if direction > 0 else self.frame_no <= 0:
            return False
        return not self.history_loaded or self._jump_target(direction, kinds) is not None

    def _jump_target(self, direction: int, kinds: Sequence[str]) -> int | None:
        # a search in the kinds' frame numbers, not a walk of the history: the scrubber asks
        # three times at every selection (a walk was up to tens of ms at 100,000 frames)
        numbers = self.frames.numbers_of(kinds)
        if direction > 0:
            at = bisect.bisect_right(numbers, self.frame_no)
            return numbers[at] if at < len(numbers) else None
        at = bisect.bisect_left(numbers, self.frame_no) - 1
        return numbers[at] if at >= 0 and numbers[at] >= 0 else None  # never a base frame

    def frame_ref_key(self, frame_no: int | None = None) -> RefKey | None:
        """The checkpoint a frame is about: the one it published (a checkpoint frame), else
        the newest of its node, else the newest visible at all (None when none is)."""
        newest = self._newest
        if newest is not None and newest.frame_no == (
            self.frame_no if frame_no is None else frame_no
        ):
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
        if (newest := self._at_newest) is not None and len(key) == 4:
            return newest.ref((str(key[0]), int(key[1]), int(key[2]), int(key[3])))
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
        if self._at_newest is not None and not needle:
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
        newest = self._at_newest
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
