"""The ledger: the one write path of every change to a run.

A change to a run is a frame appended to the run's history plus its projection into the live
tables (an attempt row inserted or ended, a node upserted, the run row's status or owner
changed, a ref inserted: its key and the number of its checkpoint frame). :func:`write`
takes a list of :class:`Entry` (a run, an optional fence and its changes) and, inside the
caller's transaction:

1. advances the clock of every run named **once**, by the number of its frames, with one
   ``UPDATE ... RETURNING`` per run that also locks the run row (runs in sorted order, so two
   writers never deadlock on them); a new run (``Entry.create``) is inserted instead, its
   frames numbered from 0. Statements a change needs that do not depend on the clock (a
   checkpoint's sequence allocation; the LangGraph saver's content and stored writes) go in
   the same round trip on PostgreSQL, after the advance (so under its lock);
2. checks each entry's fence against the returned row: the run is ``running`` under the
   fence's epoch, else :class:`FenceLost` (the caller's transaction, or savepoint, then rolls
   everything back: nothing is written). Each change may check the row too (a checkpoint
   against the run's size limit);
3. applies each change's projection, in order; each returns its frame, numbered by one tick
   of the clock in list order;
4. inserts every frame with one ``executemany`` (refs the projections deferred go with it,
   one ``executemany`` each); on PostgreSQL they are held back and go with the COMMIT.

On PostgreSQL the group committer's writes go further (``write(..., guess=True)``): the clock's
advance and the early steps are sent as guarded guesses of what they return, taken from what
earlier commits returned, so the whole write and its COMMIT are one round trip; a guess the
database finds wrong aborts the transaction, and the committer applies the write again asking
(see :func:`write`).

Every statement is prebuilt driver SQL (:class:`~smithers_tt.store.backend._statements.Statements`):
nothing is built or compiled per write, which is what keeps the group-committed publish (the
ledger applied to a batch of many units of many runs) on its hot path. A run's frame numbers
are dense and follow commit order; wall-clock stamps (``stamp``, given by the caller) are
never compared.

A change whose :attr:`Change.ticks` is 0 is *frameless*: it goes through the same clock lock,
fence check and projection, but adds nothing to the history (a ref restored that is there
already, an attempt deleted, a rewind's cut of the history). A heartbeat is not even that:
:func:`touch` records that an owner is alive in one fenced statement, without locking the
clock or growing the history (the fence rule there is :func:`check_fence`'s, in SQL).

Writes that are deliberately not changes to a run, and so do not go through here: the task
cache's rows (a cache hit's frames are written here, by the attempt it records; the cache row
is a memo keyed by a call, shared by every run), the worker registry (processes, not runs),
checkpoint content (immutable bytes addressed by their hash, shared by runs; a ref names
them), time travel's lease on a run (a lock held for the seconds of a rewind or fork, not part
of the run's history: the operation it guards writes its own changes here), commit tokens
(the dialect's proof that a COMMIT landed), garbage collection (deletes content nothing
refers to, which no history can name), deleting a run whole (retention's prune, which audits it,
and a LangGraph thread deleted: the run row goes with its history, nothing is left to append to)
and LangGraph's index of checkpoint ids (a row naming the frame of a checkpoint document,
removed when LangGraph prunes checkpoints: the frames, the history, stay).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, NamedTuple

from smithers_tt.checkpoint import canonical_bytes
from smithers_tt.errors import FenceLost, RunNotFound
from smithers_tt.store._frames import frame_values
from smithers_tt.store._records import (
    AttemptKey,
    Fence,
    Frame,
    RunRecord,
    run_from_row,
)
from smithers_tt.store.backend import Driver

Step = tuple[str, Any]
"""A statement and its parameters."""


class RunClock(NamedTuple):
    """What advancing a run's clock returns (the run row after the advance)."""

    status: str
    owner_epoch: int
    clock: int
    max_checkpoint_bytes: int | None
    cancel_requested: bool
    created_at_ms: int
    """The run's incarnation: a run deleted and created again under its id is another row."""
    hides: bool | None
    """Frames above the clock may be stored (a rewind's cut): the next frame drops them."""


RunRow = tuple[Any, ...]
"""A :class:`RunClock` as the driver returns it."""


