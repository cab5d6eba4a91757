"""Writing the whole history of a run at once, for tools that make large runs quickly.

Executing a run of 10,000 frames through the engine costs one durable commit per change;
:func:`write_history` writes the same rows (content, frames, live nodes, attempts and refs,
the run's end) in one transaction of multi-row statements instead. The caller computes the
frames and the live rows they fold to (``smithers_tt.testing.large_run`` does, with
:func:`smithers_tt.timetravel.live_rows`); the store only writes them, so what it writes
reads exactly like a run the engine executed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import EncodedCheckpoint
from smithers_tt.errors import InvalidArgument
from smithers_tt.store._frames import Frame
from smithers_tt.store._records import CheckpointRef, now_ms
from smithers_tt.store.backend import Engine, driver
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger._live import LiveWrites, insert_rows
from smithers_tt.store.ledger._travel import HistoryEnded, Restated
from smithers_tt.store.ledger._write import Entry, write
from smithers_tt.store.reads import stored_sizes

Row = Mapping[str, Any]
"""Column values of one row, by column name."""


def write_history(
    engine: Engine,
    run_id: str,
    frames: Sequence[Frame],
    contents: Iterable[EncodedCheckpoint],
    *,
    nodes: Sequence[Row],
    attempts: Sequence[Row],
    refs: Iterable[CheckpointRef],
    status: str,
    output: Any,
) -> None:
    """Append ``frames`` to a run and end it, in one transaction.

    Stores the ``contents`` not stored yet, inserts ``frames`` (numbered densely from the
    run's clock + 1), replaces the run's live ``nodes`` and ``attempts`` (rows of
    ``tt_nodes`` and ``tt_attempts``) and ``refs`` (what the frames fold to), and sets the
    run's clock to the last frame, its ``status`` and ``output``. The owner epoch grows, so
    the fence that created the run no longer owns it. The rows go in with the multi-row
    statements time travel uses (:class:`Travel`), the frames through the ledger (one
    ``executemany``).

    Raises:
        InvalidArgument: ``frames`` is empty, belongs to another run or is not numbered densely.
        RunNotFound: no such run.
    """
    if not frames:
        raise InvalidArgument("a history needs at least one frame")
    first = frames[0].frame_no
    if any(f.run_id != run_id or f.frame_no != first + i for i, f in enumerate(frames)):
        raise InvalidArgument(f"frames of run {run_id} must be numbered densely, in order")
    contents_by_hash = {e.content_hash: e for e in contents}
    live_refs = list(refs)

    def work(conn: Connection) -> None:
        live = LiveWrites(conn)
        stamp = now_ms()

        def project() -> None:
            stored = stored_sizes(conn, list(contents_by_hash))
            insert_rows(
                conn,
                S.contents,
                [
                    {
                        "content_hash": h,
                        "data": e.data,
                        "size_bytes": e.size,
                        "created_at_ms": stamp,
                    }
                    for h, e in contents_by_hash.items()
                    if h not in stored
                ],
            )

        # Through the ledger: the run row is locked first (it serialises the run's writers,
        # as every change to a run does), the clock advanced once for all the frames.
        changes = [Restated(f) for f in frames[:-1]]
        changes.append(HistoryEnded(conn, frames[-1], status, output, project))
        with driver(conn) as db:
            write(db, [Entry(run_id, None, changes)], stamp)
        # After the frames: each live ref points at its checkpoint frame.
        live.replace_live_state(run_id, nodes, attempts, live_refs, None)

    engine.transaction(work)
