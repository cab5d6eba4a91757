"""A run's frames as the debugger holds them: rows read in bulk, frames made when shown.

Opening a 100,000-frame run must not make 100,000 frozen :class:`Frame` objects (a quarter
of a second) only for the timeline, the frame table and the fold to read a few fields of
each. The model keeps the rows :func:`smithers_tt.store.for_widgets.frame_rows` reads (named
tuples with the fields of a frame, in its order) and hands out :class:`FrameList`: a sequence of
:class:`Frame` made from a row when one is asked for, equal to the list of frames
:meth:`Store.frames` reads. The parts that walk the whole history walk :attr:`FrameList.rows`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, overload

from smithers_tt.store import Frame
from smithers_tt.store.for_widgets import FrameRow

ATTEMPT_KINDS = ("attempt_started", "attempt_finished")
"""What the scrubber's ◀◀ and ▶▶ jump between."""
CHECKPOINT_KINDS = ("checkpoint",)
"""What its ◆▶ jumps to."""
JUMP_KINDS = (ATTEMPT_KINDS, CHECKPOINT_KINDS)
"""The kinds the scrubber asks :meth:`FrameList.numbers_of` for at every selection."""


class FrameList(Sequence[Frame]):
    """Frames of one run in order, made from :attr:`rows` (which it shares, not copies)."""

    __slots__ = ("_numbers", "rows")

    def __init__(self, rows: list[FrameRow]) -> None:
        self.rows = rows
        self._numbers: dict[frozenset[str], tuple[int, list[int]]] = {}

    def numbers_of(self, kinds: Iterable[str]) -> list[int]:
        """The frame numbers of the frames of one of ``kinds``, ascending (base frames, below
        0, included). Walked once per set of kinds, then only through rows appended to
        :attr:`rows` since: the scrubber asks at every selection (a history rewritten is a
        new list, so a new :class:`FrameList`)."""
        key = frozenset(kinds)
        done, numbers = self._numbers.get(key, (0, []))
        if done < len(self.rows):
            numbers.extend(r.frame_no for r in islice(self.rows, done, None) if r.kind in key)
            self._numbers[key] = (len(self.rows), numbers)
        return numbers

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, at: int) -> Frame: ...

    @overload
    def __getitem__(self, at: slice) -> list[Frame]: ...

    def __getitem__(self, at: Any) -> Any:
        if isinstance(at, slice):
            return [row.frame() for row in self.rows[at]]
        return self.rows[at].frame()

    def __iter__(self) -> Iterator[Frame]:
        return (row.frame() for row in self.rows)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrameList):
            return self.rows == other.rows
        if isinstance(other, (list, tuple)):
            return len(other) == len(self.rows) and all(
                isinstance(f, Frame) and f == row.frame()
                for f, row in zip(other, self.rows, strict=True)
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FrameList({list(self)!r})"
