"""Snapshots: the exact state a frame makes visible, rebuilt by folding the run's frames.

A run's frames are its history; folding them in order up to frame N gives the nodes,
attempts, outputs and checkpoint refs visible at N. A fork made by reference reads its history
before frame 0 from its parent (:mod:`._at`); a materialised fork (and every fork made before
forks by reference) starts with *base frames* (numbered below 0) that restate its parent's
state at the fork point, so its history is self-contained.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.errors import SnapshotInvalid
from smithers_tt.store import CheckpointRef, Frame
from smithers_tt.store.for_timetravel import AttemptView, NodeView
from smithers_tt.timetravel._html import MUTED, short, table, title

MAX_SNAPSHOT_ROWS = 1_000_000
"""Most nodes + attempts + refs a snapshot may hold; past it time travel refuses to work."""

NodeKey = tuple[str, int]
AttemptKeyT = tuple[str, int, int]
RefKey = tuple[str, int, int, int]


@dataclass
class Snapshot:
    """Exactly what frame ``frame_no`` of run ``run_id`` makes visible."""

    run_id: str
    frame_no: int
    status: str = "running"
    input: Any = None
    output: Any = None
    error: str | None = None
    nodes: dict[NodeKey, NodeView] = field(default_factory=dict)
    attempts: dict[AttemptKeyT, AttemptView] = field(default_factory=dict)
    refs: dict[RefKey, CheckpointRef] = field(default_factory=dict)
    loader: Callable[[CheckpointRef], AgentCheckpoint] | None = field(
        default=None, repr=False, compare=False
    )
    """Reads (and verifies) the content of a ref; set when the snapshot came from a database."""
    stored_refs: Any = field(default=None, repr=False, compare=False)
    """Set (to a :class:`smithers_tt.store.for_timetravel.StoredRefs`) on snapshots that rewind and
    fork build inside their transaction: the refs checkpoint frames make visible are then left
    in the database, to be copied there by set-based statements, and :attr:`refs` holds only
    refs added in Python (an edited checkpoint)."""

    def payload(self, node_id: str, iteration: int = 0) -> Any:
        """The payload of a node's newest checkpoint at this frame, or None."""
        ref = self.newest_ref(node_id, iteration)
        if ref is None or self.loader is None:
            return None
        return self.loader(ref).payload

    def newest_ref(self, node_id: str, iteration: int = 0) -> CheckpointRef | None:
        """The newest checkpoint ref of a node visible at this frame."""
        keys = [k for k in self.refs if k[0] == node_id and k[1] == iteration]
        return self.refs[max(keys, key=lambda k: (k[2], k[3]))] if keys else None

    def outputs(self) -> dict[str, Any]:
        """Output of each finished node (its highest iteration), by node id."""
        best: dict[str, tuple[int, Any]] = {}
        for (node_id, iteration), node in self.nodes.items():
            if node.state in ("finished", "cached") and iteration >= best.get(node_id, (-1,))[0]:
                best[node_id] = (iteration, node.output)
        return {k: v[1] for k, v in sorted(best.items())}

    @property
    def size(self) -> int:
        """Rows this snapshot would materialise (nodes + attempts + refs)."""
        return len(self.nodes) + len(self.attempts) + len(self.refs)

    def _repr_html_(self) -> str:
        """The snapshot as an escaped HTML table in notebooks."""
        return snapshot_html(self)

    def defer_refs(self, build: Callable[[], dict[RefKey, CheckpointRef]]) -> None:
        """Make :attr:`refs` the result of ``build()``, called on first access only.

        ``build`` must not touch the database: it turns rows already read (inside the
        transaction that decided them) into :class:`CheckpointRef` objects, so a caller that
        never looks at the refs of a 100,000-ref rewind does not pay for 100,000 objects.
        """
        self._refs = None
        self._build_refs = build


def _get_refs(self: Snapshot) -> dict[RefKey, CheckpointRef]:
    if self._refs is None:
        self._refs = self._build_refs()
        self._build_refs = None
    return self._refs


def _set_refs(self: Snapshot, refs: dict[RefKey, CheckpointRef]) -> None:
    self._refs = refs
    self._build_refs = None


# ``refs`` stays a dataclass field (constructor, ``replace``, ``==`` and ``repr`` see it), read
# and written through a property so that :meth:`Snapshot.defer_refs` can fill it on demand.
Snapshot.refs = property(_get_refs, _set_refs)  # type: ignore[assignment]


_DEFERRED = ("status", "input", "output", "error", "nodes", "attempts", "refs")
"""What a :class:`LaterSnapshot` reads on first access (all but its run and frame)."""


