"""The Store's changes to runs that the engine's hot path does not make: a claim under a new
epoch (also what a worker's claim does), the attempts a claim or a pause ends, an attempt
deleted, a ref restored with an explicit sequence."""

from __future__ import annotations

from typing import Any

from smithers_tt.errors import CheckpointMissing, RefConflict
from smithers_tt.store._frames import checkpoint_frame
from smithers_tt.store._records import AttemptKey, CheckpointRef, Frame, now_ms
from smithers_tt.store._ref_frame import ref_key
from smithers_tt.store.backend import Driver
from smithers_tt.store.ledger._node_changes import AttemptEnded
from smithers_tt.store.ledger._write import Change, Entry, RunClaimed, Write, key_tuple, write


def open_ends(db: Driver, run_id: str, state: str, before_epoch: int | None = None) -> list[Change]:
    """End, as ``state``, the attempts of a run left in progress (by epochs before
    ``before_epoch``); the caller has locked the run row, so none can start meanwhile."""
    return [
        AttemptEnded(AttemptKey(run_id, node, iteration, attempt), state, epoch, detail=False)
        for node, iteration, attempt, epoch in db.all(db.sql.open_attempts, (run_id,))
        if before_epoch is None or epoch < before_epoch
    ]


def claim(
    db: Driver, run_id: str, epoch: int, owner_id: str | None, data: dict[str, Any]
) -> list[Frame]:
    """Make ``owner_id`` the owner of a locked run under the new ``epoch``; attempts left in
    progress by earlier epochs become ``interrupted``. Returns the frames written."""
    changes: list[Change] = [RunClaimed(run_id, epoch, owner_id, data)]
    changes += open_ends(db, run_id, "interrupted", epoch)
    (entry,) = write(db, [Entry(run_id, None, changes)], now_ms())
    return entry.frames


class AttemptDeleted(Change):
    """An attempt and its refs are deleted (frameless: what remains of it is its frames)."""

    __slots__ = ("key",)

    ticks = 0

    def __init__(self, key: AttemptKey) -> None:
        self.key = key

    def apply(self, w: Write, frame_no: int, early: Any) -> None:
        w.db.count(w.sql.delete_attempt, key_tuple(self.key))


class RefPut(Change):
    """A ref with an explicit sequence (a restore, an import); identical re-insertion is a
    no-op (``existing``: what the key holds now, as :attr:`Statements.get_ref` reads it).

    A new ref writes a ``checkpoint`` frame of its own, stamped with the ref's
    ``created_at_ms``: the frame holds its hash, codec, version, purpose and agent, the ref row
    points at it (as a publish's does), and the content must be stored already.

    Raises:
        RefConflict: the same key already points at other content, codec, version or purpose.
        CheckpointMissing: no content is stored under the ref's hash.
    """

    __slots__ = ("existing", "ref", "result", "ticks")

    def __init__(self, ref: CheckpointRef, existing: Any) -> None:
        self.ref, self.existing = ref, existing
        self.ticks = 0 if existing is not None else 1
        self.result: CheckpointRef | None = None

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame | None:
        ref, db, existing = self.ref, w.db, self.existing
        key = ref_key(ref)
        if existing is None:
            size = db.one(w.sql.content_size, (ref.content_hash,))
            if size is None:
                raise CheckpointMissing(
                    f"no checkpoint content {ref.content_hash[:12]} is stored; store it "
                    "before restoring a ref to it"
                )
            # Keep the attempt's allocator past every stored sequence: a later publish into
            # this attempt must not be handed the sequence of a restored ref (a duplicate key
            # forever).
            db.count(w.sql.sequence_past, (ref.sequence + 1, *key[:4], ref.sequence))
            w.defer(w.sql.insert_ref, (*key, frame_no))
            self.result = ref
            return checkpoint_frame(ref, ref.run_id, frame_no, {"size": size[0]})
        if tuple(existing[:4]) != (ref.content_hash, ref.codec, ref.version, ref.purpose):
            raise RefConflict(
                f"checkpoint ref {ref.node_id}#{ref.attempt}.{ref.sequence} of run "
                f"{ref.run_id} already points at {existing[0][:12]} ({existing[1]} "
                f"v{existing[2]}, {existing[3]}); refs are immutable",
            )
        self.result = CheckpointRef(*key, *existing)
        return None
