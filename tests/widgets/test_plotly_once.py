"""The timeline's figures open in the page with a small loader as their module and plotly's
widget bundle as a trait, named by a key of its content: the page compiles the bundle once,
not once per figure (``smithers_tt/widgets/_plotly_once.py``; the browser sequences count the
page's compilations)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import comm
import plotly
import plotly.graph_objects as go
import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import Debugger
from smithers_tt.widgets._plotly_once import BUNDLE, KEY, LOADER, bundle_key

from ._plotly_page import Page


def _opened_figures(page: Page) -> list[dict[str, Any]]:
    """The state each figure's comm last opened with in the page (plotly opens it, and the
    timeline opens it again with the whole figure), in order."""
    opened = {
        model_id: data["state"]
        for model_id, kind, data in page.inbox
        if kind == "comm_open" and "_widget_layout" in data["state"]
    }
    return list(opened.values())


def test_every_figure_opens_with_the_loader_and_plotlys_own_bundle_under_one_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = Page()
    monkeypatch.setattr(comm, "create_comm", page.comm)
    db = st.connect(f"sqlite:///{tmp_path / 'plotly.db'}")  # one backend: no store is in question
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    dbg.timeline.set_theme({**dbg.timeline.theme, "panel": "#000001"})  # a redraw: a new figure
    opened = _opened_figures(page)
    assert len(opened) == 2
    bundle = str(go.FigureWidget._esm)  # the module plotly's own FigureWidget gives the page
    assert "export" in bundle and len(bundle) > 1_000_000
    loader = LOADER.read_text()
    for state in opened:
        assert state["_esm"] == loader  # what the page imports per figure: not the bundle
        assert state[BUNDLE] == bundle
        assert state[KEY] == opened[0][KEY]
    digest = hashlib.sha256(bundle.encode()).hexdigest()
    assert opened[0][KEY] == f"plotly-{plotly.__version__}-{digest[:16]}"
    assert len(loader) < 5_000
    for trait in (BUNDLE, KEY):  # the loader reads the traits the figures have
        assert f'model.get("{trait}")' in loader
    dbg.close()
    db.close()


def test_two_bundles_never_share_a_key() -> None:
    """Two plotly versions in one page (two kernels' figures) each compile their own bundle,
    whether their version strings differ or not."""
    text = "export default {}"
    assert bundle_key(text, "7.1.0") != bundle_key(text, "7.2.0")
    assert bundle_key(text, "7.1.0") != bundle_key(text + " ", "7.1.0")
    assert bundle_key(text, "7.1.0") == bundle_key(text, "7.1.0")