class NewRun(NamedTuple):
    """The row of a run :func:`write` inserts (:attr:`Entry.create`): the values of
    :attr:`Statements.insert_run` but the clock and the stamps, which :func:`write` adds.

    The columns of :class:`RunRecord` as stored, not the record itself: its JSON is text, so a
    fork copies its parent's graph as it was read, never parsing it, and :meth:`record` is the
    record this row reads back as (``tests/store/test_run_record.py`` holds the two in step).
    """

    run_id: str
    workflow: str
    workflow_hash: str | None
    status: str
    input_json: str | None
    owner_epoch: int
    owner_id: str | None
    heartbeat_at_ms: int | None
    cancel_requested: bool
    parent_run_id: str | None
    parent_frame_no: int | None
    max_checkpoint_bytes: int | None
    graph_json: str | None
    output_json: str | None = None
    error: str | None = None
    inherits: bool | None = None
    """True on a fork by reference (see ``tt_runs.inherits``)."""

    def record(self, entry: Entry, stamp: int, labels: dict[str, str] | None = None) -> RunRecord:
        """The run as it reads back once ``entry`` (which created it, with ``labels``) was
        written at ``stamp``: what :meth:`Store.get_run` would return, without reading it."""
        row = SimpleNamespace(
            **self._asdict(),
            clock=len(entry.frames) - 1,
            created_at_ms=stamp,
            updated_at_ms=stamp,
        )
        return run_from_row(row, labels)


class Write:
    """One :func:`write` in progress: what its changes' projections use."""

    __slots__ = ("contents", "db", "deferred", "guessed", "inserted", "sql", "stamp")

    def __init__(self, db: Driver, stamp: int) -> None:
        self.db = db
        self.sql = db.sql
        self.stamp = stamp
        self.deferred: dict[str, list[tuple[Any, ...]]] = {}
        """Rows to insert after the projections, one ``executemany`` per statement."""
        self.contents: set[str] = set()
        """Content hashes already stored by this write (stored once per write)."""
        self.guessed: dict[Any, Any] = {}
        """What the guesses of this write's earlier changes will have left (see
        :meth:`Change.guess`): an attempt's next sequence after a checkpoint guessed."""
        self.inserted: set[int] = set()
        """Frames (by ``id``) a deferred statement inserts with its own rows (see
        :meth:`defer_frame`), not to be inserted again with the others."""

    def defer(self, statement: str, row: tuple[Any, ...]) -> None:
        """Insert ``row`` with the frames, in one ``executemany`` with others like it."""
        self.deferred.setdefault(statement, []).append(row)

    def defer_frame(self, statement: str, frame: Frame, before: tuple[Any, ...] = ()) -> None:
        """Insert ``frame`` with a statement that inserts it and the rows it projects to (its
        parameters: ``before``, then the frame's values), deferred as :meth:`defer` does,
        instead of with the other frames: one statement where there would be two."""
        self.defer(statement, (*before, *frame_values(frame)))
        self.inserted.add(id(frame))


class Change:
    """One frame and its projection. Subclasses override :meth:`apply` (and may override
    :meth:`early` and :meth:`check`)."""

    __slots__ = ()

    ticks = 1
    """Frames this change adds to the history: 1, or 0 for a frameless change (whose
    :meth:`apply` returns None)."""

    executes = True
    """Whether :meth:`apply` runs statements itself (False: it only defers rows with
    :meth:`Write.defer`, so a new run's row may be inserted in the frames' round trip)."""

    def early(self, w: Write) -> Step | None:
        """A statement that does not depend on the clock, sent with the clock's advance."""
        return None

    keeps_run = False
    """Whether :meth:`apply` leaves the run row as the clock's advance returned it (status,
    owner, limits), so what the write learned of it holds after it (see :func:`_learn`)."""

    def guess(self, w: Write) -> tuple[Step, Any] | bool | None:
        """:meth:`early` as a guarded guess (see :func:`write`): the step and the row it is
        guessed to return (the step None when :meth:`apply` sends the guard itself, with its
        rows); None when there is no early step; False when it cannot be guessed (by default,
        whenever there is an early step)."""
        return None if type(self).early is Change.early else False

    def check(self, run: RunRow) -> None:
        """Raise if the run (as the clock's advance returned it) refuses this change."""

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame | None:
        """Write the projection; return the frame (numbered ``frame_no``), or None if
        :attr:`ticks` is 0."""
        raise NotImplementedError


