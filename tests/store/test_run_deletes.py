"""Runs are deleted only through ``delete_runs``, and no way of deleting runs leaves kept
rewinds behind.

:func:`smithers_tt.store.ledger._travel.delete_runs` is the one way: it deletes the runs and
releases their kept rewinds (the frames a rewind hid are rows of ``tt_frame_rows`` above the
run's clock, which go with their run, as its kept rewinds' rows do, by foreign key, since
migration 0020; before it, kept frames had a table of their own that nothing cascaded to). The
scan below fails on any statement deleting runs or rewinds elsewhere in the package; the
behaviour tests delete rewound runs every public way there is and look for orphans.

Already covered elsewhere (not repeated here): retention with ``keep_forks=False`` of plain
runs (``tests/timetravel/test_undo_rewind.py``) and ``SmithersSaver.delete_thread``
(``tests/integrations/test_langgraph_saver.py``).
"""

from __future__ import annotations

import ast
import asyncio
import datetime
import inspect
import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import NothingToUndo
from smithers_tt.store._records import now_ms
from smithers_tt.store.backend import _schema as S
from smithers_tt.store.ledger import _travel as _ledger_travel

PACKAGE = Path(st.__file__).resolve().parent
ROOT = PACKAGE.parent
OWNER = Path(inspect.getsourcefile(_ledger_travel.delete_runs) or "").resolve()
"""The one module allowed to delete these tables: the one defining ``delete_runs``."""

GUARDED = {S.runs.name: "runs", S.rewinds.name: "rewinds"}
"""Table names (``tt_runs``...) and the names of their ``Table`` objects in ``_schema``."""
TABLE_ATTRS = set(GUARDED.values())

SQL_DELETE = re.compile(
    r"\b(?:DELETE\s+FROM|TRUNCATE(?:\s+TABLE)?)\s+(?:ONLY\s+)?"
    r"(?:[\"`\[]?\w+[\"`\]]?\.)?[\"`\[]?(" + "|".join(GUARDED) + r")\b",
    re.IGNORECASE,
)
"""SQL text deleting from a guarded table (any case and spacing, quoted or schema-qualified)."""

ADVICE = (
    "delete runs only through smithers_tt.store.ledger._travel.delete_runs(conn, run_ids, ...), "
    "which releases the rewinds the runs keep; a rewind itself is released only in that "
    "module too (RewindUndone, delete_runs, release_rewinds)"
)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    table: str
    code: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: deletes from {self.table}: {self.code}"


# --- the scanner ----------------------------------------------------------------------------


def _text(node: ast.AST) -> str | None:
    """The SQL text an expression spells: a string, an f-string (placeholders as ``{}``) or
    strings added together."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(v) or "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        if left is not None or right is not None:
            return (left or "{}") + (right or "{}")
    return None


def _inside_text(node: ast.AST) -> bool:
    """A part of a larger text (an f-string's, or a sum's): that text is scanned whole."""
    parent = getattr(node, "parent", None)
    if isinstance(parent, ast.JoinedStr | ast.FormattedValue):
        return True
    return (
        isinstance(parent, ast.BinOp)
        and isinstance(parent.op, ast.Add)
        and (_text(parent) is not None)
    )


class _Scope:
    """Names bound in one module or function: those bound to the ``_schema`` module, and
    those bound (anywhere in the scope: conservative) to a guarded table."""

    def __init__(self, parent: _Scope | None) -> None:
        self.schemas: set[str] = set(parent.schemas) if parent else set()
        self.tables: dict[str, str] = dict(parent.tables) if parent else {}


def _body_nodes(root: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a scope, not descending into nested functions, classes or lambdas."""
    stack = list(ast.iter_child_nodes(root))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


