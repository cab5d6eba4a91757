"""The frame table: every frame of the run, filtered by node, kind and purpose and searched
by text (what a frame says, and optionally the text of the checkpoints it published).

:class:`FrameSearch` reads only what the table shows: the filters' values and the frames
matching node, kind and purpose come from the database
(:func:`smithers_tt.store.for_widgets.frame_choices`,
:func:`~smithers_tt.store.for_widgets.find_frames`), so building the table and filtering it
never reads the run's whole history (1.5 s at 100,000 frames); both are kept and, when frames
arrive, extended by what the new frames add. Only a text search walks the frames the model holds
(reading them when first asked); payload text is read once per content hash (content is
immutable) and kept lower-cased. :class:`FrameTable` shows one page of matching frames as a
list, read in one query; picking a row selects its frame everywhere.
"""

from __future__ import annotations

import bisect
import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import ipywidgets as W

from smithers_tt.errors import SmithersError
from smithers_tt.store import Frame
from smithers_tt.store.for_widgets import (
    FrameChoices,
    FrameRow,
    find_frames,
    frame_choices,
    frames_at,
)
from smithers_tt.widgets._model import DebuggerModel
from smithers_tt.widgets._words import clock_time, describe_frame, node_label

PAGE = 100
"""Rows per page of the table."""

PAYLOAD_SECONDS = 0.3
"""How long one search may spend reading checkpoint contents it has not read before (the
rest are read by the next search; the count says how many were searched)."""

ANY = "(any)"

FOUND_KEPT = 8
"""Filter combinations whose matching frames :class:`FrameSearch` keeps (and extends)."""

Filters = tuple[str | None, str | None, str | None]
"""Node, kind and purpose (None: any)."""


@dataclass(frozen=True)
class FrameMatches:
    """Frame numbers matching a query, and how much of the payload text was searched."""

    frames: list[int]
    payloads_searched: int = 0
    payloads_total: int = 0

    @property
    def complete(self) -> bool:
        """Whether every payload was searched (when payload text was asked for)."""
        return self.payloads_searched >= self.payloads_total


