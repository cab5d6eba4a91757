"""What forks by reference inherit, as rows of the tables the views read.

A fork made by reference has no live nodes, attempts or refs of its own until it is
materialised: it reads its parent's history. So that the views show it as they show any other
run, the lineage folds each such fork's snapshot (through time travel, in a read-only
transaction) and adds the rows it would have once materialised: its nodes, attempts and refs,
and for each inherited ref the checkpoint frame that restates it, numbered below the fork's
own frames (as a materialised fork's base frames are; the ``frames`` view and ``frame_count``
count only frames from 0). The ``raw`` tables are the store's rows plus these
(:func:`smithers_tt.lineage._connect.create_raw_views`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt._opened import OpenedDatabase
from smithers_tt.lineage._connect import attach_read_only, ident, insert_rows, literal
from smithers_tt.lineage._views import INHERITED, MIRRORED, arrow_type, raw_columns
from smithers_tt.store import travel
from smithers_tt.store.for_lineage import checkpoint_frame, content_sizes, frame_row


def inherited_rows(db: OpenedDatabase) -> dict[str, list[dict[str, Any]]]:
    """The rows every fork by reference of ``db`` would have once materialised, by table."""
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in INHERITED}
    forks = travel(db.engine, lambda tx: tx.inheriting_runs(), write=False)
    for run_id in forks:
        snap = db.snapshot(run_id)
        own = {
            (f.node_id, f.iteration, f.attempt, f.sequence): f.frame_no
            for f in db.store.frames(run_id, upto=-1)
            if f.kind == "checkpoint"
        }  # an edited checkpoint's own frame
        low = min([0, *own.values()])
        nodes, attempts = tt.live_rows(snap, run_id)
        rows["tt_nodes"] += nodes
        rows["tt_attempts"] += attempts
        sizes = content_sizes(db.engine, {r.content_hash for r in snap.refs.values()})
        for key in sorted(snap.refs):
            ref = snap.refs[key]
            frame_no = own.get(key)
            if frame_no is None:  # inherited: its restating frame, below the fork's own
                low -= 1
                frame_no = low
                frame = checkpoint_frame(
                    ref, run_id, frame_no, {"created_at_ms": ref.created_at_ms}
                )
                row = frame_row(frame)
                row["size_bytes"] = sizes.get(ref.content_hash)
                rows["tt_frames"].append(row)
            rows["tt_checkpoint_refs"].append(
                {"run_id": run_id, "node_id": key[0], "iteration": key[1], "attempt": key[2],
                 "sequence": key[3], "frame_no": frame_no}
            )  # fmt: skip
    return rows


def add_inherited(con: Any, db: OpenedDatabase, path: Path) -> None:
    """Attach the catalog ``inherited`` of ``con``: a DuckDB file at ``path``, read-only, with
    one table per :data:`~smithers_tt.lineage._views.INHERITED` (the store table's columns
    and types) holding :func:`inherited_rows`. Read-only, so that no statement can add rows
    the views would answer with (``COPY inherited.tt_nodes FROM ...``)."""
    rows = inherited_rows(db)
    con.execute(f"ATTACH {literal(str(path))} AS inherited")
    for table in MIRRORED:
        if table.name not in INHERITED:
            continue
        spec = raw_columns(table)
        name = f"inherited.{ident(table.name)}"
        con.execute(f"CREATE TABLE {name} ({', '.join(f'{ident(n)} {t}' for n, t in spec)})")
        if rows[table.name]:  # pyarrow (the lineage extra's) only read when some fork inherits
            names = [n for n, _ in spec]
            found = [[row[n] for n in names] for row in rows[table.name]]
            insert_rows(con, name, names, [arrow_type(t) for _, t in spec], found)
    con.execute("DETACH inherited")
    attach_read_only(con, "inherited", path)