class _Scanner:
    def __init__(self, path: str, source: str) -> None:
        self.path, self.source = path, source
        self.findings: list[Finding] = []

    def table(self, node: ast.AST | None, scope: _Scope) -> str | None:
        """The guarded table an expression is, if any: ``S.runs``, a name bound to it,
        ``sa.table("tt_runs")``, ``metadata.tables["tt_runs"]``, ``S.runs.alias()``..."""
        if isinstance(node, ast.Name):
            return scope.tables.get(node.id)
        if isinstance(node, ast.Attribute):
            base = node.value
            if node.attr in TABLE_ATTRS and (
                (isinstance(base, ast.Name) and base.id in scope.schemas)
                or (isinstance(base, ast.Attribute) and base.attr == "_schema")
            ):
                return f"tt_{node.attr}"
            return None
        if isinstance(node, ast.Subscript):
            return self.table(node.slice, scope) or self._named(node.slice)
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name.lower() in {"table", "alias", "select_from"}:
                if isinstance(func, ast.Attribute) and (hit := self.table(func.value, scope)):
                    return hit  # S.runs.alias("child")
                if node.args:
                    return self._named(node.args[0])
        return None

    @staticmethod
    def _named(node: ast.AST) -> str | None:
        text = _text(node)
        return text if text in GUARDED else None

    def bind(self, target: ast.AST, value: ast.AST, scope: _Scope) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts, strict=True):
                    self.bind(t, v, scope)
            return
        if isinstance(target, ast.Name) and (hit := self.table(value, scope)):
            scope.tables[target.id] = hit

    def collect(self, root: ast.AST, scope: _Scope) -> None:
        """Bind the scope's names (twice: a binding may use one made after it)."""
        for _ in range(2):
            for node in _body_nodes(root):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    module = getattr(node, "module", None) or ""
                    for alias in node.names:
                        full = f"{module}.{alias.name}" if module else alias.name
                        local = alias.asname or alias.name.split(".")[0]
                        if (
                            full.endswith(("store.backend._schema", "store.backend.schema"))
                            or full == "_schema"
                        ):
                            scope.schemas.add(local)
                        elif module.endswith("store.backend._schema") and alias.name in TABLE_ATTRS:
                            scope.tables[local] = f"tt_{alias.name}"
                elif isinstance(node, ast.Assign):
                    for target in node.targets:
                        self.bind(target, node.value, scope)
                elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
                    self.bind(node.target, node.value, scope)
                elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                    seq = node.iter
                    if isinstance(seq, ast.Tuple | ast.List | ast.Set):
                        for item in seq.elts:  # for table in (S.refs, S.runs): table.delete()
                            self.bind(node.target, item, scope)

    def check(self, root: ast.AST, scope: _Scope) -> None:
        for node in _body_nodes(root):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inner = _Scope(scope)
                self.collect(node, inner)
                self.check(node, inner)
            elif isinstance(node, ast.ClassDef):
                self.check(node, scope)
            elif isinstance(node, ast.Call):
                self.check_call(node, scope)
            elif (text := _text(node)) is not None and not _inside_text(node):
                self.check_text(node, text)

    def check_text(self, node: ast.AST, text: str) -> None:
        if match := SQL_DELETE.search(text):
            self.found(node, match.group(1).lower())

    def check_call(self, node: ast.Call, scope: _Scope) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if "delete" not in name.lower() or name == "delete_runs":
            return
        # runs.delete(), S.runs.delete(), sa.table("tt_runs").delete()
        if isinstance(func, ast.Attribute) and (hit := self.table(func.value, scope)):
            self.found(node, hit)
            return
        # sa.delete(S.runs), delete(r), dialect.delete_keys(conn, S.rewinds, ...)
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if hit := self.table(arg, scope) or self._named(arg):
                self.found(node, hit)
                return

    def found(self, node: ast.AST, table: str) -> None:
        code = ast.get_source_segment(self.source, node) or ast.dump(node)
        line = getattr(node, "lineno", 0)
        self.findings.append(Finding(self.path, line, table, " ".join(code.split())[:120]))


