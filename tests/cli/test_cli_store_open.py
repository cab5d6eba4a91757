"""Which commands may create a store, and reading a store that cannot be written.

A mistyped ``--db`` never creates anything; commands that only read never create or
migrate; a store on read-only media, or without write permission, still reads.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from smithers_tt.cli import cli
from smithers_tt.store.backend._migrate import upgrade
from tests.conftest import PG_URL, require_pg, table_names

READERS = {
    "runs": ["runs"],
    "show": ["show", "{run}"],
    "timeline": ["timeline", "{run}"],
    "diff": ["diff", "{run}", "1", "5"],
    "verify": ["verify"],
    "lineage": ["lineage", "SELECT count(*) AS n FROM runs"],
    "tables": ["tables"],
    "workers": ["workers"],
}
WRITERS = {
    "rewind": ["rewind", "{run}", "3", "--yes"],
    "fork": ["fork", "{run}", "3"],
    "cancel": ["cancel", "{run}"],
    "reset": ["reset", "{run}", "write", "--yes"],
    "gc": ["gc"],
    "migrate": ["migrate"],
    "demo": ["demo"],
}
WRITERS_OF_A_RUN = {k: v for k, v in WRITERS.items() if "{run}" in v}


def invoke(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    runner = CliRunner()
    if cwd is None:
        result = runner.invoke(cli, list(args))
    else:
        previous = Path.cwd()
        os.chdir(cwd)
        try:
            result = runner.invoke(cli, list(args))
        finally:
            os.chdir(previous)
    return result.exit_code, result.stdout, result.stderr


def last(err: str) -> str:
    """The last line printed on stderr (after any progress bar)."""
    return err.strip().splitlines()[-1] if err.strip() else ""


def listing(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A demo SQLite store, checkpointed into one file, and the id of its first run."""
    path = tmp_path_factory.mktemp("store") / "demo.db"
    code, _, err = invoke("--db", str(path), "demo")
    assert code == 0, err
    code, out, _ = invoke("--db", str(path), "runs", "--json")
    return path, json.loads(out)[0]["run_id"]


# --- a mistyped --db creates nothing ----------------------------------------------------------


@pytest.mark.parametrize("command", READERS.values(), ids=READERS.keys())
def test_cli_read_command_on_a_missing_store_creates_nothing(
    command: list[str], tmp_path: Path
) -> None:
    db = tmp_path / "missing-folder" / "smithers.db"
    code, _, err = invoke("--db", str(db), *(a.replace("{run}", "r") for a in command))
    assert code == 1
    assert last(err).startswith("error: no store at") and "migrate" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", WRITERS.values(), ids=WRITERS.keys())
def test_cli_write_command_in_a_missing_folder_creates_nothing(
    command: list[str], tmp_path: Path
) -> None:
    db = tmp_path / "missing-folder" / "smithers.db"
    code, _, err = invoke("--db", str(db), *(a.replace("{run}", "r") for a in command))
    assert code == 1 and last(err).startswith("error: ")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", WRITERS_OF_A_RUN.values(), ids=WRITERS_OF_A_RUN.keys())
def test_cli_write_command_on_a_run_never_creates_a_store(
    command: list[str], tmp_path: Path
) -> None:
    db = tmp_path / "typo.db"
    code, _, err = invoke("--db", str(db), *(a.replace("{run}", "r") for a in command))
    assert code == 1 and last(err).startswith("error: no store at")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["runs"], ["demo"], ["migrate"]], ids=lambda c: c[0])
def test_cli_url_without_its_slashes_creates_no_folder(command: list[str], tmp_path: Path) -> None:
    code, _, err = invoke("--db", "sqlite:/smithers.db", *command, cwd=tmp_path)
    assert code == 1 and "sqlite:///" in err
    assert list(tmp_path.iterdir()) == []


def test_cli_read_command_leaves_a_file_that_is_not_a_store_as_it_was(tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    engine = sa.create_engine(f"sqlite:///{other}")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)"))
    engine.dispose()
    before = listing(tmp_path)
    code, _, err = invoke("--db", str(other), "runs")
    assert code == 1 and last(err).startswith("error: no store at")
    code, _, err = invoke("--db", str(other), "fork", "r", "1")
    assert code == 1 and last(err).startswith("error: no store at")
    assert listing(tmp_path) == before  # not migrated, not even switched to WAL


def test_cli_demo_and_migrate_create_a_store(tmp_path: Path) -> None:
    assert invoke("--db", str(tmp_path / "a.db"), "migrate")[0] == 0
    assert invoke("--db", str(tmp_path / "a.db"), "runs", "--json")[1].strip() == "[]"
    assert invoke("--db", str(tmp_path / "b.db"), "demo")[0] == 0


# --- PostgreSQL: a database that is not a store ---------------------------------------------


