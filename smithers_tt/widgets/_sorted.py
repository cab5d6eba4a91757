"""Two sorted lists as one sorted sequence (:class:`SortedUnion`), without merging them.

The scrub cache (:mod:`~smithers_tt.widgets._scrub`) and the newest frame's tables
(:mod:`~smithers_tt.widgets._newest`) answer "the sorted keys at this frame" with one: the
keys of a copy sorted once, and the few added since.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator, Sequence
from typing import Any


class SortedUnion(Sequence[Any]):
    """Two sorted lists of distinct items (none in both) as one sorted sequence, without
    merging them: its length, an item, a slice and a search cost a few bisections, so a page
    of the 64,000 sorted ref keys of a snapshot costs what the page holds."""

    def __init__(self, base: list[Any], extra: list[Any]) -> None:
        self.base, self.extra = base, extra

    def __len__(self) -> int:
        return len(self.base) + len(self.extra)

    def _split(self, pos: int) -> tuple[int, int]:
        """How many items of ``base`` and of ``extra`` come before position ``pos``."""
        base, extra = self.base, self.extra
        lo, hi = max(0, pos - len(base)), min(pos, len(extra))
        while lo < hi:  # the fewest of extra such that the next of extra follows base's last
            j = (lo + hi) // 2
            if extra[j] < base[pos - j - 1]:
                lo = j + 1
            else:
                hi = j
        return pos - lo, lo

    def _take(self, start: int, count: int) -> list[Any]:
        i, j = self._split(start)
        base, extra, out = self.base, self.extra, []
        while len(out) < count and (i < len(base) or j < len(extra)):
            if j >= len(extra) or (i < len(base) and base[i] < extra[j]):
                out.append(base[i])
                i += 1
            else:
                out.append(extra[j])
                j += 1
        return out

    def __getitem__(self, at: Any) -> Any:
        if isinstance(at, slice):
            start, stop, step = at.indices(len(self))
            if step != 1:
                return list(self)[at]
            return self._take(start, max(0, stop - start))
        size = len(self)
        pos = at + size if at < 0 else at
        if not 0 <= pos < size:
            raise IndexError("SortedUnion index out of range")
        return self._take(pos, 1)[0]

    def __iter__(self) -> Iterator[Any]:
        return heapq.merge(self.base, self.extra)

    def __contains__(self, item: object) -> bool:
        return any(_holds(items, item) for items in (self.base, self.extra))

    def rank(self, item: Any) -> int:
        """How many items come before ``item`` (whether it is there or not)."""
        return bisect.bisect_left(self.base, item) + bisect.bisect_left(self.extra, item)

    def index(self, item: Any, start: int = 0, stop: int | None = None) -> int:
        """The position of ``item`` (ValueError when it is not there)."""
        if item not in self:
            raise ValueError(f"{item!r} is not in the sequence")
        pos = bisect.bisect_left(self.base, item) + bisect.bisect_left(self.extra, item)
        if pos < start or (stop is not None and pos >= stop):
            raise ValueError(f"{item!r} is not in the sequence")
        return pos

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, SortedUnion)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SortedUnion({list(self)!r})"


def _holds(items: list[Any], item: Any) -> bool:
    at = bisect.bisect_left(items, item)
    return at < len(items) and items[at] == item
