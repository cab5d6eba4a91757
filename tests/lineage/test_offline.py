"""DuckDB never reaches the network: extensions load from installed files, autoinstall and
autoload are off and locked, a missing extension fails loudly or falls back as documented."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import smithers_tt as st
from smithers_tt.lineage import LineageFallbackWarning, LineageUnavailable
from smithers_tt.lineage import _connect as C


def test_the_duckdb_pin_matches_the_extension_packages() -> None:
    duckdb_version = importlib.metadata.version("duckdb")
    for package in ("duckdb-ext-sqlite", "duckdb-ext-postgres"):
        assert importlib.metadata.version(package).startswith(f"{duckdb_version}."), package


@pytest.mark.parametrize("name", ["sqlite_scanner", "postgres_scanner"])
def test_the_scanner_extensions_are_installed_files_for_this_duckdb(name: str) -> None:
    import duckdb

    con = C.new_connection()
    platform = con.execute("PRAGMA platform").fetchone()[0]
    files = [p for p in C.extension_candidates(name, duckdb.__version__, platform) if p.is_file()]
    assert files, f"no {name}.duckdb_extension installed for duckdb {duckdb.__version__}"
    assert C.load_extension(con, name) == str(files[0])
    con.close()


def test_a_lineage_loads_the_scanner_from_the_package_and_cannot_autoinstall(
    db: st.Database,
) -> None:
    with db.lineage() as lin:
        assert lin.reader == "scanner"
        assert lin.extension is not None and lin.extension.endswith(".duckdb_extension")
        assert Path(lin.extension).is_file()
        settings = lin.sql(
            "SELECT name, value FROM duckdb_settings() WHERE name IN "
            "('autoinstall_known_extensions', 'autoload_known_extensions', 'lock_configuration')"
        )
        assert dict(zip(settings.name, settings.value, strict=True)) == {
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
            "lock_configuration": "true",
        }


@pytest.fixture
def no_extensions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No extension file anywhere: none found next to duckdb, an empty DuckDB home."""
    monkeypatch.setattr(C, "extension_candidates", lambda *a: [])
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_a_missing_extension_fails_loudly_without_downloading(
    db: st.Database, no_extensions: Path
) -> None:
    with pytest.raises(LineageUnavailable, match="is not installed") as caught:
        db.lineage(reader="scanner")
    assert "pip install 'smithers-tt[lineage]'" in str(caught.value)
    assert not list(no_extensions.rglob("*.duckdb_extension*")), "nothing was downloaded"


def test_a_missing_extension_falls_back_to_the_arrow_snapshot_with_a_warning(
    db: st.Database, no_extensions: Path
) -> None:
    from smithers_tt.demo import demo_workflow

    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "bee"})
    with pytest.warns(LineageFallbackWarning, match="Arrow snapshot fallback"):
        lin = db.lineage()
    with lin:
        assert (lin.reader, lin.snapshot, lin.extension) == ("arrow", True, None)
        assert lin.runs().run_id.tolist() == [run.id]
    assert not list(no_extensions.rglob("*.duckdb_extension*"))


def test_a_snapshot_file_is_removed_on_close(db: st.Database) -> None:
    lin = db.lineage(snapshot=True)
    scratch = lin._scratch
    # The snapshot file is unlinked once attached (DuckDB reads it through its open handle):
    # its space is freed when the connection closes.
    assert scratch is not None and scratch.path.is_dir() and not scratch.file.exists()
    assert len(lin.runs()) == len(db.runs())
    lin.close()
    assert not scratch.path.exists()


def test_importing_smithers_tt_imports_neither_duckdb_nor_pandas(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        import smithers_tt
        import smithers_tt.lineage
        db = smithers_tt.connect({str(tmp_path / "s.db")!r})
        db.close()
        heavy = sorted(m for m in ("duckdb", "pandas", "pyarrow") if m in sys.modules)
        assert not heavy, heavy
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
