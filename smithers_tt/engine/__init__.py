"""The asyncio workflow engine: tasks, attempts, retries, schema correction, forks, resume."""

from smithers_tt.engine._agent import AgentSpec, GenerateRequest, GenerateResult, as_agent
from smithers_tt.engine._executor import AsyncStore, RunExecutor
from smithers_tt.engine._resume import SESSION_CODEC, ResumePoint, fork_point, resume_point
from smithers_tt.engine._sync import run_sync
from smithers_tt.engine._worker import Worker
from smithers_tt.engine._workflow import Loop, Retry, Task, TaskContext, Workflow

__all__ = [
    "SESSION_CODEC",
    "AgentSpec",
    "AsyncStore",
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
    "resume_point",
    "run_sync",
]
