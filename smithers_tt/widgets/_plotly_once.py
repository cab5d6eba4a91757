"""plotly's widget bundle evaluated once per page, not once per figure.

plotly ships its whole widget bundle (``widgetbundle.js``, 5 MB of JavaScript) as every
``FigureWidget``'s anywidget module (``_esm``), and anywidget (0.11) imports a module that is
not an http(s) address through a new Blob URL for each model: every figure made the page parse
and compile 5 MB anew (seconds on a loaded machine, or with Chromium's CPU throttled), and the
timeline lays out a new figure on every redraw (see ``TimelineView``).

The timeline's figures (:func:`~smithers_tt.widgets._timeline._figure_class`) have as their
module a small loader (``_plotly_once.js``, beside this file) instead, and the bundle's text
as a trait (``BUNDLE``) with its key (``KEY``: plotly's version and a hash of the text, so two
plotly versions in one page, as two kernels may have, never share). The loader imports the
bundle once per page and key through a promise kept on ``globalThis``, and every figure awaits
that one import: the page compiles the bundle once, whichever figure comes first (after a
reload the page rebuilds its models from the kernel in any order, each with the bundle). Nothing
is fetched from anywhere: the text still reaches the page in each figure's state, as plotly's
``_esm`` did (5 MB a figure over the kernel's websocket; what that costs is in
``docs/testing.md``).

The first figure of a page still waits for the bundle inside anywidget's 2 s (its module is
ready only once the loader's ``initialize``, which awaits the import, returns): see ``HEARD``.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

LOADER = Path(__file__).with_name("_plotly_once.js")
"""The figures' anywidget module: imports the bundle once per page and key."""
BUNDLE = "_plotly_bundle"
"""The trait that carries plotly's widget bundle (its text) to the page."""
KEY = "_plotly_bundle_key"
"""The trait that names the bundle in the page: plotly's version and a hash of its text."""


@functools.cache
def plotly_bundle() -> tuple[str, str]:
    """plotly's widget bundle (the module its own ``FigureWidget`` ships) and its key."""
    import plotly
    import plotly.graph_objects as go

    text = str(go.FigureWidget._esm)
    return text, bundle_key(text, plotly.__version__)


def bundle_key(text: str, version: str) -> str:
    """The name of a bundle in the page: its version (to read) and a hash of its text (so that
    two bundles never share one, even under one version string)."""
    return f"plotly-{version}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