@dataclass(slots=True)
class Entry:
    """Changes to one run under an optional fence (or a new run, ``create`` being its row)."""

    run_id: str
    fence: Fence | None
    changes: Sequence[Change]
    create: NewRun | None = None
    """The run is inserted with this row (its clock starts at 0)."""
    frames: list[Frame] = field(default_factory=list)
    """Filled by :func:`write`: the frames of ``changes``, in order."""


def write(db: Driver, entries: Sequence[Entry], stamp: int, *, guess: bool = False) -> list[Entry]:
    """Write ``entries`` in the caller's transaction (see the module docstring); return them
    with their frames. Raises on the first failure, leaving the caller to roll back.

    With ``guess`` (a caller that, when its transaction is refused, applies the same entries
    again without it: the group committer), what the clock's advance and the early steps
    would return may be guessed from what earlier commits returned (the driver's
    :meth:`~Driver.known`), and the statements sent as guarded guesses with the COMMIT (see
    ``Statements.advance_run_if``): on PostgreSQL the whole write is then one round trip.
    A wrong guess aborts the transaction; nothing is ever decided on a guess alone.
    """
    w = Write(db, stamp)
    sql = w.sql
    ticks: dict[str, int] = {}
    for entry in entries:
        if entry.create is None:
            ticks[entry.run_id] = ticks.get(entry.run_id, 0) + _ticks(entry)
    runs = sorted(ticks)
    known = db.known() if guess else None
    guessed = None if known is None else _guess(w, known, entries, runs, ticks)
    if guessed is not None:
        rows, wanted = guessed
    else:
        if known is not None:
            w = Write(db, stamp)  # what a guess that gave up left in it is forgotten
        steps: list[tuple[str, Any, bool]] = [
            (sql.advance_run, (ticks[run_id], stamp, run_id), False) for run_id in runs
        ]
        wanted = []  # changes with an early step, and its index
        for entry in entries:
            for change in entry.changes:
                step = change.early(w)
                if step is not None:
                    wanted.append((change, len(steps)))
                    steps.append((step[0], step[1], False))
        rows = db.together(steps) if steps else []
    next_no: dict[str, int] = {}
    row_of: dict[str, RunRow] = {}
    for run_id, row in zip(runs, rows, strict=False):
        if row is None:
            raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
        if row[HIDES] and ticks[run_id]:  # asked (a guess never holds it): a cut's frames go
            row = _drop_hidden(db, run_id, row, row[2] - ticks[run_id])
        row_of[run_id] = row
        next_no[run_id] = row[2] - ticks[run_id] + 1
    early = {id(change): rows[i] for change, i in wanted}
    created: list[tuple[Any, ...]] = []  # rows of new runs inserted with the frames
    for entry in entries:
        if entry.create is not None:
            row = (*entry.create, _ticks(entry) - 1, stamp, stamp)
            if any(change.executes for change in entry.changes):
                db.count(sql.insert_run, row)  # before the projections that need it
            else:
                created.append(row)
            no = 0
        else:
            row = row_of[entry.run_id]
            if entry.fence is not None:
                check_fence(entry.run_id, row[0], row[1], entry.fence)
            for change in entry.changes:
                change.check(row)
            no = next_no[entry.run_id]
            next_no[entry.run_id] = no + _ticks(entry)
        frames = entry.frames = []
        for change in entry.changes:
            frame = change.apply(w, no, early.get(id(change)))
            if change.ticks:
                frames.append(frame)  # type: ignore[arg-type]  # not None: it ticks
                no += 1
    _learn(db, entries, row_of)
    final: list[tuple[str, Any, bool]] = [(sql.insert_run, created, True)] if created else []
    final += [(s, r, True) for s, r in w.deferred.items()]
    inserted = w.inserted
    frame_rows = [
        frame_values(f) for entry in entries for f in entry.frames if id(f) not in inserted
    ]
    if frame_rows:
        final.append((sql.insert_frame, frame_rows, True))
    if final:
        db.later(final)  # on PostgreSQL, with the COMMIT when nothing else follows
    return list(entries)


