"""The one error tree of smithers_tt.

Every error the library raises on purpose derives from :class:`SmithersError`, carries a
stable ``code`` (for scripts and the ``--json`` CLI output) and says whether retrying the same
call may succeed (``retryable``). Families mix in the matching builtin so generic handlers
(``except ValueError``, ``except LookupError``) keep working::

    SmithersError
    ├── ExtraMissing (ImportError)      an optional dependency is not installed (names the extra)
    ├── InvalidInput (ValueError)
    │   ├── CheckpointInvalid           payload is not strict JSON / envelope malformed
    │   ├── CheckpointTooLarge          canonical bytes above the run's limit
    │   ├── FormatNotDeclared           agent published a format it did not declare
    │   └── InvalidArgument             a bad limit, cursor, URL, option ...
    │       └── AmbiguousRunId          a run id prefix that several runs start with
    ├── NotFound (LookupError)
    │   ├── RunNotFound
    │   ├── AttemptNotFound
    │   ├── FrameNotFound
    │   ├── CheckpointMissing           a ref points at content that is not there
    │   ├── StoreNotFound               no store at the URL (read-only opens never create one)
    │   └── SweepNotFound               no what-if sweep has this id
    ├── StoreError
    │   ├── CheckpointCorrupt           stored bytes fail their SHA-256 or size check
    │   ├── StoreCorrupt                a stored row does not parse, or the file is damaged
    │   ├── UnsafeValue                 a stored value asks to build a type not allowed
    │   ├── RefConflict                 an immutable ref would be rebound
    │   ├── SchemaMismatch              the database has a shape we do not recognise
    │   ├── MigrationError
    │   ├── HistoryExhausted            a history scan hit its documented bound
    │   ├── StoreReadOnly               the store cannot be written here (media, permissions)
    │   ├── DiskError                   the database's disk is full or failed (I/O error)
    │   ├── TransientStoreError         retries inside the store ran out (retryable)
    │   └── OutcomeUnknown              a COMMIT's reply was lost and could not be settled
    ├── ConcurrencyError
    │   ├── FenceLost                   this attempt no longer owns the node
    │   └── LeaseBusy                   another process holds the run's lease
    ├── WorkflowError
    │   ├── TaskFailed
    │   ├── ForkIncompatible
    │   ├── WorkflowChanged
    │   ├── OutputInvalid               output failed its schema after all correction turns
    │   ├── CheckpointPoisoned          an agent asks to discard its attempt's checkpoints
    │   ├── RunCancelled
    │   └── ModelError                  a model server failed or answered unusably (retryable)
    │       └── ModelRequestRejected    the server refused the request as it is (never retried)
    ├── LineageError                   a lineage (DuckDB) query failed
    │   └── LineageUnavailable          DuckDB or its reader is not installed or cannot load
    └── TimeTravelError
        ├── SnapshotInvalid             frames corrupt or too large; nothing was changed
        ├── ConfirmationRequired
        │   └── ForkPointRewound        a rewind would cut runs forked above its frame
        └── NothingToUndo               no rewind kept for undo_rewind, or the run moved on

Errors survive pickling (worker processes, multiprocessing pools): every subclass keeps its
message and attributes through ``pickle.loads(pickle.dumps(err))``.
"""

from __future__ import annotations

from typing import Any, ClassVar