class LaterSnapshot(Snapshot):
    """A snapshot whose content (status, input, output, error, nodes, attempts, refs) is
    ``build()``'s, called on first access only; equal to the :class:`Snapshot` it builds.

    A rewind that changed only what its frames touched returns one: ``build`` reads the
    frames up to :attr:`frame_no` (which only a later rewind below it removes) in a
    transaction of its own, so a caller that never looks pays nothing.
    """

    def __init__(self, run_id: str, frame_no: int, build: Callable[[], Snapshot]) -> None:
        super().__init__(run_id, frame_no)
        self.__dict__["_build_state"] = build

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        return all(
            getattr(self, f.name) == getattr(other, f.name) for f in fields(Snapshot) if f.compare
        )

    __hash__ = None  # type: ignore[assignment]


def _later(self: LaterSnapshot) -> dict[str, Any]:
    """The snapshot's values, after running its pending ``build``."""
    values = self.__dict__
    build = values.get("_build_state")
    if build is not None:
        values["_build_state"] = None
        full = build()
        for name in _DEFERRED:
            values["_" + name] = getattr(full, name)
        values["_build_refs"] = None
    return values


def _read_later(name: str) -> property:
    slot = "_" + name

    def get(self: LaterSnapshot) -> Any:
        _later(self)
        return _get_refs(self) if slot == "_refs" else self.__dict__[slot]

    def set_(self: LaterSnapshot, value: Any) -> None:
        _later(self)
        if slot == "_refs":
            _set_refs(self, value)
        else:
            self.__dict__[slot] = value

    return property(get, set_)


for _name in _DEFERRED:
    setattr(LaterSnapshot, _name, _read_later(_name))


def _bad(frame: Frame, why: str) -> SnapshotInvalid:
    return SnapshotInvalid(
        f"frame {frame.frame_no} ({frame.kind}) of run {frame.run_id} is corrupt: {why}; "
        "nothing was changed",
        run_id=frame.run_id,
        frame_no=frame.frame_no,
    )


def _need(frame: Frame, *names: str) -> None:
    for name in names:
        if getattr(frame, name) is None:
            raise _bad(frame, f"{name} is missing")


def _need_key(frame: Frame, *more: str) -> None:
    """``node_id``, ``iteration`` and ``attempt`` (and ``more``) are set."""
    if frame.node_id is None or frame.iteration is None or frame.attempt is None or more:
        _need(frame, "node_id", "iteration", "attempt", *more)


def _resumed(frame: Frame, data: dict[str, Any]) -> tuple[str, str, int, int, int] | None:
    value = data.get("resumed_from")
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 5):
        raise _bad(frame, "resumed_from is not a ref key")
    return (str(value[0]), str(value[1]), int(value[2]), int(value[3]), int(value[4]))


_NO_DATA: dict[str, Any] = {}
"""The data of a frame without any (read, never written)."""


