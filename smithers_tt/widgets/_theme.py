"""JupyterLab's theme, read in the browser, and the plotly template derived from it.

The HTML parts follow the theme by themselves (their CSS uses ``--jp-*`` variables), but a
plotly figure keeps its own colours. :class:`ThemeProbe` is an invisible anywidget whose view
reads the theme's colours (resolved to ``rgb(...)`` by the browser) and reports them, again
whenever the person switches theme; :func:`plotly_theme` turns them into the figure's colours.
"""

from __future__ import annotations

import re
from typing import Any

import anywidget
import traitlets

LIGHT: dict[str, Any] = {
    "light": True,
    "name": "",
    "background": "rgba(0,0,0,0)",
    "panel": "rgb(245, 245, 245)",
    "ink": "rgb(33, 33, 33)",
    "muted": "rgb(97, 97, 97)",
    "grid": "rgb(224, 224, 224)",
    "accent": "rgb(25, 118, 210)",
    "font": "",
}
"""The theme assumed before the browser reported one (JupyterLab Light)."""

DARK: dict[str, Any] = {
    **LIGHT,
    "light": False,
    "name": "JupyterLab Dark",
    "panel": "rgb(66, 66, 66)",
    "ink": "rgb(255, 255, 255)",
    "muted": "rgb(179, 179, 179)",
    "grid": "rgb(97, 97, 97)",
    "accent": "rgb(66, 165, 245)",
}
"""JupyterLab Dark's colours (what the probe reports there)."""

_ESM = """
const VARS = {
  background: "--jp-layout-color0", panel: "--jp-layout-color2", ink: "--jp-ui-font-color1",
  muted: "--jp-ui-font-color2", grid: "--jp-border-color2", accent: "--jp-brand-color1",
};
function read(el) {
  const out = {
    light: document.body.dataset.jpThemeLight !== "false",
    name: document.body.dataset.jpThemeName || "",
    font: getComputedStyle(document.body).getPropertyValue("--jp-ui-font-family").trim(),
  };
  const probe = document.createElement("span");
  el.appendChild(probe);
  for (const [key, name] of Object.entries(VARS)) {
    probe.style.color = `var(${name})`;
    out[key] = getComputedStyle(probe).color;
  }
  probe.remove();
  return out;
}
export default {
  render({ model, el }) {
    el.style.display = "none";
    // read only once attached: a detached element resolves no --jp-* variable; "seen" counts
    // the reports, so Python also learns that a view is now showing
    let seen = 0;
    const send = () => {
      if (!el.isConnected) return;
      model.set("theme", { ...read(el), seen: ++seen });
      model.save_changes();
    };
    requestAnimationFrame(send);
    const watch = new MutationObserver(send);
    watch.observe(document.body, {
      attributes: true, attributeFilter: ["data-jp-theme-name", "data-jp-theme-light"],
    });
    // plotly keeps the width it first drew at; when the debugger's width changes (a narrower
    // window, a side panel), drop that width and let plotly's responsive resize redraw it
    let width = 0, timer = null, sizes = null;
    const fit = () => {
      const root = el.closest(".stt-debugger");
      if (!root) return;
      for (const gd of root.querySelectorAll(".js-plotly-plot")) {
        if (gd.layout && gd.layout.width) delete gd.layout.width;
      }
      window.dispatchEvent(new Event("resize"));
    };
    const start = () => {
      const root = el.closest(".stt-debugger");
      if (!root || sizes) return;
      send();
      sizes = new ResizeObserver((entries) => {
        const w = Math.round(entries[0].contentRect.width);
        if (w === width) return;
        width = w;
        clearTimeout(timer);
        timer = setTimeout(fit, 150);
      });
      sizes.observe(root);
    };
    start();
    const later = setTimeout(start, 1000);  // the view may be attached after render
    return () => { watch.disconnect(); clearTimeout(later); if (sizes) sizes.disconnect(); };
  },
};
"""


class ThemeProbe(anywidget.AnyWidget):
    """Reports JupyterLab's theme colours (``theme``, a dict like :data:`LIGHT`, with ``seen``
    counting the reports: each one also means a view is showing), and keeps the debugger's
    plotly figure as wide as the debugger when the cell's width changes."""

    _esm = _ESM
    theme = traitlets.Dict().tag(sync=True)


_COLOUR = re.compile(r"^(#[0-9a-fA-F]{3,8}|rgba?\([0-9.,\s%]+\))$")
_FONT = re.compile(r"^[\w\s,.'\"-]{1,300}$")


def clean_theme(reported: dict[str, Any] | None) -> dict[str, Any]:
    """The reported theme with every value checked (anything odd keeps the default)."""
    theme = dict(LIGHT)
    if not reported:
        return theme
    base = LIGHT if reported.get("light", True) is not False else DARK
    theme.update(base)
    for key in ("panel", "ink", "muted", "grid", "accent", "background"):
        value = reported.get(key)
        if isinstance(value, str) and _COLOUR.match(value.strip()):
            theme[key] = value.strip()
    font = reported.get("font")
    if isinstance(font, str) and _FONT.match(font.strip()):
        theme["font"] = font.strip()
    if isinstance(reported.get("name"), str):
        theme["name"] = reported["name"][:100]
    theme["background"] = "rgba(0,0,0,0)"  # the cell shows through: no paper of its own
    return theme


def plotly_theme(theme: dict[str, Any]) -> dict[str, Any]:
    """Layout settings that make a figure match ``theme`` (see :func:`clean_theme`)."""
    axis = {
        "gridcolor": theme["grid"],
        "linecolor": theme["grid"],
        "zerolinecolor": theme["grid"],
        "tickfont": {"color": theme["ink"]},
        "title": {"font": {"color": theme["muted"]}},
    }
    font: dict[str, Any] = {"color": theme["ink"], "size": 12}
    if theme.get("font"):
        font["family"] = theme["font"]
    return {
        "paper_bgcolor": theme["background"],
        "plot_bgcolor": theme["background"],
        "font": font,
        "xaxis": axis,
        "yaxis": axis,
        "legend": {"font": {"size": 12, "color": theme["ink"]}, "bgcolor": "rgba(0,0,0,0)"},
        "hoverlabel": {
            "bgcolor": theme["panel"],
            "bordercolor": theme["grid"],
            "font": {"color": theme["ink"], "size": 12},
        },
    }
