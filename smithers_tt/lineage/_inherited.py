"""What forks by reference inherit, as rows of the tables the views read.

A fork made by reference has no live nodes, attempts or refs of its own until it is
materialised: it reads its parent's history. So that the views show it as they show any other
run, the lineage adds the rows materialising it would write: its nodes, attempts and refs, and
its base frames (numbered up to -1: the ``frames`` view and ``frame_count`` count only frames
from 0), which replace the base frames it holds already (its edited checkpoints, restated with
the rest). They are computed by the code that materialises
(:func:`smithers_tt.timetravel.materialized_rows`, in one read-only transaction), so the lineage
shows what materialisation writes. The ``raw`` tables are the store's rows plus these
(:func:`smithers_tt.lineage._connect.create_raw_views`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt._opened import OpenedDatabase
from smithers_tt.lineage._connect import attach_read_only, ident, insert_rows, literal
from smithers_tt.lineage._views import INHERITED, MIRRORED, arrow_type, raw_columns


def inherited_rows(db: OpenedDatabase) -> dict[str, list[dict[str, Any]]]:
    """The rows every fork by reference of ``db`` would have once materialised, by table."""
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in INHERITED}
    for tables in tt.materialized_rows(db.store).values():
        for name, found in tables.items():
            rows[name] += found
    return rows


def add_inherited(con: Any, db: OpenedDatabase, path: Path, keep: Path | None = None) -> None:
    """Attach the catalog ``inherited`` of ``con``: a DuckDB file at ``path``, read-only, with
    one table per :data:`~smithers_tt.lineage._views.INHERITED` (the store table's columns
    and types) holding :func:`inherited_rows`. Read-only, so that no statement can add rows
    the views would answer with (``COPY inherited.tt_nodes FROM ...``). The file is unlinked
    once attached (a second name for it at ``keep``, when given, to attach it again)."""
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
    attach_read_only(con, "inherited", path, keep)