def scan_source(source: str, path: str = "<sample>") -> list[Finding]:
    """Every deletion of a guarded table in a module's source."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node  # type: ignore[attr-defined]
    scanner = _Scanner(path, source)
    scope = _Scope(None)
    scanner.collect(tree, scope)
    scanner.check(tree, scope)
    return scanner.findings


def package_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def scan_package() -> list[Finding]:
    findings: list[Finding] = []
    for path in package_modules():
        if path.resolve() == OWNER:
            continue
        rel = str(path.relative_to(ROOT))
        findings.extend(scan_source(path.read_text(encoding="utf-8"), rel))
    return findings


# --- the guard ------------------------------------------------------------------------------


def test_no_module_but_delete_runs_own_deletes_runs_or_rewinds() -> None:
    assert OWNER.parts[-2:] == ("ledger", "_travel.py") and OWNER.is_file()
    assert len(package_modules()) > 50  # it scanned the package, not an empty directory
    findings = scan_package()
    assert not findings, (
        "runs (or rewinds, or kept frames) deleted outside delete_runs:\n"
        + "\n".join(f"  {f}" for f in findings)
        + f"\n{ADVICE}"
    )


def test_the_scanner_sees_the_deletes_of_the_module_it_allows() -> None:
    # The module defining delete_runs is skipped only because it is allowed: scanned, its
    # deletes of runs and rewinds are all found (the scan is not blind).
    findings = scan_source(OWNER.read_text(encoding="utf-8"), OWNER.name)
    assert {f.table for f in findings} == set(GUARDED), findings
    assert any("r.delete()" in f.code for f in findings)


PLANTED = {
    "sql text": 'conn.exec_driver_sql("DELETE FROM tt_runs WHERE run_id = ?", (run_id,))',
    "sql lower case, spacing": 'sql = "delete\\n   from  tt_runs where status = :s"',
    "sql quoted": "q('DELETE FROM \"tt_rewinds\" WHERE rewind_id = ?')",
    "sql schema-qualified": 'q("DELETE FROM public.tt_rewinds")',
    "sql concatenated": 'q("DELETE FROM " "tt_runs " "WHERE run_id = ?")',
    "sql added": 'q("DELETE FROM " + "tt_runs")',
    "sql f-string": 'q(f"DELETE FROM tt_runs WHERE run_id IN ({marks})")',
    "sql truncate": 'q("TRUNCATE TABLE tt_runs")',
    "sa.delete": "conn.execute(sa.delete(S.runs).where(S.runs.c.run_id == x))",
    "delete keyword": "conn.execute(delete(table=S.rewinds))",
    "table.delete": "conn.execute(S.runs.delete())",
    "alias": "r = S.runs\nconn.execute(r.delete().where(r.c.run_id == x))",
    "tuple alias": ("def f(conn):\n    r, rw = S.runs, S.rewinds\n    conn.execute(rw.delete())\n"),
    "loop": "for table in (S.refs, S.runs):\n    conn.execute(table.delete())",
    "from import": (
        "from smithers_tt.store.backend._schema import runs\nconn.execute(runs.delete())"
    ),
    "module import": (
        "import smithers_tt.store.backend._schema as schema\nconn.execute(schema.rewinds.delete())"
    ),
    "lightweight table": 'conn.execute(sa.table("tt_runs").delete())',
    "metadata lookup": 'conn.execute(sa.delete(metadata.tables["tt_runs"]))',
    "alias of a table": 'c = S.runs.alias("c")\nconn.execute(sa.delete(c))',
    "dialect helper": "dialect.delete_keys(conn, S.rewinds, run_id, names, keys)",
    "nested function": (
        "def outer(conn):\n"
        "    r = S.runs\n"
        "    def inner():\n"
        "        conn.execute(r.delete())\n"
        "    inner()\n"
    ),
}


@pytest.mark.parametrize("source", list(PLANTED.values()), ids=list(PLANTED))
def test_the_scanner_flags_a_planted_delete_of_runs(source: str) -> None:
    findings = scan_source("from smithers_tt.store.backend import schema as S\n" + source)
    assert findings, source
    assert {f.table for f in findings} <= set(GUARDED)
    message = str(findings[0])
    assert message.startswith("<sample>:") and "deletes from tt_" in message


CLEAN = {
    "other table sql": 'q("DELETE FROM tt_attempts WHERE run_id = ?")',
    "prefix of a name": 'q("DELETE FROM tt_runs_archive")',
    "select": 'q("SELECT run_id FROM tt_runs")',
    "other table": "conn.execute(S.refs.delete())",
    "the right way": "gone = delete_runs(conn, ids)\ntx.delete_runs(thread_id)",
    "name bound in another function": (
        "def a():\n    r = S.runs\n    return r.c.run_id\n"
        "def b(conn):\n    r = S.refs\n    conn.execute(r.delete())\n"
    ),
    "loop without runs": "for table in (S.refs, S.attempts):\n    conn.execute(table.delete())",
    "a column": "conn.execute(S.frames.delete().where(S.frames.c.run_id == S.runs.c.run_id))",
}


@pytest.mark.parametrize("source", list(CLEAN.values()), ids=list(CLEAN))
def test_the_scanner_leaves_other_deletes_alone(source: str) -> None:
    assert scan_source("from smithers_tt.store.backend import schema as S\n" + source) == []


def test_a_finding_says_where_and_what_to_use_instead() -> None:
    source = "from smithers_tt.store.backend import schema as S\n\n\nx = S.runs.delete()\n"
    (finding,) = scan_source(source, "smithers_tt/store/_new.py")
    assert str(finding) == "smithers_tt/store/_new.py:4: deletes from tt_runs: S.runs.delete()"
    assert "delete_runs" in ADVICE


# --- behaviour: every way of deleting runs takes their kept rewinds -----------------------


def _kept(db: st.Database, run_ids: list[str]) -> dict[str, int]:
    """Rows of the rewinds of ``run_ids`` and of the frames they hid (stored above their
    run's clock, or with no run at all)."""
    rw, f, r = S.rewinds, S.frame_rows, S.runs
    with db.engine.connect(write=False) as conn:
        ids = list(
            conn.execute(sa.select(rw.c.rewind_id).where(rw.c.run_id.in_(run_ids))).scalars()
        )
        shown = sa.exists().where(r.c.run_id == f.c.run_id, r.c.clock >= f.c.frame_no)
        frames = conn.execute(
            sa.select(sa.func.count()).select_from(f).where(f.c.run_id.in_(run_ids), ~shown)
        ).scalar_one()
    return {"tt_rewinds": len(ids), "hidden frames": frames}


def _orphans(db: st.Database) -> dict[str, int]:
    """Rows whose run is gone (a foreign key should stop both)."""
    r, rw, f = S.runs, S.rewinds, S.frame_rows
    with db.engine.connect(write=False) as conn:
        count = sa.select(sa.func.count())
        return {
            "rewinds without run": conn.execute(
                count.select_from(rw).where(~sa.exists().where(r.c.run_id == rw.c.run_id))
            ).scalar_one(),
            "frames without run": conn.execute(
                count.select_from(f).where(~sa.exists().where(r.c.run_id == f.c.run_id))
            ).scalar_one(),
        }


NONE = {"rewinds without run": 0, "frames without run": 0}


def _age(db: st.Database, days: int = 3) -> None:
    with db.engine.sa.begin() as conn:
        conn.execute(S.runs.update().values(updated_at_ms=now_ms() - days * 86_400_000))


@pytest.mark.parametrize("keep_forks", [True, False], ids=["keep_forks", "drop_forks"])
def test_retention_of_a_fork_tree_leaves_no_kept_rewind_of_its_runs(
    db: st.Database, keep_forks: bool
) -> None:
    # Parent and fork both rewound (and finished again, so retention takes them). Keeping
    # forks, the fork goes in a first pass and the parent in a second; dropping them, the
    # fork (by reference) is materialised first. Either way both go, with their kept rewinds.
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    parent = db.run(wf, {"topic": "bee"})
    db.rewind(parent.id, 5, confirm=True)
    db.resume(parent.id, wf)
    child = db.fork(parent.id, 6)
    db.resume(child.id, wf)
    db.rewind(child.id, 8, confirm=True)
    db.resume(child.id, wf)
    ids = [parent.id, child.id]
    # Resumed after each rewind: the rewinds are kept (unreachable: gc releases them), the
    # frames they hid were dropped by the first frame written on top.
    assert _kept(db, ids) == {"tt_rewinds": 2, "hidden frames": 0}
    _age(db)

    report = db.gc(datetime.timedelta(days=1), keep_forks=keep_forks)

    assert report.runs_deleted == 2
    assert _kept(db, ids) == {"tt_rewinds": 0, "hidden frames": 0}
    assert _orphans(db) == NONE
    assert db.verify().ok


def test_retention_materialises_a_recent_fork_and_takes_its_old_parents_rewinds(
    db: st.Database,
) -> None:
    # Dropping forks, a recent fork by reference of an old rewound parent gets its own copy
    # first; then only the parent goes, with its kept rewind, and the fork reads the same.
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    parent = db.run(wf, {"topic": "bee"})
    db.rewind(parent.id, 5, confirm=True)
    db.resume(parent.id, wf)
    child = db.fork(parent.id, 6)  # by reference, not resumed: it reads its parent's frames
    snapshot = child.snapshot()
    assert _kept(db, [parent.id])["tt_rewinds"] == 1
    _age(db)

    report = db.gc(datetime.timedelta(days=1), keep_forks=False)

    assert report.runs_deleted == 1 and report.forks_materialised == 1
    assert _kept(db, [parent.id]) == {"tt_rewinds": 0, "hidden frames": 0}
    assert _orphans(db) == NONE
    assert child.snapshot() == snapshot
    assert db.verify().ok


# --- behaviour: LangGraph threads -------------------------------------------------------------


class _State(TypedDict):
    topic: str
    notes: Annotated[list[str], operator.add]
    count: int


def _thread(db: st.Database, thread_id: str) -> tuple[Any, str]:
    """A saver with a finished thread, rewound (its later frames kept for undo)."""
    pytest.importorskip("langgraph.graph")
    from langgraph.graph import END, START, StateGraph

    from smithers_tt.integrations.langgraph import SmithersSaver

    def research(state: _State) -> dict:
        return {"notes": [f"{state['topic']} #{state['count']}"], "count": state["count"] + 1}

    graph = StateGraph(_State)
    graph.add_node("research", research)
    graph.add_edge(START, "research")
    graph.add_conditional_edges("research", lambda s: "research" if s["count"] < 3 else END)
    saver = SmithersSaver(db)
    config = {"configurable": {"thread_id": thread_id}}
    graph.compile(checkpointer=saver).invoke({"topic": "t" * 300, "notes": [], "count": 0}, config)
    run_id = saver.run_id(thread_id)
    db.rewind(run_id, 7, confirm=True)  # two of its five checkpoints left
    kept = _kept(db, [run_id])
    assert kept["tt_rewinds"] == 1 and kept["hidden frames"] > 0
    return saver, run_id


@pytest.mark.parametrize("how", ["adelete_thread", "prune_delete"])
def test_deleting_a_langgraph_thread_another_way_takes_its_kept_rewinds(
    db: st.Database, how: str
) -> None:
    # SmithersSaver.delete_thread itself is covered in tests/integrations/test_langgraph_saver.
    saver, run_id = _thread(db, "t")
    if how == "adelete_thread":
        asyncio.run(saver.adelete_thread("t"))
    else:
        saver.prune(["t"], strategy="delete")
    with pytest.raises(st.RunNotFound):
        db.get_run(run_id)
    assert _kept(db, [run_id]) == {"tt_rewinds": 0, "hidden frames": 0}
    assert _orphans(db) == NONE


def test_pruning_a_langgraph_thread_to_its_latest_takes_the_old_runs_kept_rewinds(
    db: st.Database,
) -> None:
    # keep_latest deletes the thread's runs and writes new ones under the same ids: the old
    # run's rewind must not survive into the new run (nor its kept frames as orphans).
    saver, run_id = _thread(db, "t")
    saver.prune(["t"], strategy="keep_latest")
    assert db.get_run(run_id).record.clock >= 0  # the same id again, a new run
    assert _kept(db, [run_id]) == {"tt_rewinds": 0, "hidden frames": 0}
    assert _orphans(db) == NONE
    with pytest.raises(NothingToUndo):
        db.undo_rewind(run_id)
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None
