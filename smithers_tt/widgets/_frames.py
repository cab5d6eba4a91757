"""A run's frames as the debugger holds them: rows read in bulk, frames made when shown.

Opening a 100,000-frame run must not make 100,000 frozen :class:`Frame` objects (a quarter
of a second) only for the timeline, the frame table and the fold to read a few fields of
each. The model keeps the rows :func:`smithers_tt.store.for_widgets.frame_rows` reads (named
tuples with the fields of a frame, in its order) and hands out :class:`FrameList`: a sequence of
:class:`Frame` made from a row when one is asked for, equal to the list of frames
:meth:`Store.frames` reads. The parts that walk the whole history walk :attr:`FrameList.rows`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

from smithers_tt.store import Frame
from smithers_tt.store.for_widgets import FrameRow


class FrameList(Sequence[Frame]):
    """Frames of one run in order, made from :attr:`rows` (which it shares, not copies)."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[FrameRow]) -> None:
        self.rows = rows

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