@pytest.fixture
def foreign_pg(pg_schema_url: str) -> Iterator[str]:
    """A PostgreSQL schema that holds another application's table."""
    engine = sa.create_engine(pg_schema_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE accounts (id int PRIMARY KEY, owner text)"))
    try:
        yield pg_schema_url
    finally:
        engine.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("command", READERS.values(), ids=READERS.keys())
def test_cli_read_command_on_a_foreign_postgres_database_changes_nothing(
    foreign_pg: str, command: list[str]
) -> None:
    code, _, err = invoke("--db", foreign_pg, *(a.replace("{run}", "r") for a in command))
    assert code == 1 and last(err).startswith("error: no store at")
    assert table_names(foreign_pg) == ["accounts"]


@pytest.mark.postgres
@pytest.mark.parametrize("command", [["migrate"], ["demo"]], ids=lambda c: c[0])
def test_cli_store_in_a_foreign_postgres_database_needs_the_flag(
    foreign_pg: str, command: list[str]
) -> None:
    code, _, err = invoke("--db", foreign_pg, *command)
    assert code == 1 and "accounts" in err and "--beside-other-tables" in err
    assert table_names(foreign_pg) == ["accounts"]
    code, _, err = invoke("--db", foreign_pg, "migrate", "--beside-other-tables")
    assert code == 0, err
    assert "tt_runs" in table_names(foreign_pg)
    assert invoke("--db", foreign_pg, "runs", "--json")[1].strip() == "[]"


@pytest.mark.postgres
def test_cli_read_command_on_an_empty_postgres_schema_creates_nothing(pg_schema_url: str) -> None:
    code, _, err = invoke("--db", pg_schema_url, "runs")
    assert code == 1 and last(err).startswith("error: no store at")
    assert table_names(pg_schema_url) == []


def _pg_database(name: str) -> str:
    require_pg()
    url = sa.make_url(PG_URL).set(database=name, query={})
    return url.render_as_string(hide_password=False)


@pytest.mark.postgres
def test_cli_read_command_on_the_postgres_maintenance_database_changes_nothing() -> None:
    url = _pg_database("postgres")
    before = table_names(url)
    code, _, err = invoke("--db", url, "runs")
    assert code == 1 and last(err).startswith("error: no store at")
    assert table_names(url) == before


@pytest.mark.postgres
def test_cli_postgres_database_that_does_not_exist_is_one_line_at_once() -> None:
    code, _, err = invoke("--db", _pg_database("no_such_database_smithers"), "runs")
    assert code == 1
    assert "does not exist" in last(err) and "retry later" not in err


# --- read-only media and files without write permission --------------------------------------

_MOUNT_RO = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"'

# Runs every command in one process (under the lock), reporting (exit code, stdout, stderr).
_DRIVER = """
import json, sys
from click.testing import CliRunner
from smithers_tt.cli import cli
from smithers_tt.store.backend._migrate import VERSION_TABLE, upgrade
from tests.conftest import PG_URL, require_pg, table_names
results = {}
for name, args in json.loads(sys.argv[1]).items():
    r = CliRunner().invoke(cli, args)
    results[name] = [r.exit_code, r.stdout, r.stderr]
print(json.dumps(results))
"""


@functools.cache
def _read_only_mount_refused() -> str | None:
    with tempfile.TemporaryDirectory() as folder:
        probe = subprocess.run(
            [
                "unshare",
                "-m",
                "sh",
                "-c",
                f'{_MOUNT_RO} && ! touch "$1/x" 2>/dev/null',
                "sh",
                folder,
            ],
            capture_output=True,
            text=True,
        )
    if probe.returncode != 0:
        return f"cannot make a read-only bind mount here: {probe.stderr.strip() or 'refused'}"
    return None


def on_read_only_media(folder: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run Python in a mount namespace of its own where ``folder`` is a read-only mount."""
    reason = _read_only_mount_refused()
    if reason:
        pytest.skip(reason)
    return subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f'{_MOUNT_RO} && shift && exec "$@"',
            "sh",
            str(folder),
            sys.executable,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def without_write_permission(folder: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run Python as the unprivileged user ``nobody`` (root ignores file permissions)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run as another user")
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=folder,
    )


LOCKS = {"read-only-media": on_read_only_media, "no-write-permission": without_write_permission}


@pytest.fixture(scope="module", params=LOCKS.keys())
def locked(request: pytest.FixtureRequest, demo_file: tuple[Path, str]) -> Iterator[dict]:
    """Every reading and writing command run against a copy of the demo store that this
    process cannot write; ``"changed"`` says whether any file of its folder changed."""
    folder = Path(tempfile.mkdtemp(prefix="smithers-ro-"))
    try:
        folder.chmod(0o755)
        db = folder / "demo.db"
        shutil.copy(demo_file[0], db)
        db.chmod(0o644)
        before = listing(folder)
        commands = {
            name: ["--db", str(db), "--json", *(a.replace("{run}", demo_file[1]) for a in args)]
            for name, args in {**READERS, **WRITERS}.items()
        }
        done = LOCKS[request.param](folder, ["-c", _DRIVER, json.dumps(commands)])
        assert done.returncode == 0, done.stderr
        results = json.loads(done.stdout)
        results["changed"] = listing(folder) != before
        yield results
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("command", READERS)
def test_cli_read_command_reads_a_store_it_cannot_write(locked: dict, command: str) -> None:
    code, out, err = locked[command]
    assert code == 0, err
    assert json.loads(out) is not None
    assert not locked["changed"]


@pytest.mark.parametrize("command", WRITERS)
def test_cli_write_command_says_why_it_cannot_write(locked: dict, command: str) -> None:
    code, _, err = locked[command]
    assert code == 1
    error = json.loads(last(err))["error"]
    assert error["code"] == "store_read_only"
    assert error["message"].startswith("cannot write the store") and "read-only" in err
    assert not locked["changed"]


def test_cli_read_command_never_migrates_an_older_store(db_url: str, tmp_path: Path) -> None:
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:  # as if made before migration 0004
        upgrade(conn, to="0003_langgraph")
    code, _, err = invoke("--db", db_url, "runs")
    assert code == 1 and "0004_workers" in err and "migrate" in err
    with engine.connect() as conn:
        names = conn.execute(sa.text("SELECT version_num FROM tt_alembic_version")).scalars().all()
    engine.dispose()
    assert names == ["0003_langgraph"]
    assert invoke("--db", db_url, "migrate")[0] == 0
    assert invoke("--db", db_url, "runs", "--json")[1].strip() == "[]"


def test_cli_migrate_says_it_created_the_store_then_that_it_is_up_to_date(db_url: str) -> None:
    code, out, err = invoke("--db", db_url, "migrate")  # nothing there yet
    assert code == 0, err
    assert out.startswith("created the store") and "up to date" not in out
    code, out, err = invoke("--db", db_url, "migrate")
    assert code == 0, err
    assert out.startswith("schema is up to date")


def test_cli_migrate_names_the_revisions_it_applied_to_an_older_store(db_url: str) -> None:
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:  # as if made before migration 0004
        upgrade(conn, to="0003_langgraph")
    engine.dispose()
    code, out, err = invoke("--db", db_url, "migrate")
    assert code == 0, err
    assert out.startswith("upgraded the store") and "0004_workers" in out
    said = json.loads(invoke("--db", db_url, "--json", "migrate")[1])
    assert said == {"url": said["url"], "created": False, "applied": []}  # nothing left


@pytest.fixture
def pg_reader(pg_schema_url: str, tmp_path: Path) -> Iterator[str]:
    """A demo store on PostgreSQL, and a URL of a role that may only SELECT from it (the
    demo writes its price file in the current folder: the test's, not the checkout)."""
    assert invoke("--db", pg_schema_url, "demo", cwd=tmp_path)[0] == 0
    schema = sa.make_url(pg_schema_url).query["options"].split("=", 1)[1]
    role = f"tt_reader_{os.urandom(4).hex()}"
    admin = sa.create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE ROLE "{role}" LOGIN'))
        conn.execute(sa.text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
        conn.execute(sa.text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
    try:
        url = sa.make_url(pg_schema_url).set(username=role)
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP OWNED BY "{role}"'))
            conn.execute(sa.text(f'DROP ROLE "{role}"'))
        admin.dispose()


@pytest.mark.postgres
def test_cli_postgres_role_without_write_permission_reads_and_says_why_it_cannot_write(
    pg_reader: str,
) -> None:
    code, out, err = invoke("--db", pg_reader, "runs", "--json")
    assert code == 0, err
    run = json.loads(out)[0]["run_id"]
    for command in (["show", run], ["timeline", run], ["diff", run, "1", "5"], ["verify"]):
        assert invoke("--db", pg_reader, *command)[0] == 0, command
    code, _, err = invoke("--db", pg_reader, "rewind", run, "3", "--yes")
    assert code == 1 and "permission denied" in last(err) and "Traceback" not in err


def test_cli_read_on_read_only_media_refuses_a_store_whose_log_it_cannot_read(
    demo_file: tuple[Path, str], tmp_path: Path
) -> None:
    """Immutable reads ignore the write-ahead log: refuse rather than answer without it."""
    source, media = tmp_path / "source", tmp_path / "media"
    source.mkdir()
    media.mkdir()
    shutil.copy(demo_file[0], source / "demo.db")
    writer = sqlite3.connect(source / "demo.db")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE tt_runs SET status = status")  # committed, only in the log
    writer.commit()
    shutil.copy(source / "demo.db", media / "demo.db")
    shutil.copy(source / "demo.db-wal", media / "demo.db-wal")  # copied without its -shm
    writer.close()
    done = on_read_only_media(
        media, ["-m", "smithers_tt.cli", "--db", str(media / "demo.db"), "runs"]
    )
    assert done.returncode == 1
    assert "write-ahead log" in last(done.stderr) and "Traceback" not in done.stderr