HIDES = RunClock._fields.index("hides")


def _drop_hidden(db: Driver, run_id: str, row: RunRow, clock: int) -> RunRow:
    """Delete the frames a rewind left above ``clock`` (the run's clock before this write,
    whose frames take their numbers), and the live rows the run's rewinds kept, and unmark
    the run; return its row as it now is.

    What undo could have shown again is gone once the history goes on from the cut
    (``undoable``: a rewind with frames on top is out of reach, and so is every rewind before
    it), so they are deleted here, by the first write that needs their numbers, instead of
    by the rewind. The rewinds' own rows stay, saying why they cannot be undone, until
    garbage collection releases them."""
    sql = db.sql
    db.count(sql.drop_hidden, (run_id, clock))
    for statement in sql.drop_kept:
        db.count(statement, (run_id,))
    db.count(sql.unmark_hidden, (run_id,))
    return (*row[:HIDES], None, *row[HIDES + 1 :])


def _guess(
    w: Write, known: Mapping[Any, Any], entries: Sequence[Entry], runs: list[str], ticks: dict
) -> tuple[list[Any], list[tuple[Change, int]]] | None:
    """Send the clock's advances and the early steps as guarded guesses (held back to go
    with the COMMIT); return what they are guessed to return (as :func:`write`'s steps
    would, and the changes with an early step, with its index), or None (nothing sent) where
    something is not known, or a guess would fail a check: a refusal is the database's."""
    steps: list[tuple[str, Any, bool]] = []
    rows: list[Any] = []
    wanted: list[tuple[Change, int]] = []
    for run_id in runs:
        row = known.get(("run", run_id))
        if row is None:
            return None
        n = ticks[run_id]
        if row[HIDES]:  # the frames above the clock go first: ask
            return None
        steps.append((w.sql.advance_run_if, (n, w.stamp, run_id, *row[:HIDES]), False))
        rows.append((*row[:2], row[2] + n, *row[3:]))
    row_of = dict(zip(runs, rows, strict=True))
    for entry in entries:
        if entry.create is not None:
            return None
        row = row_of[entry.run_id]
        try:
            if entry.fence is not None:
                check_fence(entry.run_id, row[0], row[1], entry.fence)
            for change in entry.changes:
                change.check(row)
        except Exception:  # a guess refuses nothing: ask (the answer may)
            return None
        for change in entry.changes:
            guessed = change.guess(w)
            if guessed is False:
                return None
            if guessed is not None:
                step, early = guessed
                wanted.append((change, len(rows)))
                if step is not None:  # None: the change's own statement checks it
                    steps.append((step[0], step[1], False))
                rows.append(early)
    w.db.later(steps)
    return rows, wanted


def _learn(db: Driver, entries: Sequence[Entry], row_of: dict[str, RunRow]) -> None:
    """Teach the engine each run's row as this write leaves it, where every change keeps it
    as the clock's advance returned it (see :meth:`Change.keeps_run`)."""
    for run_id, row in row_of.items():
        kept = all(
            change.keeps_run
            for entry in entries
            if entry.run_id == run_id
            for change in entry.changes
        )
        db.learn(("run", run_id), tuple(row) if kept else None)


def _ticks(entry: Entry) -> int:
    return sum(change.ticks for change in entry.changes)


def check_fence(run_id: str, status: str, epoch: int, fence: Fence) -> None:
    """Raise :class:`FenceLost` unless ``fence`` owns the run, ``running`` under ``epoch``."""
    if status != "running" or epoch != fence.epoch:
        raise FenceLost(
            f"run {run_id} is {status} under epoch {epoch}; epoch "
            f"{fence.epoch} lost ownership and wrote nothing",
            run_id=run_id,
            epoch=fence.epoch,
        )


def notify(w: Write, run_id: str) -> None:
    """Tell the executor of ``run_id``, wherever it runs, that the run changed in a way it
    must see (a cancel, breakpoints, its fence): on PostgreSQL a ``pg_notify`` sent with the
    frames (no round trip of its own), delivered only if the transaction commits (see
    :mod:`smithers_tt.store.backend._notify`); nothing where executors poll (SQLite)."""
    if w.sql.notify_run is not None:
        w.defer(w.sql.notify_run, (run_id,))


