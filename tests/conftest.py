"""Shared fixtures: one database fixture parametrised over the backends.

SQLite (a real temporary file) always runs. PostgreSQL runs on the server of
``$SMITHERS_TT_TEST_PG_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``)
when it is reachable; when it is not, the PostgreSQL cases skip with the reason, or fail when
``SMITHERS_TT_REQUIRE_PG=1`` (CI sets it: there the PostgreSQL tests must run).

Every pytest process (each xdist worker, or the one process of a run without xdist) works in a
database of its own on that server, created on first use and dropped at the end of the
session, so that parallel workers never share a catalog, a table name or a lock. Inside it each
test gets a fresh schema (``pg_schema_url``, dropped afterwards); a test that only wants a
migrated store (``db``) gets a copy of one migrated once per process (``store_template``:
:mod:`tests._store_template`). Copying a migrated template database instead
(``CREATE DATABASE ... TEMPLATE``, then ``DROP DATABASE``) measured 0.4-0.7 s with two workers.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import sqlalchemy as sa

import smithers_tt as st
from tests._run_wide import run_wide
from tests._store_template import StoreTemplate
from tests.faults import PgProxy

SERVER_URL = os.environ.get(
    "SMITHERS_TT_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REQUIRE_PG = os.environ.get("SMITHERS_TT_REQUIRE_PG") == "1"

# This process's database on the test server: the worker's name (xdist) or "main", the pid and
# a random tail, so that concurrent runs of the suite on one server do not meet either.
_PROCESS_DB = (
    f"tt_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_{os.getpid()}_{secrets.token_hex(3)}"
)
PG_URL = sa.make_url(SERVER_URL).set(database=_PROCESS_DB).render_as_string(hide_password=False)

_pg_state: dict[str, str | None] = {}


def _server_admin() -> sa.Engine:
    """An autocommit engine on the configured database, for CREATE/DROP DATABASE."""
    return sa.create_engine(
        SERVER_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5}
    )


def _drop_databases(names: list[str]) -> None:
    admin = _server_admin()
    try:
        with admin.connect() as conn:
            for name in names:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def pg_unavailable() -> str | None:
    """None when PostgreSQL answers (and this process's database exists), else the reason it
    does not (checked once per process)."""
    if "reason" not in _pg_state:
        try:
            admin = _server_admin()
            try:
                with admin.connect() as conn:
                    conn.execute(sa.text(f'CREATE DATABASE "{_PROCESS_DB}"'))
            finally:
                admin.dispose()
            _pg_state["reason"] = None
        except Exception as error:  # any failure to reach the server
            first = (str(error).strip().splitlines() or ["unknown error"])[0]
            _pg_state["reason"] = f"PostgreSQL at {SERVER_URL} is not reachable: {first}"
    return _pg_state["reason"]


def require_pg() -> None:
    """Skip (or, in CI, fail) the calling test when PostgreSQL is not reachable."""
    reason = pg_unavailable()
    if reason:
        if REQUIRE_PG:
            pytest.fail(f"{reason} (SMITHERS_TT_REQUIRE_PG=1: PostgreSQL tests must run)")
        pytest.skip(reason)


@functools.cache
def pg_admin() -> sa.Engine:
    """This process's pooled engine on its database, for the fixtures' own statements (create,
    fill and drop a test's schema). Each new connection is a new server process (a fork that
    fills its catalog caches anew): a PostgreSQL test opened three of them for its set-up
    and tear-down before, each from an engine of its own."""
    return sa.create_engine(PG_URL)


def schema_url(url: str, schema: str) -> str:
    """``url`` with its search_path set to ``schema``."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    """A URL whose search_path is a fresh, empty PostgreSQL schema (dropped afterwards)."""
    require_pg()
    schema = f"tt_test_{secrets.token_hex(6)}"
    with pg_admin().begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield schema_url(PG_URL, schema)
    finally:
        with pg_admin().begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))


def table_names(url: str) -> list[str]:
    """The tables in a database (an SQLite file, or the schema a PostgreSQL URL points at)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return sorted(sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """An empty database URL on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'smithers.db'}"
    return request.getfixturevalue("pg_schema_url")


@pytest.fixture(scope="session")
def store_template(tmp_path_factory: pytest.TempPathFactory) -> StoreTemplate:
    """A migrated, empty store per backend, made once per process, to copy (see
    :mod:`tests._store_template`)."""
    return StoreTemplate(tmp_path_factory.mktemp("store-template"), pg_admin, schema_url)


@pytest.fixture
def db(db_url: str, store_template: StoreTemplate) -> Iterator[st.Database]:
    """A migrated, empty database on each backend: a copy of ``store_template``'s, opened."""
    store_template.fill(db_url)
    database = st.connect(db_url)
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def pg_proxy() -> Iterator[PgProxy]:
    """A loopback proxy in front of the test PostgreSQL server (see :mod:`tests.faults`)."""
    require_pg()
    proxy = PgProxy(PG_URL)
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture
def proxied_pg_url(pg_proxy: PgProxy, pg_schema_url: str) -> str:
    """A fresh PostgreSQL schema reached through :func:`pg_proxy` (faults on demand)."""
    return pg_proxy.url(pg_schema_url)


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's SQLite database (``build_demo``), built once per test run: the first process
    to ask builds it under a lock in the folder every xdist worker shares, the others wait for
    it. Read it through :func:`demo_copy`: tests change what they open."""
    from smithers_tt.demo.showcase import build_demo

    with run_wide(tmp_path_factory, "demo-store") as folder:
        path = folder / "demo.db"
        if not path.exists():
            building = path.with_name("building.db")
            building.unlink(missing_ok=True)
            with st.connect(f"sqlite:///{building}") as db:
                build_demo(db)
            building.rename(path)  # whole or not at all: a killed builder leaves no demo.db
    return path


@pytest.fixture
def demo_copy(demo_store: Path, tmp_path: Path) -> Path:
    """A private copy of the demo database (see :func:`demo_store`)."""
    return Path(shutil.copy(demo_store, tmp_path / "demo.db"))


# --- one JupyterLab per worker, for the browser tests that share it ------------------------


def _browser_or_skip() -> None:
    from tests.widgets._jupyter import browser_unavailable

    reason = browser_unavailable()
    if reason:
        if os.environ.get("SMITHERS_TT_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{reason} (SMITHERS_TT_REQUIRE_BROWSER=1: the browser test must run)")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def browser_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A JupyterLab server shared by the browser tests of this process (``_jupyter.Lab``):
    started once (7-15 s) instead of once per test. Its tests end their kernels
    (``lab.end_sessions()``) and open their notebooks with ``lab.url(path)``."""
    from tests.widgets._jupyter import Lab, jupyterlab

    _browser_or_skip()
    base_dir = tmp_path_factory.mktemp("browser-lab")
    (base_dir / "root").mkdir()
    with jupyterlab(base_dir / "root", base_dir / "home") as (base, token):
        yield Lab(base_dir / "root", base, token)


@pytest.fixture
def browser_chromium() -> Iterator[Any]:
    """A headless chromium (Playwright ``Browser``) for one test, closed at its end (1-2 s to
    launch). Not shared between tests: while Playwright's sync API is open the thread has a
    running asyncio loop, so every later ``asyncio.run`` of the worker (and a test's own
    ``chromium()``) would fail."""
    from tests.widgets._jupyter import chromium

    _browser_or_skip()
    with chromium() as browser:
        yield browser


# --- scheduling under xdist (``./dev test`` runs ``-n 4 --dist loadgroup``) --------------------
#
# Tests that use a virtual environment built by a session fixture run on the worker that built
# it (each is built once per run, the three at once on three workers); the machine-hungry tests
# (kill -9 trials, concurrency storms, crash trials: the ``slow`` mark) run one after another
# on one worker, never two of them at once. Every other test goes to whichever worker is free.
#
# xdist's own loadgroup passes the group to the controller by appending "@group" to the node
# id, which pytest 9.2's structured node ids silently ignore (pytest-xdist issue 1386: every
# test is then scheduled alone). So the workers write each test's group to a file the
# controller named, and the controller's scheduler (``pytest_xdist_make_scheduler``) reads it.
VENV_FIXTURES = {  # a session fixture that builds a virtual environment: its group
    "binder_env": "venv-binder",
    "notebook": "venv-notebook",
    "core": "venv-core",
    "install": "venv-core",
    "wheel": "venv-core",
}

BROWSER_FIXTURES = {  # a browser test (two chromiums at once timed out on 2 cores): one worker
    "browser_lab": "browser",
    "browser_chromium": "browser",
}


def xdist_group_of(item: pytest.Item) -> str | None:
    """The group a test runs in (on one worker, one test after another), or None."""
    marks = [
        m.args[0] if m.args else m.kwargs.get("name") for m in item.iter_markers("xdist_group")
    ]
    if marks and marks[0]:
        return str(marks[0])
    names = set(getattr(item, "fixturenames", ()))
    params = getattr(getattr(item, "callspec", None), "params", {})
    for fixture, group in {**VENV_FIXTURES, **BROWSER_FIXTURES}.items():
        # the fixture, not a parameter of the same name: test_notebooks.py's ``notebook`` (a
        # path) had put the eight nbval runs on the [notebook] venv's worker, one after
        # another behind its build, instead of beside the other groups (FIRST_FILES)
        if fixture in names and fixture not in params:
            return group
    if item.get_closest_marker("slow"):
        return "machine"
    if item.nodeid.startswith("tests/widgets/test_browser"):
        return "browser"  # a JupyterLab and a chromium each: two at once timed out on 2 cores
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # the controller, once per worker it starts
    node.workerinput["tt_groups_file"] = _groups_file(node.config)


def _groups_file(config: pytest.Config) -> str:
    if not hasattr(config, "_tt_groups_file"):
        config._tt_groups_file = str(  # type: ignore[attr-defined]
            config._tmp_path_factory.getbasetemp() / "xdist-groups.json"  # type: ignore[attr-defined]
        )
    return config._tt_groups_file  # type: ignore[attr-defined]


# The groups the scheduler hands out first, longest first (measured: the browser tests are the
# longest chain of one worker, ~555 s at load 8-10; the machine-hungry trials next), then the
# notebooks' nbval runs (30-50 s each): a long chain that starts last stretches the run's end.
FIRST = ["browser", "machine", "venv-notebook", "venv-binder", "venv-core"]
FIRST_FILES = ["tests/test_notebooks.py::test_notebook_runs_with_its_checked_outputs"]


def _start_order(item: pytest.Item) -> int:
    group = xdist_group_of(item)
    if group in FIRST:
        return FIRST.index(group)
    if item.nodeid.startswith(tuple(FIRST_FILES)):
        return len(FIRST)
    return len(FIRST) + 1


# A test that builds a venv group's virtualenv on a cold cache (a new machine: pip from the
# registries) bears the build in its set-up: 128-250 s on a quiet machine, but 400-600 s and
# more at load 15-20 (a fresh-clone run of the third round: Binder's passed pytest's 600 s).
VENV_BUILD_TIMEOUT_S = 1800


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if (xdist_group_of(item) or "").startswith("venv-"):
            item.add_marker(pytest.mark.timeout(VENV_BUILD_TIMEOUT_S))
    path = getattr(config, "workerinput", {}).get("tt_groups_file")
    if path is None:  # not an xdist worker
        return
    items.sort(key=_start_order)  # the scheduler hands work out in this order (stable: the
    # same on every worker)
    groups = {item.nodeid: group for item in items if (group := xdist_group_of(item))}
    part = Path(f"{path}.{config.workerinput['workerid']}")
    staged = part.with_name(f"{part.name}.tmp")  # one per worker: a shared name raced on 4 cores
    staged.write_text(json.dumps(groups))
    staged.replace(part)  # complete before the controller can read it


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # hand out in the collection's order (FIRST first)

    class GroupScheduling(LoadScopeScheduling):
        """Groups (``xdist_group_of``) on one worker each, in the order of ``FIRST``; other
        tests one by one to whichever worker has fewer than two pending."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # every worker has collected: their files are complete
                self.groups = {}
                for part in Path(_groups_file(config)).parent.glob("xdist-groups.json.*"):
                    if part.suffix != ".tmp":
                        self.groups.update(json.loads(part.read_text()))
            group = self.groups.get(nodeid)
            return f"group:{group}" if group else nodeid

    return GroupScheduling(config, log)


# --- where the time goes: seconds per test folder, after pytest's --durations table ----------

_folder_seconds: dict[str, float] = defaultdict(float)
_folder_tests: dict[str, set[str]] = defaultdict(set)


def _folder(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    return "/".join(parts[:2]) + ("/" if len(parts) > 2 else "")


# SMITHERS_TT_TEST_TIMELINE=FOLDER: each xdist worker writes when each phase of each test ran
# (``<worker>.jsonl``: id, when, start, stop): what ran while the cores were idle, or last; and
# a line per test of the CPU seconds it took (id, when="cpu", group, self, children).
# ``python -m tests.timeline_report FOLDER`` sums them per group and per worker.
_TIMELINE = os.environ.get("SMITHERS_TT_TEST_TIMELINE")
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """With the timeline on, also the CPU seconds a test took: the worker's own and its
    subprocesses' (those it waited for; a shared server's, e.g. ``browser_lab``'s kernels,
    count when the server ends). On shared cores the wall time says how busy the machine was;
    the CPU says what a test costs."""
    if not (_TIMELINE and _WORKER):
        return (yield)
    import resource

    def cpu(who: int) -> float:
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    before = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    try:
        return (yield)
    finally:
        line = {
            "id": item.nodeid,
            "when": "cpu",
            "group": xdist_group_of(item),
            "self": cpu(resource.RUSAGE_SELF) - before[0],
            "children": cpu(resource.RUSAGE_CHILDREN) - before[1],
        }
        with open(Path(_TIMELINE) / f"{_WORKER}.jsonl", "a") as out:
            out.write(json.dumps(line) + "\n")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    folder = _folder(report.nodeid)
    _folder_seconds[folder] += report.duration
    _folder_tests[folder].add(report.nodeid)
    if _TIMELINE and _WORKER:
        line = {"id": report.nodeid, "when": report.when, "start": report.start}
        with open(Path(_TIMELINE) / f"{_WORKER}.jsonl", "a") as out:
            out.write(json.dumps({**line, "stop": report.stop}) + "\n")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not config.getoption("durations", None) or not _folder_seconds:
        return
    write = terminalreporter.write_line
    terminalreporter.section("seconds per test folder (set-up + call + tear-down, all workers)")
    for folder, seconds in sorted(_folder_seconds.items(), key=lambda kv: -kv[1]):
        write(f"{seconds:9.1f} s  {len(_folder_tests[folder]):5d} tests  {folder}")
    write(f"{sum(_folder_seconds.values()):9.1f} s  total")


def _untracked() -> set[str] | None:
    """The checkout's untracked files (None outside a git checkout)."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "ls-files", "--others", "--exclude-standard"],
            cwd=Path(__file__).parent.parent,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return set(done.stdout.splitlines())


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the run's own process, not an xdist worker
        session.config._tt_untracked = _untracked()  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drop this process's databases (PostgreSQL ends any session still in them); and, in the
    run's own process, fail the run when tests left new files in the checkout (tests write in
    their own temporary folders; a test that ran a command in the checkout left, e.g., the
    demo's price file there)."""
    if _pg_state.get("reason", "unused") is None:
        pg_admin().dispose()
        _drop_databases([_PROCESS_DB])
    before = getattr(session.config, "_tt_untracked", None)
    after = _untracked() if before is not None else None
    if before is not None and after is not None and after - before:
        left = ", ".join(sorted(after - before)[:10])
        print(f"\nerror: the tests left new files in the checkout: {left}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
