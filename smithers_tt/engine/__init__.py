"""The asyncio workflow engine: tasks, attempts, retries, schema correction, forks, resume."""

from smithers_tt.engine._agent import AgentSpec, GenerateRequest, GenerateResult, as_agent
from smithers_tt.engine._executor import CANCEL_GRACE, AsyncStore, EventCallback, RunExecutor
from smithers_tt.engine._resume import SESSION_CODEC, ResumePoint, fork_point, resume_point
from smithers_tt.engine._sync import run_sync
from smithers_tt.engine._worker import Worker, positive_seconds
from smithers_tt.engine._workflow import Loop, Retry, Task, TaskContext, Workflow

__all__ = [
    "CANCEL_GRACE",
    "SESSION_CODEC",
    "AgentSpec",
    "AsyncStore",
    "EventCallback",
    "GenerateRequest",
    "GenerateResult",
    "Loop",
    "ResumePoint",
    "Retry",
    "RunExecutor",
    "Task",
    "TaskContext",
    "Worker",
    "Workflow",
    "as_agent",
    "fork_point",
    "positive_seconds",
    "resume_point",
    "run_sync",
]