def json_or_none(value: Any, **options: Any) -> str | None:
    """Canonical JSON text or None; ``options`` go to :func:`canonical_bytes`."""
    return None if value is None else canonical_bytes(value, **options).decode("utf-8")


# --- the changes ------------------------------------------------------------------------


class Note(Change):
    """A frame with no projection (the run's row is all it changes: its clock)."""

    __slots__ = ("fields", "kind", "run_id")

    keeps_run = True

    executes = False

    def __init__(self, run_id: str, kind: str, **fields: Any) -> None:
        self.run_id, self.kind, self.fields = run_id, kind, fields

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        return Frame(self.run_id, frame_no, self.kind, created_at_ms=w.stamp, **self.fields)


class RunClaimed(Change):
    """The run is owned by ``owner_id`` under ``epoch`` (its previous owners are fenced)."""

    __slots__ = ("data", "epoch", "owner_id", "run_id")

    def __init__(self, run_id: str, epoch: int, owner_id: str | None, data: dict) -> None:
        self.run_id, self.epoch, self.owner_id, self.data = run_id, epoch, owner_id, data

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        w.db.count(w.sql.claim_run, (self.epoch, self.owner_id, w.stamp, self.run_id))
        notify(w, self.run_id)
        return Frame(
            self.run_id, frame_no, "run_claimed", state="running", data=self.data,
            created_at_ms=w.stamp,
        )  # fmt: skip


class RunEnded(Change):
    """The run ends ``finished`` or ``failed`` (a new epoch fences every later write)."""

    __slots__ = ("error", "output", "run_id", "status")

    def __init__(self, run_id: str, status: str, output: Any, error: str | None) -> None:
        self.run_id, self.status, self.output, self.error = run_id, status, output, error

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        # Task id -> output: one level around outputs that may nest to the bound.
        output = json_or_none(self.output, subject="run output", wrapping=1)
        w.db.count(w.sql.end_run, (self.status, output, self.error, self.run_id))
        return Frame(
            self.run_id, frame_no, f"run_{self.status}", state=self.status,
            data={"output": self.output, "error": self.error}, created_at_ms=w.stamp,
        )  # fmt: skip


class RunCancelled(Change):
    """The run is ``cancelled`` now (a new epoch fences every writer)."""

    __slots__ = ("run_id",)

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        w.db.count(w.sql.cancel_run, (True, self.run_id))
        notify(w, self.run_id)
        return Frame(
            self.run_id, frame_no, "run_cancelled", state="cancelled", created_at_ms=w.stamp
        )


class CancelRequested(Change):
    """The run's owner is asked to cancel it."""

    __slots__ = ("run_id",)

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        w.db.count(w.sql.request_cancel, (True, self.run_id))
        notify(w, self.run_id)
        return Frame(self.run_id, frame_no, "cancel_requested", created_at_ms=w.stamp)


def key_tuple(key: AttemptKey) -> tuple[str, str, int, int]:
    """An attempt key as statement parameters."""
    return (key.run_id, key.node_id, key.iteration, key.attempt)


# --- writes that add no frame -----------------------------------------------------------


def touch(db: Driver, fences: Sequence[Fence], stamp: int) -> list[Fence]:
    """Heartbeat the runs ``fences`` own (their ``heartbeat_at_ms`` becomes ``stamp``); return
    the fences that no longer own their run (nothing is written for those).

    A heartbeat is not a change to a run: no frame, no clock tick, so an idle owner never
    grows the history. It stays one statement per run, the fence rule of :func:`check_fence`
    (``running`` under the fence's epoch) written as its WHERE clause.
    """
    sql = db.sql
    return [
        fence
        for fence in fences
        if not db.count(sql.heartbeat_run, (stamp, fence.run_id, fence.epoch))
    ]


class RunReleased(Change):
    """The run goes back to the queue under a new epoch (fencing its owner's late writes),
    in a ``run_released`` frame; the attempts it leaves open end ``interrupted`` in their own
    frames, and the next claim writes ``run_claimed``."""

    __slots__ = ("run_id",)

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        w.db.count(w.sql.hand_back_run, ("queued", self.run_id))
        notify(w, self.run_id)
        return Frame(self.run_id, frame_no, "run_released", state="queued", created_at_ms=w.stamp)