def apply(snap: Snapshot, frame: Frame) -> None:
    """Apply one frame to a snapshot (in place)."""
    kind = frame.kind
    data = frame.data
    if data is None:
        data = _NO_DATA
    elif not isinstance(data, dict):
        raise _bad(frame, "its data is not an object")
    # The most frequent kinds first (the branches exclude each other).
    if kind in ("node_state", "cache_hit"):
        if frame.node_id is None or frame.iteration is None or frame.state is None:
            _need(frame, "node_id", "iteration", "state")
        assert frame.node_id is not None and frame.iteration is not None
        old = snap.nodes.get((frame.node_id, frame.iteration))
        output = data.get("output")
        if output is None and old is not None and frame.state == old.state:
            output = old.output
        snap.nodes[(frame.node_id, frame.iteration)] = NodeView(
            frame.node_id,
            frame.iteration,
            frame.state or "pending",
            frame.attempt if frame.attempt is not None else (old.last_attempt if old else None),
            output,
        )
    elif kind == "attempt_started":
        _need_key(frame)
        key = (frame.node_id, frame.iteration, frame.attempt)
        snap.attempts[key] = AttemptView(
            frame.node_id,
            frame.iteration,
            frame.attempt,
            frame.state or "in_progress",
            _resumed(frame, data),
            data.get("error"),
            data.get("error_code"),
            bool(data.get("discard_resume", False)),
            data.get("started_at_ms", frame.created_at_ms),
            data.get("finished_at_ms"),
        )
    elif kind == "attempt_finished":
        _need_key(frame, *(() if frame.state is not None else ("state",)))
        key = (frame.node_id, frame.iteration, frame.attempt)
        old = snap.attempts.get(key)
        if old is None:
            raise _bad(frame, f"it ends attempt {key}, which never started")
        snap.attempts[key] = AttemptView(
            old.node_id,
            old.iteration,
            old.attempt,
            frame.state,
            old.resumed_from,
            data.get("error"),
            data.get("error_code"),
            bool(data.get("discard_resume", False)),
            old.started_at_ms,
            frame.created_at_ms,
        )
    elif kind == "checkpoint":
        if None in (
            frame.node_id, frame.iteration, frame.attempt, frame.sequence, frame.content_hash,
            frame.codec, frame.version, frame.purpose,
        ):  # fmt: skip  # one test on the hot path; _need names the missing field
            _need(
                frame, "node_id", "iteration", "attempt", "sequence", "content_hash", "codec",
                "version", "purpose",
            )  # fmt: skip
        assert frame.node_id is not None and frame.iteration is not None
        assert frame.attempt is not None and frame.sequence is not None
        if len(frame.content_hash or "") != 64:
            raise _bad(frame, "its content hash is not a SHA-256")
        key4 = (frame.node_id, frame.iteration, frame.attempt, frame.sequence)
        snap.refs[key4] = CheckpointRef(
            snap.run_id,
            frame.node_id,
            frame.iteration,
            frame.attempt,
            frame.sequence,
            frame.content_hash or "",
            frame.codec or "",
            frame.version or 1,
            frame.purpose or "progress",
            frame.agent_id,
            data.get("created_at_ms", frame.created_at_ms),
        )
    elif kind in ("run_created", "forked"):
        snap.status = frame.state or snap.status
        if "input" in data:
            snap.input = data["input"]
        if kind == "forked":
            snap.output, snap.error = data.get("output"), data.get("error")
    elif kind == "run_claimed":
        snap.status = "running"
    elif kind in ("run_finished", "run_failed", "run_cancelled"):
        snap.status = frame.state or kind[4:]
        snap.output, snap.error = data.get("output"), data.get("error")
    elif kind == "reset":
        gone = set(data.get("nodes") or [])
        snap.nodes = {k: v for k, v in snap.nodes.items() if k[0] not in gone}
        snap.attempts = {k: v for k, v in snap.attempts.items() if k[0] not in gone}
        snap.refs = {k: v for k, v in snap.refs.items() if k[0] not in gone}
        snap.status = frame.state or "interrupted"
        snap.output = snap.error = None  # as the reset left the run row: no ending
    elif kind in ("run_paused", "run_continued", "run_released"):
        snap.status = frame.state or ("paused" if kind == "run_paused" else "queued")
    elif kind in ("cancel_requested", "breakpoints_set"):
        pass  # no row changes: a request, and where the run pauses next
    else:
        raise _bad(frame, f"unknown frame kind {kind!r}")
    if len(snap.nodes) + len(snap.attempts) + len(snap.refs) > MAX_SNAPSHOT_ROWS:
        raise SnapshotInvalid(
            f"run {snap.run_id} holds more than {MAX_SNAPSHOT_ROWS} nodes, attempts and refs "
            f"at frame {frame.frame_no}; time travel refuses snapshots this large"
        )


def fold(
    run_id: str,
    frames: Iterable[Frame],
    upto: int | None = None,
    *,
    base: Snapshot | None = None,
) -> Snapshot:
    """The snapshot at frame ``upto`` (default: the last frame) from a run's frames in order,
    folded on ``base`` (what a fork by reference inherits; it is changed in place) or on
    nothing.

    Raises:
        SnapshotInvalid: a frame is malformed, or the snapshot is larger than allowed.
    """
    snap = Snapshot(run_id, -1) if base is None else base
    previous: int | None = None
    for frame in frames:
        if upto is not None and frame.frame_no > upto:
            break
        if previous is not None and frame.frame_no != previous + 1:
            raise _bad(frame, f"frames jump from {previous} to {frame.frame_no}")
        previous = frame.frame_no
        apply(snap, frame)
        snap.frame_no = frame.frame_no
    return snap


def snapshot_html(snap: Snapshot) -> str:
    """A snapshot: status, nodes and the checkpoint refs visible at its frame."""
    nodes = table(
        ["node", "iteration", "state", "last attempt", "output"],
        (
            (n.node_id, n.iteration, n.state, n.last_attempt or "", short(n.output))
            for _, n in sorted(snap.nodes.items())
        ),
        len(snap.nodes),
    )
    refs = table(
        ["node", "iteration", "attempt", "seq", "purpose", "codec", "hash"],
        (
            (
                r.node_id,
                r.iteration,
                r.attempt,
                r.sequence,
                r.purpose,
                f"{r.codec} v{r.version}",
                r.short_hash,
            )
            for _, r in sorted(snap.refs.items())
        ),
        len(snap.refs),
    )
    return (
        f"<div>{title(f'Snapshot of run {snap.run_id} at frame {snap.frame_no} · {snap.status}')}"
        f"{nodes}<div {MUTED}>checkpoint refs</div>{refs}</div>"
    )
