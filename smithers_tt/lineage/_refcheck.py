"""A checkpoint ref is checked against its frame on every read that follows it.

A ref names its frame (``frame_no``); it agrees with it when that frame is the checkpoint frame
of the ref's own node, iteration, attempt and sequence: the rule ``smithers-tt verify`` applies
(:func:`smithers_tt.store.verify`, its ``mismatched`` refs), plus a frame that is missing. Only a
hand edit or a damaged database breaks it. The views that follow refs to their frames
(``checkpoints``, and ``contents``, ``dedup``, ``run_dedup`` through it) read :data:`REFS`:
refs left-joined to their frames, raising (DuckDB's ``error()``) on the first ref that
disagrees, so a query fails instead of answering with another checkpoint's content or leaving
the ref out. :func:`corrupt_ref` turns that failure into
:class:`~smithers_tt.errors.StoreCorrupt`. ``raw.*`` stays as stored, to look at the damage.
"""

from __future__ import annotations

from smithers_tt.errors import StoreCorrupt

MARK = "smithers_tt: checkpoint ref "
"""How the message raised in SQL starts (see :func:`corrupt_ref`)."""

_AGREES = """f.kind = 'checkpoint' AND f.node_id = r.node_id AND f.iteration = r.iteration
    AND f.attempt = r.attempt AND f.sequence = r.sequence"""

_WHY = f"""'{MARK}(run ' || r.run_id || ', node ' || r.node_id || ', iteration ' || r.iteration
    || ', attempt ' || r.attempt || ', sequence ' || r.sequence || ') names frame '
    || r.frame_no || ', which ' || CASE
        WHEN f.run_id IS NULL THEN 'is missing'
        WHEN f.kind <> 'checkpoint' THEN 'is not a checkpoint but a ' || f.kind || ' frame'
        ELSE 'is the checkpoint of another node, attempt or sequence' END
    || ': the store was changed by hand or is damaged. Run smithers-tt verify to list every '
    || 'such ref, and restore the database from a backup'"""

FRAME_COLUMNS = (
    "codec",
    "version",
    "purpose",
    "agent_id",
    "content_hash",
    "size_bytes",
    "created_at_ms",
)
"""What a ref reads from its checkpoint frame."""


def _checked(column: str) -> str:
    return f"CASE WHEN {_AGREES} THEN f.{column} ELSE error({_WHY}) END AS {column}"


REFS = f"""(
    SELECT r.run_id, r.node_id, r.iteration, r.attempt, r.sequence,
           {", ".join(_checked(column) for column in FRAME_COLUMNS)}
    FROM raw.tt_checkpoint_refs AS r
    LEFT JOIN raw.tt_frames AS f ON f.run_id = r.run_id AND f.frame_no = r.frame_no
    WHERE CASE WHEN {_AGREES} THEN true ELSE error({_WHY}) END
)"""  # noqa: S608 (constants)
"""Every ref's key and :data:`FRAME_COLUMNS`, a relation that raises on a ref that disagrees.

The filter raises when a query reads the rows; each frame column raises too, so that no filter
or join on a frame column (``size_bytes IS NOT NULL`` would turn the left join into an inner
one) drops a ref that disagrees before the filter sees it."""


def corrupt_ref(message: str) -> StoreCorrupt | None:
    """:class:`StoreCorrupt` for a DuckDB error raised by :data:`REFS`, else None."""
    start = message.find(MARK)
    if start < 0:
        return None
    return StoreCorrupt(message[start:].splitlines()[0])
