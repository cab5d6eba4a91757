"""Make the README's picture of the debugger, on purpose: ``.venv/bin/python docs/hero_image.py``.

It builds the demo's runs (``smithers-tt demo``: no test payloads) in a scratch SQLite file,
opens ``Debugger(db, run_id)`` on the run whose first research attempt fails and whose retry
resumes from its checkpoint, selects a checkpoint of the retry, shows its notes as a
conversation and compares the two attempts, then photographs it in JupyterLab with Debian's
chromium (``/usr/bin/chromium``) and writes ``docs/debugger.png``. The tests never write
this file; run this script when the debugger's look changes, check the picture, commit it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.widgets._jupyter import (  # noqa: E402  (the repository root is on the path now)
    TIMEOUT_MS,
    chromium,
    jupyterlab,
    run_notebook,
    write_notebook,
)

CELL = """\
import smithers_tt as st
from smithers_tt.demo.showcase import build_demo
from smithers_tt.widgets import Debugger

db = st.connect({db_url!r})
made = {{r.label: r.run_id for r in build_demo(db)}}
run = db.get_run(made["retry"])
retry = [
    f.frame_no for f in run.frames()
    if f.kind == "checkpoint" and f.node_id == "research" and f.attempt == 2
]
dbg = Debugger(db, run.id)
dbg.select_frame(retry[0])
dbg.inspector.view.value = "conversation"
dbg.diff.mode.value = "attempts"
display(dbg)
"""


def main(target: Path = REPO / "docs" / "debugger.png", width: int = 1280) -> None:
    """Photograph the debugger into ``target``."""
    with tempfile.TemporaryDirectory(prefix="stt-hero-") as tmp:
        base_dir = Path(tmp)
        root, home = base_dir / "root", base_dir / "home"
        root.mkdir()
        home.mkdir()
        db_url = f"sqlite:///{base_dir / 'demo.db'}"
        write_notebook(root / "debugger.ipynb", [CELL.format(db_url=db_url)])
        with jupyterlab(root, home) as (base, token), chromium() as browser:
            page = browser.new_page(viewport={"width": width, "height": 2400})
            page.set_default_timeout(TIMEOUT_MS)
            out = run_notebook(page, base, token, "debugger.ipynb")
            page.evaluate(  # the file browser off: the cell takes the window's width
                "() => { window.jupyterapp.commands.execute('application:toggle-left-area'); }"
            )
            out.locator(".stt-payload .stt-msg").first.wait_for(state="visible")
            out.locator(".stt-diff", has_text="attempt #1").first.wait_for(state="visible")
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            out.scroll_into_view_if_needed()
            page.wait_for_timeout(4000)  # plotly's last redraw (theme, width)
            out.screenshot(path=str(target))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