class FrameSearch:
    """Filters and searches the frames of the model's run.

    What it reads from the database is kept for the run's history as loaded up to a frame
    and extended when the model has loaded more: frames are only ever added (a rewind or
    a reload announces ``run``, and the table makes a new search).
    """

    def __init__(self, model: DebuggerModel) -> None:
        self.model = model
        self._texts: dict[int, str] = {}
        self._payloads: dict[str, str] = {}
        self._choices: tuple[str, int, FrameChoices] | None = None
        self._found: OrderedDict[Filters, tuple[str, int, list[int]]] = OrderedDict()

    @property
    def _engine(self) -> Any:
        return self.model.db.store.engine

    def choices(self) -> dict[str, list[str]]:
        """The values each filter can take, in first-seen order (visible frames only)."""
        run_id, upto = self.model.run_id, self.model.last_frame
        kept = self._choices
        if kept is not None and kept[0] == run_id and kept[1] <= upto:
            seen = kept[2]
            if kept[1] < upto:  # new values first appear after every value seen before
                new = frame_choices(self._engine, run_id, after=kept[1], upto=upto)
                seen = FrameChoices(
                    _merged(seen.nodes, new.nodes),
                    _merged(seen.kinds, new.kinds),
                    _merged(seen.purposes, new.purposes),
                )
        else:
            counted = self.model.counted_choices  # by the timeline, from the same frames
            if counted is not None and counted[:2] == (run_id, upto):
                seen = counted[2]
            else:
                seen = frame_choices(self._engine, run_id, upto=upto)
        self._choices = (run_id, upto, seen)
        return {"node": list(seen.nodes), "kind": list(seen.kinds), "purpose": list(seen.purposes)}

    def _matching(self, filters: Filters) -> list[int]:
        """The visible frames (numbers, in order) with the node, kind and purpose given."""
        run_id, upto = self.model.run_id, self.model.last_frame
        if filters == (None, None, None):  # visible frames are numbered densely from 0
            return list(range(upto + 1))
        node, kind, purpose = filters
        engine = self._engine

        def find(after: int | None) -> list[int]:
            return find_frames(
                engine, run_id, node=node, kind=kind, purpose=purpose, after=after, upto=upto
            )

        kept = self._found.pop(filters, None)
        if kept is not None and kept[0] == run_id and kept[1] <= upto:
            frames = kept[2] if kept[1] == upto else kept[2] + find(kept[1])
        else:
            frames = find(None)
        self._found[filters] = (run_id, upto, frames)
        while len(self._found) > FOUND_KEPT:
            self._found.popitem(last=False)
        return list(frames)

    def rows(self, frame_nos: list[int]) -> dict[int, FrameRow]:
        """The frames with these numbers (a page of the table): the model's, once it read the
        history (a selection turns pages), else read in one query."""
        if self.model.history_loaded:
            held = self.model.visible_rows  # numbered densely from 0
            return {n: held[n] for n in frame_nos if 0 <= n < len(held)}
        return {f.frame_no: f for f in frames_at(self._engine, self.model.run_id, frame_nos)}

    def _text(self, f: FrameRow) -> str:
        found = self._texts.get(f.frame_no)
        if found is None:
            parts = [describe_frame(f), f.kind, f.node_id or "", f.purpose or "", f.state or ""]
            found = " ".join(parts).lower()
            self._texts[f.frame_no] = found
        return found

    def _payload(self, f: FrameRow) -> str | None:
        if f.content_hash is None:
            return ""
        return self._payloads.get(f.content_hash)

    def find(
        self,
        *,
        node: str | None = None,
        kind: str | None = None,
        purpose: str | None = None,
        text: str = "",
        payloads: bool = False,
    ) -> FrameMatches:
        """Frames (numbers, in order) matching every filter given; ``text`` is searched in
        what each frame says and, with ``payloads``, in its checkpoint's JSON."""
        needle = text.strip().lower()
        if not needle:
            return FrameMatches(self._matching((node, kind, purpose)))
        frames = [
            f
            for f in self.model.visible_rows
            if (node is None or f.node_id == node)
            and (kind is None or f.kind == kind)
            and (purpose is None or f.purpose == purpose)
        ]
        hits = [f.frame_no for f in frames if needle in self._text(f)]
        if not payloads:
            return FrameMatches(hits)
        with_content = [f for f in frames if f.kind == "checkpoint" and f.content_hash]
        unread = {f.content_hash: f for f in with_content if self._payload(f) is None}
        deadline = time.monotonic() + PAYLOAD_SECONDS
        for content_hash, f in unread.items():
            self._payloads[content_hash] = self._read(f)
            if time.monotonic() > deadline:
                break
        seen = set(hits)
        for f in with_content:
            body = self._payload(f)
            if body is not None and f.frame_no not in seen and needle in body:
                seen.add(f.frame_no)
        hashes = {f.content_hash for f in with_content}
        searched = sum(1 for h in hashes if h in self._payloads)
        return FrameMatches(sorted(seen), searched, len(hashes))

    def _read(self, f: FrameRow) -> str:
        try:  # verified; not kept as objects
            payload = self.model.db.store.load(f.checkpoint_ref()).payload
        except SmithersError:
            return ""
        return json.dumps(payload, ensure_ascii=False).lower()


def row_label(f: Frame | FrameRow) -> str:
    """One row of the table (plain text: a select box never parses HTML)."""
    where = "" if f.node_id is None else node_label(f.node_id, f.iteration or 0)
    when = clock_time(f.created_at_ms)[11:23]
    return f"{f.frame_no:>6}  {when}  {f.kind:<16} {where:<14} {describe_frame(f)}"


