"""The debugger's controller: pure Python, no widgets, so every behaviour is testable without a
browser (and without ipywidgets).

:class:`DebuggerModel` holds the one state of a debugger (:mod:`~smithers_tt.widgets._state`,
which lists the changes it announces) and is made of one part per role, each in its own
module: it reads the database (:mod:`~smithers_tt.widgets._loading`,
:mod:`~smithers_tt.widgets._refresh`, :mod:`~smithers_tt.widgets._content`), names what it
shows (:mod:`~smithers_tt.widgets._naming`), holds what is selected
(:mod:`~smithers_tt.widgets._selection`), computes diffs (:mod:`~smithers_tt.widgets._diffs`)
and runs the actions (rewind, fork, replay) behind an explicit confirmation step
(:mod:`~smithers_tt.widgets._forms`, :mod:`~smithers_tt.widgets._control`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.widgets._content import Content
from smithers_tt.widgets._control import Control
from smithers_tt.widgets._diffs import Diffs
from smithers_tt.widgets._forms import Forms
from smithers_tt.widgets._loading import Loading, _Read, _Reading
from smithers_tt.widgets._naming import Naming
from smithers_tt.widgets._preload import HistoryRead
from smithers_tt.widgets._refresh import Refresh
from smithers_tt.widgets._selection import Selection


class DebuggerModel(Loading, Refresh, Content, Naming, Selection, Diffs, Forms, Control):
    """Selected run, frame, ref and diff pair of one debugger, and its actions.

    Args:
        db: a :class:`smithers_tt.Database`.
        run_id: the run to show first.
        workflow: the workflow definition; needed only by Replay.
        lens: what to call the run's frames, nodes and checkpoints, and what to diff (a
            :class:`~smithers_tt.widgets.FrameLens`; None: smithers_tt's own terms).
    """

    def __init__(self, db: Any, run_id: str, workflow: Any = None, lens: Any = None) -> None:
        self.db = db
        self.workflow = workflow
        self.lens = lens
        self._observers = {}
        self._payloads: OrderedDict[str, AgentCheckpoint] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self.background = None
        self.message = None
        self.pending = None
        self.last_result = None
        self._preload: HistoryRead[_Read] | None = None
        self._partial: _Reading | None = None
        self.counted_choices: tuple[str, int, Any] | None = None
        """(run, last frame, ``FrameChoices``) the timeline's last figure counted in SQL for
        the frame table's filters (None when it walked the frames instead)."""
        self._load_run(run_id)
