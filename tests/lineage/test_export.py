"""Parquet export: every view round-trips through the files it writes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from smithers_tt.errors import InvalidArgument
from smithers_tt.lineage import VIEWS, Lineage

from .conftest import records


def _rows(frame: pd.DataFrame) -> list[dict]:
    # Parquet readers may widen a nullable integer column to float: 11.0 stands for 11.
    def same(value: object) -> object:
        return int(value) if isinstance(value, float) and value.is_integer() else value

    return sorted(({k: same(v) for k, v in row.items()} for row in records(frame)), key=repr)


def test_export_parquet_round_trips_every_view(lin: Lineage, tmp_path: Path) -> None:
    paths = lin.export_parquet(tmp_path / "out")
    assert list(paths) == [view.name for view in VIEWS]
    for name, path in paths.items():
        assert path == (tmp_path / "out" / f"{name}.parquet").resolve()
        assert path.is_file()
        back = pd.read_parquet(path)
        direct = lin.sql(f'SELECT * FROM "{name}"')  # noqa: S608 (a view name)
        assert list(back.columns) == list(direct.columns), name
        assert len(back) == len(direct), name
        assert _rows(back) == _rows(direct), name


def test_export_parquet_writes_only_the_views_asked_for(lin: Lineage, tmp_path: Path) -> None:
    paths = lin.export_parquet(tmp_path, views=["runs", "dedup"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dedup.parquet", "runs.parquet"]
    assert list(paths) == ["runs", "dedup"]


def test_export_parquet_refuses_an_unknown_view(lin: Lineage, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="no lineage view"):
        lin.export_parquet(tmp_path, views=["runs", "tt_runs; DROP TABLE x"])
    assert not any(tmp_path.iterdir())