class FrameTable:
    """Filters, a search box, one page of matching frames, and page buttons."""

    def __init__(self, model: DebuggerModel) -> None:
        self.model = model
        self.search = FrameSearch(model)
        self.page = 0
        self.matches = FrameMatches([])
        self._updating = False
        wide = {"description_width": "initial"}
        flexible = {"flex": "1 1 120px", "min_width": "0", "width": "auto"}
        self.node = W.Dropdown(description="node", style=wide, layout=W.Layout(**flexible))
        self.kind = W.Dropdown(description="kind", style=wide, layout=W.Layout(**flexible))
        self.purpose = W.Dropdown(description="purpose", style=wide, layout=W.Layout(**flexible))
        self.text = W.Text(
            placeholder="search frames (and payloads)",
            continuous_update=False,
            layout=W.Layout(flex="2 1 180px", min_width="0", width="auto"),
        )
        self.text.add_class("stt-frame-search")
        self.payloads = W.Checkbox(
            value=True, description="in payloads", indent=False, layout=W.Layout(width="auto")
        )
        for control in (self.node, self.kind, self.purpose, self.text, self.payloads):
            control.observe(self._filtered, names="value")
        self.rows = W.Select(options=[], rows=10, layout=W.Layout(width="100%"))
        self.rows.add_class("stt-frame-rows")
        self.rows.observe(self._picked, names="value")
        self.count = W.Label()
        self.prev = W.Button(
            description="◀", tooltip="previous page", layout=W.Layout(width="auto")
        )
        self.next = W.Button(description="▶", tooltip="next page", layout=W.Layout(width="auto"))
        self.prev.on_click(lambda _: self.turn(-1))
        self.next.on_click(lambda _: self.turn(1))
        wrap = W.Layout(flex_flow="row wrap", width="100%", align_items="center")
        self.widget = W.VBox(
            [
                W.HBox([self.node, self.kind, self.purpose], layout=wrap),
                W.HBox([self.text, self.payloads], layout=wrap),
                self.rows,
                W.HBox([self.prev, self.count, self.next], layout=wrap),
            ],
            layout=W.Layout(width="100%", min_width="0"),
        )
        self.widget.add_class("stt-frame-table")
        model.on("run", self._reset)
        model.on("frames", self._refilter)
        model.on("frame", self._follow)
        self._reset()

    def _reset(self) -> None:
        """A run shown (the first, or another): its table opens on the selected frame's page."""
        self.search = FrameSearch(self.model)
        self._refilter(keep_page=False)

    def _refilter(self, keep_page: bool = True) -> None:
        choices = self.search.choices()
        self._updating = True
        try:
            for control, name in ((self.node, "node"), (self.kind, "kind")):
                current = control.value
                control.options = [ANY, *choices[name]]
                control.value = current if current in choices[name] else ANY
            current = self.purpose.value
            self.purpose.options = [ANY, *choices["purpose"]]
            self.purpose.value = current if current in choices["purpose"] else ANY
        finally:
            self._updating = False
        self._run(keep_page=keep_page)

    def _filtered(self, change: dict[str, Any]) -> None:
        if not self._updating:
            self._run(keep_page=False)

    def query(self) -> dict[str, Any]:
        """The filters as :meth:`FrameSearch.find` takes them."""

        def pick(control: W.Dropdown) -> str | None:
            return None if control.value in (None, ANY) else control.value

        return {
            "node": pick(self.node),
            "kind": pick(self.kind),
            "purpose": pick(self.purpose),
            "text": self.text.value,
            "payloads": self.payloads.value,
        }

    def _run(self, keep_page: bool) -> None:
        self.matches = self.search.find(**self.query())
        if not keep_page:
            self.page = self._page_of(self.model.frame_no)
        self.show()

    def _page_of(self, frame_no: int) -> int:
        at = _position(self.matches.frames, frame_no)
        return 0 if at is None else at // PAGE

    @property
    def pages(self) -> int:
        """Pages of matching frames (at least 1)."""
        return max(1, -(-len(self.matches.frames) // PAGE))

    def turn(self, delta: int) -> None:
        """Show the next (1) or previous (-1) page."""
        self.page = max(0, min(self.page + delta, self.pages - 1))
        self.show()

    def show(self) -> None:
        """Draw the current page and the counts."""
        self.page = max(0, min(self.page, self.pages - 1))
        m = self.model
        shown = self.matches.frames[self.page * PAGE : (self.page + 1) * PAGE]
        found = self.search.rows(shown)
        self._updating = True
        try:
            self.rows.options = [(row_label(found[n]), n) for n in shown if n in found]
            self.rows.value = m.frame_no if m.frame_no in shown else None
        finally:
            self._updating = False
        total = m.last_frame + 1 - m.first_frame  # frames are numbered densely
        text = f"{len(self.matches.frames)} of {total} frames · page {self.page + 1}/{self.pages}"
        if not self.matches.complete:
            text += (
                f" · searched {self.matches.payloads_searched} of "
                f"{self.matches.payloads_total} payloads (search again for more)"
            )
        self.count.value = text
        self.prev.disabled = self.page == 0
        self.next.disabled = self.page >= self.pages - 1

    def _picked(self, change: dict[str, Any]) -> None:
        if not self._updating and change["new"] is not None:
            self.model.select_frame(change["new"])

    def _follow(self) -> None:
        at = _position(self.matches.frames, self.model.frame_no)
        if at is not None:
            page = at // PAGE
            if page != self.page:
                self.page = page
                self.show()
                return
        self._updating = True
        try:
            values = [v for _, v in self.rows.options]
            self.rows.value = self.model.frame_no if self.model.frame_no in values else None
        finally:
            self._updating = False


def _merged(seen: tuple[str, ...], new: tuple[str, ...]) -> tuple[str, ...]:
    """Values seen, then the new ones not among them, each in first-seen order."""
    return tuple(dict.fromkeys((*seen, *new)))


def _position(frames: list[int], frame_no: int) -> int | None:
    """Where ``frame_no`` is in ``frames`` (frame numbers in order), or None."""
    at = bisect.bisect_left(frames, frame_no)
    return at if at < len(frames) and frames[at] == frame_no else None
