"""The asyncio workflow engine: tasks, attempts, retries, schema correction, forks, resume."""

from smithers_tt.engine._agent import AgentSpec, GenerateRequest, GenerateResult, as_agent
from smithers_tt.engine._astore import AsyncStore
from smithers_tt.engine._continue import (
    ACTIONS,
    Continuation,
    ContinueOptions,
    action_of,
    breakpoints,
    continue_paused,
)
from smithers_tt.engine._continue import prepare as prepare_continue
from smithers_tt.engine._executor import CANCEL_GRACE, EventCallback, RunExecutor
from smithers_tt.engine._pauses import REASONS, Pause, PauseHistory, pause_history, pause_of
from smithers_tt.engine._resume import (
    SESSION_CODEC,
    ResumePoint,
    claim_unless_ended,
    fork_point,
    resume_point,
)
from smithers_tt.engine._sync import run_sync
from smithers_tt.engine._watch import Watching
from smithers_tt.engine._worker import Worker, positive_seconds
from smithers_tt.engine._workflow import Loop, Retry, Task, TaskContext, Workflow

__all__ = [
    "ACTIONS",
    "CANCEL_GRACE",
    "REASONS",
    "SESSION_CODEC",
    "AgentSpec",
    "AsyncStore",
    "Continuation",
    "ContinueOptions",
    "EventCallback",
    "GenerateRequest",
    "GenerateResult",
    "Loop",
    "Pause",
    "PauseHistory",
    "ResumePoint",
    "Retry",
    "RunExecutor",
    "Task",
    "TaskContext",
    "Watching",
    "Worker",
    "Workflow",
    "action_of",
    "as_agent",
    "breakpoints",
    "claim_unless_ended",
    "continue_paused",
    "fork_point",
    "pause_history",
    "pause_of",
    "positive_seconds",
    "prepare_continue",
    "resume_point",
    "run_sync",
]