class SmithersError(Exception):
    """Root of every error raised by smithers_tt on purpose."""

    code: ClassVar[str] = "smithers_error"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword details would be lost by the default Exception pickling.
        return (_rebuild, (type(self), self.message, self.details))

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly description: code, message, retryable and details."""
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": {k: _jsonable(v) for k, v in self.details.items()},
        }


def _rebuild(cls: type[SmithersError], message: str, details: dict[str, Any]) -> SmithersError:
    err = cls.__new__(cls)
    SmithersError.__init__(err, message, **details)
    return err


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


# --- missing extras ----------------------------------------------------------------------


class ExtraMissing(SmithersError, ImportError):
    """An optional dependency is not installed; the message names the
    ``pip install 'smithers-tt[extra]'`` that installs it (details: ``module``, ``extra``)."""

    code = "extra_missing"

    def _render_traceback_(self) -> list[str]:
        """IPython shows this instead of a traceback: the one line that says what to install."""
        return [f"{type(self).__name__}: {self.message}"]


# --- invalid input -----------------------------------------------------------------------


class InvalidInput(SmithersError, ValueError):
    """The caller passed something that can never be accepted as it is."""

    code = "invalid_input"


class CheckpointInvalid(InvalidInput):
    """A checkpoint envelope or payload is not strict JSON; ``path`` names the first bad value."""

    code = "checkpoint_invalid"

    @property
    def path(self) -> str | None:
        """JSON path of the offending value, e.g. ``$.payload.messages[3].content``."""
        return self.details.get("path")


class CheckpointTooLarge(InvalidInput):
    """The canonical bytes of a checkpoint exceed the size limit in force."""

    code = "checkpoint_too_large"


class FormatNotDeclared(InvalidInput):
    """An agent published a codec/version it did not declare in ``checkpoint_formats``."""

    code = "format_not_declared"


class InvalidArgument(InvalidInput):
    """An argument is out of range or malformed (limits, cursors, URLs, options)."""

    code = "invalid_argument"


class AmbiguousRunId(InvalidArgument):
    """A run id prefix that several runs start with; ``details["candidates"]`` lists them
    (``"<run id> <workflow> <status>"``)."""

    code = "ambiguous_run_id"


# --- not found ---------------------------------------------------------------------------


class NotFound(SmithersError, LookupError):
    """Something that was asked for does not exist."""

    code = "not_found"


class RunNotFound(NotFound):
    """No run has this id."""

    code = "run_not_found"


class AttemptNotFound(NotFound):
    """No attempt has this key."""

    code = "attempt_not_found"


class FrameNotFound(NotFound):
    """The run has no frame with this number."""

    code = "frame_not_found"


class CheckpointMissing(NotFound):
    """No content is stored under this hash."""

    code = "checkpoint_missing"


class StoreNotFound(NotFound):
    """No smithers_tt store exists at the URL, and the caller asked not to create one."""

    code = "store_not_found"


class SweepNotFound(NotFound):
    """No what-if sweep has this id."""

    code = "sweep_not_found"


# --- store -------------------------------------------------------------------------------


class StoreError(SmithersError):
    """The database refused or could not do what was asked."""

    code = "store_error"


class CheckpointCorrupt(StoreError):
    """Stored checkpoint bytes do not match their SHA-256 address or recorded size."""

    code = "checkpoint_corrupt"


class StoreCorrupt(StoreError):
    """A stored row does not parse (JSON that is not JSON, text that is not UTF-8) or the
    database file is damaged; ``smithers-tt verify`` lists the damaged rows."""

    code = "store_corrupt"


class UnsafeValue(StoreError):
    """A stored value (a LangGraph msgpack value, read by ``SmithersSaver`` or an import)
    asks to construct a type that is not in the allow-list, or is a pickle; nothing was
    constructed (details: ``type``, and ``where``: the thread, checkpoint and channel)."""

    code = "unsafe_value"


class RefConflict(StoreError):
    """An immutable checkpoint ref already exists with different content."""

    code = "ref_conflict"


class SchemaMismatch(StoreError):
    """The database has tables of a shape this version does not recognise."""

    code = "schema_mismatch"


class MigrationError(StoreError):
    """Applying the schema migrations failed; nothing of the failing migration was kept."""

    code = "migration_error"


class HistoryExhausted(StoreError):
    """A history scan reached its documented bound without finding what it looked for."""

    code = "history_exhausted"


class StoreReadOnly(StoreError):
    """The store can only be read here (read-only media, no write permission, or opened
    read-only); nothing was written."""

    code = "store_read_only"


class DiskError(StoreError):
    """The disk that holds the database is full, or failed to read or write (an I/O error);
    nothing was written. Retrying at once cannot help: free space on that disk (or check it),
    then repeat the call."""

    code = "disk_error"


class TransientStoreError(StoreError):
    """The database stayed busy or unreachable through every retry; try again later."""

    code = "transient_store_error"
    retryable = True


class OutcomeUnknown(StoreError):
    """A write's COMMIT reached the database but its answer was lost, and the store could not
    find out whether it committed: the write may or may not have happened.

    Not retryable as it stands: repeating the call could apply the write twice. Look at what
    the write would have changed (the run's status and timeline) once the database is
    reachable again, then repeat the call only if it did not happen.
    """

    code = "outcome_unknown"


# --- concurrency -------------------------------------------------------------------------


class ConcurrencyError(SmithersError):
    """Another owner, process or operation got there first."""

    code = "concurrency_error"


class FenceLost(ConcurrencyError):
    """This attempt no longer owns its node; nothing was written."""

    code = "fence_lost"


class LeaseBusy(ConcurrencyError):
    """Another process holds the run's lease for a destructive operation."""

    code = "lease_busy"
    retryable = True


# --- workflow ----------------------------------------------------------------------------


class WorkflowError(SmithersError):
    """A workflow could not be defined or executed as asked."""

    code = "workflow_error"


class TaskFailed(WorkflowError):
    """A task failed on every attempt its retry policy allowed."""

    code = "task_failed"


class ForkIncompatible(WorkflowError):
    """A task fork's source produced no checkpoint the forking agent can consume."""

    code = "fork_incompatible"


class WorkflowChanged(WorkflowError):
    """The workflow definition differs from the one the run started with."""

    code = "workflow_changed"


class OutputInvalid(WorkflowError):
    """A task's output failed its schema after every schema-correction turn."""

    code = "output_invalid"


class CheckpointPoisoned(WorkflowError):
    """Raised by an agent: fail this attempt and never resume from its checkpoints again."""

    code = "checkpoint_poisoned"


class RunCancelled(WorkflowError):
    """The run was cancelled."""

    code = "run_cancelled"


class ModelError(WorkflowError):
    """A model server failed (timeout, rate limit, 5xx, dropped connection) or answered
    something unusable; the task's retry policy may try again."""

    code = "model_error"
    retryable = True


class ModelRequestRejected(ModelError):
    """The model server refused the request as it is (400 such as a context too long, 401,
    403, 404 ...): asking again cannot succeed, so the task fails at once whatever its retry
    policy. Fix the request, key or model name, then resume the run."""

    code = "model_request_rejected"
    retryable = False


# --- lineage -----------------------------------------------------------------------------


class LineageError(SmithersError):
    """A lineage query failed (bad SQL, a write attempt on the read-only store ...)."""

    code = "lineage_error"


class LineageUnavailable(LineageError):
    """DuckDB, pandas or the reader a lineage needs is not installed or cannot load."""

    code = "lineage_unavailable"


# --- time travel -------------------------------------------------------------------------


class TimeTravelError(SmithersError):
    """A rewind, fork, replay or reset could not be done."""

    code = "time_travel_error"


class SnapshotInvalid(TimeTravelError):
    """A run's frames are corrupt or too large to rebuild a snapshot from; nothing changed."""

    code = "snapshot_invalid"


class ConfirmationRequired(TimeTravelError):
    """A destructive operation was called without ``confirm=True``."""

    code = "confirmation_required"


class ForkPointRewound(ConfirmationRequired):
    """A rewind would remove the frame other runs were forked at; ``force=True`` does it
    anyway (the children stay valid: their base frames restate the parent's state).
    ``details["children"]`` names them."""

    code = "fork_point_rewound"


class NothingToUndo(TimeTravelError):
    """``undo_rewind`` found no rewind it can undo (none kept, or the run changed since)."""

    code = "nothing_to_undo"


def all_errors() -> list[type[SmithersError]]:
    """Every error class of the tree, root first (used by docs and tests)."""
    seen: list[type[SmithersError]] = []
    stack: list[type[SmithersError]] = [SmithersError]
    while stack:
        cls = stack.pop(0)
        seen.append(cls)
        stack.extend(cls.__subclasses__())
    return seen
