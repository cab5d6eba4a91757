"""Long library work reports progress through ``progress=`` callbacks, and the notebook bar
shows it (the terminal bar is tested on an installed wheel: tests/installed/test_progress.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import smithers_tt as st
from smithers_tt.lineage import VIEWS
from smithers_tt.lineage._views import MIRRORED
from smithers_tt.widgets import ProgressBar, notebook_progress


@pytest.fixture
def demo_db(demo_copy: Path) -> Iterator[st.Database]:
    """A copy of the run's one demo database (tests/conftest.py), opened."""
    with st.connect(f"sqlite:///{demo_copy}") as db:
        yield db


def test_parquet_export_reports_each_view_it_wrote(demo_db: st.Database, tmp_path: Path) -> None:
    calls: list[int] = []
    with demo_db.lineage() as lin:
        written = lin.export_parquet(tmp_path, progress=calls.append)

    assert calls == [1] * len(VIEWS) and len(written) == len(VIEWS)


@pytest.mark.parametrize("reader", ["scanner", "arrow"])
def test_lineage_snapshot_reports_each_table_it_copied(demo_db: st.Database, reader: str) -> None:
    calls: list[int] = []
    with demo_db.lineage(snapshot=True, reader=reader, progress=calls.append) as lin:
        runs = len(lin.runs())

    copied = len(MIRRORED) + (1 if reader == "arrow" else 0)  # arrow copies content bytes too
    assert calls == [1] * copied and runs == 7


def test_notebook_bar_follows_verify_and_fills_when_done(demo_db: st.Database) -> None:
    with ProgressBar("verifying", unit="contents") as bar:
        report = demo_db.verify(progress=bar)
        assert bar.text.value.startswith(f"verifying: {report.checked} contents, ")
        assert bar.bar.layout.visibility == "hidden"  # no total: a count, not a bar

    assert bar.bar.bar_style == "success" and bar.bar.value == bar.bar.max
    assert bar.text.value.endswith(" done")


def test_notebook_bar_with_a_total_shows_how_far_it_got() -> None:
    bar = ProgressBar("exporting", total=len(VIEWS), unit="views")
    bar(3)

    assert (bar.bar.value, bar.bar.max) == (3, len(VIEWS))
    assert bar.text.value.startswith(f"exporting: 3/{len(VIEWS)} views, ")


def test_notebook_progress_displays_the_bar_in_the_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython.display

    shown: list[object] = []
    monkeypatch.setattr(IPython.display, "display", shown.append)

    bar = notebook_progress("collecting")

    assert shown == [bar]
