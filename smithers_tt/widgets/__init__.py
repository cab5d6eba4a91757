"""The notebook debugger (needs the ``notebook`` extra: ipywidgets, plotly, anywidget).

``Debugger(db, run_id, workflow=None)`` (or ``db.debug(run_id)``) shows a run's timeline
(frames or wall-clock time), a frame scrubber, a frame table with filters and search, an
inspector of nodes and checkpoints (chat transcripts as conversations, a pin to keep one
checkpoint while scrubbing), diffs between frames, attempts and forks, Rewind / Fork (with a
validated, previewed checkpoint edit) / Replay with confirmation, the fork tree and export
of the history; it follows running runs live, and JupyterLab's light or dark theme.
:class:`DebuggerModel` is the same debugger without widgets (selection, diffs, actions),
which is what the widgets observe and what tests drive. A :class:`FrameLens` (``lens=``)
shows a run an integration wrote in that framework's terms (LangGraph's super-steps).
:class:`RunBrowser` (``db.browse()``) lists the store's runs, newest first, with filters,
and opens one in place. :class:`TriageView` (``TriageView(db, workflows=[wf])``) lists
failures grouped across runs, opens an example in a debugger and retries a group.
:class:`SweepView` (``sweep.view()``) shows a what-if sweep's branches side by side, diffs
two of them and opens one in a debugger.
:func:`served_page` is the page ``smithers-tt serve`` shows through Voila (the run browser,
or a run's debugger at the frame its address names).
:func:`notebook_progress` is a progress bar to pass as ``progress=`` to long work
(``db.verify``, ``db.gc``, lineage snapshots and exports).
"""

from smithers_tt.widgets._browser import RunBrowser
from smithers_tt.widgets._debugger import Debugger
from smithers_tt.widgets._lens import FrameLens
from smithers_tt.widgets._model import DebuggerModel
from smithers_tt.widgets._progress import ProgressBar, notebook_progress
from smithers_tt.widgets._records import ActionResult, DiffResult, Message, Pending
from smithers_tt.widgets._served import served_page
from smithers_tt.widgets._sweepview import SweepView
from smithers_tt.widgets._timeline_data import TimelineData
from smithers_tt.widgets._timeline_figure import build_timeline
from smithers_tt.widgets._triage import TriageView

__all__ = [
    "ActionResult",
    "Debugger",
    "DebuggerModel",
    "DiffResult",
    "FrameLens",
    "Message",
    "Pending",
    "ProgressBar",
    "RunBrowser",
    "SweepView",
    "TimelineData",
    "TriageView",
    "build_timeline",
    "notebook_progress",
    "served_page",
]
