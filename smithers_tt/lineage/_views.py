"""The documented views a :class:`~smithers_tt.lineage.Lineage` defines, and their columns.

Every view reads the ``raw`` schema, which mirrors the store's tables with DuckDB types chosen
from the type family of each column
(:func:`smithers_tt.store.for_lineage.describe_tables`: the store's one schema definition,
described as plain data) whichever backend and reader sits underneath.
``raw.tt_checkpoint_contents`` has no ``data`` column; the canonical bytes live in
``raw.tt_checkpoint_data`` (``content_hash``, ``data``) so that sizes never need the bytes.

Each :class:`View` carries its column documentation; a test checks it against the columns the
view really has, so the documentation cannot drift from the SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from smithers_tt.lineage._refcheck import REFS
from smithers_tt.store.for_lineage import TableInfo, describe_tables

CONTENTS_TABLE = "tt_checkpoint_contents"
"""The store table holding each content's hash, size and canonical bytes (``data``)."""

MIRRORED: tuple[TableInfo, ...] = describe_tables(
    (
        "tt_runs",
        "tt_nodes",
        "tt_attempts",
        CONTENTS_TABLE,
        "tt_checkpoint_refs",
        "tt_frames",
        "tt_cache",
        "tt_audit",
        "tt_workers",
        "tt_run_labels",
        "tt_model_calls",
    )
)
"""Store tables mirrored (typed, read-only) in the ``raw`` schema."""

INHERITED = ("tt_nodes", "tt_attempts", "tt_checkpoint_refs", "tt_frames")
"""The tables a fork by reference has rows of once materialised (the lineage adds them:
:mod:`smithers_tt.lineage._inherited`)."""

DATA_TABLE = "tt_checkpoint_data"
"""The ``raw`` relation holding ``(content_hash, data)``: the canonical bytes of each content."""

DUCKDB_TYPES = {
    "boolean": "BOOLEAN",
    "bigint": "BIGINT",
    "integer": "INTEGER",
    "double": "DOUBLE",
    "bytes": "BLOB",
    "text": "VARCHAR",
}
"""The DuckDB type of each column type family of the store (SQLite and PostgreSQL alike)."""


def arrow_type(duck: str) -> Any:
    """The Arrow type of a DuckDB column type of :data:`DUCKDB_TYPES` (pyarrow needed)."""
    import pyarrow as pa

    return {
        "BOOLEAN": pa.bool_(),
        "BIGINT": pa.int64(),
        "INTEGER": pa.int32(),
        "DOUBLE": pa.float64(),
        "VARCHAR": pa.string(),
        "BLOB": pa.binary(),
    }[duck]


def raw_columns(table: TableInfo) -> list[tuple[str, str]]:
    """``(name, DuckDB type)`` of the columns ``raw.<table>`` exposes: no content bytes, and
    not the LangGraph saver's rank of a call's task (``lg_key``: its own, and a store before
    migration 0019 has none)."""
    return [
        (c.name, DUCKDB_TYPES[c.family]) for c in table.columns if c.name not in ("data", "lg_key")
    ]


@dataclass(frozen=True)
class View:
    """One documented view: its name, what a row is, its columns and its SQL."""

    name: str
    summary: str
    columns: tuple[tuple[str, str], ...]
    sql: str
    materialize: bool = False
    """Stored as a table in a snapshot (a join or group-by worth doing once), instead of a
    view; it may read views stored before it."""

    def doc(self) -> str:
        """What a row is and the column documentation, as a reStructuredText list."""
        width = max(len(name) for name, _ in self.columns)
        lines = [f"``{self.name}``: {self.summary}", ""]
        lines += [f"- ``{name}``{' ' * (width - len(name))}  {text}" for name, text in self.columns]
        return "\n".join(lines)


_TIMES = "wall-clock milliseconds (for people; ordering uses frame numbers)"

RUNS = View(
    "runs",
    "one row per run, with how much it holds.",
    (
        ("run_id", "the run's id"),
        ("workflow", "the workflow's name"),
        ("status", "queued, running, finished, failed, cancelled or interrupted"),
        ("parent_run_id", "the run it was forked from (NULL for an original run)"),
        ("parent_frame_no", "the parent's frame the fork started from (NULL likewise)"),
        ("error", "why the run failed (NULL otherwise)"),
        ("clock", "the run's logical clock: the number of its newest frame"),
        ("owner_epoch", "how many times the run was claimed, taken over, reset or cancelled"),
        ("owner_id", "the process (worker id) that owns the run now (NULL when none does)"),
        ("heartbeat_at_ms", f"the owner's last heartbeat on this run, {_TIMES}"),
        ("created_at_ms", f"when the run was created, {_TIMES}"),
        ("updated_at_ms", "when the run last changed, likewise"),
        ("created_at", "``created_at_ms`` as a UTC TIMESTAMP"),
        ("updated_at", "``updated_at_ms`` as a UTC TIMESTAMP"),
        ("node_count", "nodes (node, iteration pairs) of the run"),
        ("attempt_count", "attempts of the run, every state"),
        ("failed_attempt_count", "attempts that ended ``failed``"),
        ("ref_count", "checkpoint refs of the run"),
        ("frame_count", "public frames (``frame_no >= 0``) of the run"),
        ("labels", "the run's labels as a JSON object (``{}`` when it has none)"),
    ),
    """
    WITH n AS (SELECT run_id, count(*) AS node_count FROM raw.tt_nodes GROUP BY run_id),
    a AS (
        SELECT run_id, count(*) AS attempt_count,
               count(*) FILTER (WHERE state = 'failed') AS failed_attempt_count
        FROM raw.tt_attempts GROUP BY run_id
    ),
    r AS (SELECT run_id, count(*) AS ref_count FROM raw.tt_checkpoint_refs GROUP BY run_id),
    f AS (
        SELECT run_id, count(*) AS frame_count FROM raw.tt_frames
        WHERE frame_no >= 0 GROUP BY run_id
    ),
    l AS (
        SELECT run_id, to_json(map(list(key ORDER BY key), list(value ORDER BY key))) AS labels
        FROM raw.tt_run_labels GROUP BY run_id
    )
    SELECT run.run_id, run.workflow, run.status, run.parent_run_id, run.parent_frame_no,
           run.error, run.clock, run.owner_epoch, run.owner_id, run.heartbeat_at_ms,
           run.created_at_ms, run.updated_at_ms,
           epoch_ms(run.created_at_ms) AS created_at, epoch_ms(run.updated_at_ms) AS updated_at,
           coalesce(n.node_count, 0) AS node_count,
           coalesce(a.attempt_count, 0) AS attempt_count,
           coalesce(a.failed_attempt_count, 0) AS failed_attempt_count,
           coalesce(r.ref_count, 0) AS ref_count,
           coalesce(f.frame_count, 0) AS frame_count,
           coalesce(l.labels, CAST('{}' AS JSON)) AS labels
    FROM raw.tt_runs AS run
    LEFT JOIN n USING (run_id) LEFT JOIN a USING (run_id)
    LEFT JOIN r USING (run_id) LEFT JOIN f USING (run_id) LEFT JOIN l USING (run_id)
    """,
)

NODES = View(
    "nodes",
    "one row per node of a run (a task at one loop iteration).",
    (
        ("run_id", "the run"),
        ("node_id", "the task's id"),
        ("iteration", "the loop turn, from 0"),
        ("state", "pending, running, finished, failed, cancelled, skipped or cached"),
        ("last_attempt", "the newest attempt's number (NULL before the first)"),
        ("output_json", "the node's output as JSON (NULL until it finished)"),
        ("updated_at_ms", f"when the node last changed, {_TIMES}"),
    ),
    """
    SELECT run_id, node_id, iteration, state, last_attempt,
           CAST(output_json AS JSON) AS output_json, updated_at_ms
    FROM raw.tt_nodes
    """,
)

ATTEMPTS = View(
    "attempts",
    "one row per attempt (every try of a node, retries and resumes included).",
    (
        ("run_id", "the run"),
        ("node_id", "the task's id"),
        ("iteration", "the loop turn, from 0"),
        ("attempt", "the attempt's number, from 1"),
        ("state", "in_progress, finished, failed, cancelled, interrupted or reset"),
        ("error", "the error message of a failed attempt (NULL otherwise)"),
        ("error_code", "the error's type or code (NULL otherwise)"),
        ("owner_epoch", "the run epoch that executed the attempt"),
        ("next_sequence", "sequence numbers allocated so far (refs published, when dense)"),
        ("discard_resume", "the agent asked not to resume from this attempt's checkpoints"),
        ("resumed_run_id", "run of the checkpoint ref the attempt resumed from (NULL: fresh)"),
        ("resumed_node_id", "node of that ref"),
        ("resumed_iteration", "iteration of that ref"),
        ("resumed_attempt", "attempt of that ref"),
        ("resumed_sequence", "sequence of that ref"),
        ("started_at_ms", f"when the attempt started, {_TIMES}"),
        ("finished_at_ms", "when it ended (NULL while in progress)"),
        ("started_at", "``started_at_ms`` as a UTC TIMESTAMP"),
        ("finished_at", "``finished_at_ms`` as a UTC TIMESTAMP"),
        ("duration_ms", "``finished_at_ms - started_at_ms`` (NULL while in progress)"),
    ),
    """
    SELECT run_id, node_id, iteration, attempt, state, error, error_code, owner_epoch,
           next_sequence, discard_resume, resumed_run_id, resumed_node_id, resumed_iteration,
           resumed_attempt, resumed_sequence, started_at_ms, finished_at_ms,
           epoch_ms(started_at_ms) AS started_at, epoch_ms(finished_at_ms) AS finished_at,
           finished_at_ms - started_at_ms AS duration_ms
    FROM raw.tt_attempts
    """,
)

CHECKPOINTS = View(
    "checkpoints",
    "one row per checkpoint ref, with the size of the content it points at.",
    (
        ("run_id", "the run"),
        ("node_id", "the task's id"),
        ("iteration", "the loop turn, from 0"),
        ("attempt", "the attempt that published it"),
        ("sequence", "its number within the attempt, dense from 0"),
        ("codec", "the checkpoint's codec"),
        ("version", "the codec version, from 1"),
        ("purpose", "progress, turn, schema-correction or session"),
        ("agent_id", "the agent that published it (may be NULL)"),
        ("content_hash", "SHA-256 of the canonical bytes (shared by identical checkpoints)"),
        ("size_bytes", "size of those bytes, as recorded with the checkpoint (NULL if unknown)"),
        ("created_at_ms", f"when it was published, {_TIMES}"),
        ("created_at", "``created_at_ms`` as a UTC TIMESTAMP"),
    ),
    f"""
    SELECT run_id, node_id, iteration, attempt, sequence, codec, version, purpose, agent_id,
           content_hash, size_bytes, created_at_ms, epoch_ms(created_at_ms) AS created_at
    FROM {REFS}
    """,  # noqa: S608 (constants)
    materialize=True,
)

CONTENTS = View(
    "contents",
    "one row per stored content (distinct canonical bytes), with how often it is used.",
    (
        ("content_hash", "SHA-256 of the canonical bytes"),
        ("size_bytes", "their size"),
        ("created_at_ms", f"when they were first stored, {_TIMES}"),
        ("ref_count", "checkpoint refs pointing at them"),
        ("run_count", "distinct runs among those refs"),
    ),
    """
    WITH used AS (
        SELECT content_hash, count(*) AS ref_count, count(DISTINCT run_id) AS run_count
        FROM checkpoints GROUP BY content_hash
    )
    SELECT c.content_hash, c.size_bytes, c.created_at_ms,
           coalesce(u.ref_count, 0) AS ref_count, coalesce(u.run_count, 0) AS run_count
    FROM raw.tt_checkpoint_contents AS c LEFT JOIN used AS u USING (content_hash)
    """,
)

PAYLOADS = View(
    "checkpoint_payloads",
    "one row per stored content, its canonical bytes decoded as DuckDB JSON (read, never run).",
    (
        ("content_hash", "SHA-256 of the canonical bytes; join ``checkpoints`` on it"),
        ("size_bytes", "size of the bytes"),
        ("codec", "``json ->> '$.codec'``"),
        ("version", "``json ->> '$.version'`` as an INTEGER"),
        (
            "json",
            "the envelope ``{codec, payload, version}`` as JSON (NULL if the bytes are not "
            "UTF-8 JSON); use DuckDB JSON functions, e.g. "
            "``json_array_length(json -> '$.payload.messages')``",
        ),
    ),
    """
    WITH decoded AS (
        SELECT content_hash, octet_length(data) AS size_bytes,
               TRY_CAST(try(decode(data)) AS JSON) AS json
        FROM raw.tt_checkpoint_data
    )
    SELECT content_hash, size_bytes, json ->> '$.codec' AS codec,
           TRY_CAST(json ->> '$.version' AS INTEGER) AS version, json
    FROM decoded
    """,
)

FRAMES = View(
    "frames",
    "one row per public frame (``frame_no >= 0``): the numbered state changes of a run.",
    (
        ("run_id", "the run"),
        ("frame_no", "the frame's number: the run's logical clock at this change (0, 1, 2 ...)"),
        ("kind", "run_created, attempt_started, checkpoint, node_state, forked, reset, ..."),
        ("node_id", "the node the change is about (NULL for run-level frames)"),
        ("iteration", "its iteration"),
        ("attempt", "the attempt"),
        ("sequence", "the checkpoint's sequence (checkpoint frames)"),
        ("state", "the new state (node_state and attempt frames)"),
        ("content_hash", "the content a checkpoint frame pins"),
        ("codec", "its codec"),
        ("version", "its codec version"),
        ("purpose", "its purpose"),
        ("agent_id", "its agent"),
        ("data_json", "other details of the change, as JSON"),
        ("created_at_ms", f"when the frame was committed, {_TIMES}"),
        ("created_at", "``created_at_ms`` as a UTC TIMESTAMP"),
    ),
    """
    SELECT run_id, frame_no, kind, node_id, iteration, attempt, sequence, state,
           content_hash, codec, version, purpose, agent_id,
           CAST(CASE WHEN data_json IS NULL AND size_bytes IS NOT NULL AND kind = 'checkpoint'
                     THEN '{"size":' || size_bytes || '}' ELSE data_json END AS JSON)
               AS data_json, created_at_ms,
           epoch_ms(created_at_ms) AS created_at
    FROM raw.tt_frames
    WHERE frame_no >= 0
    """,
)

FORKS = View(
    "forks",
    "one row per forked run: the edge from its parent, and its place in the fork tree.",
    (
        ("child_run_id", "the forked run"),
        ("parent_run_id", "the run it was forked from"),
        ("parent_frame_no", "the parent's frame that is the child's frame 0"),
        ("root_run_id", "the original run at the top of the tree (NULL if a parent is gone)"),
        ("depth", "forks between the root and the child (1 for a direct fork)"),
        ("workflow", "the child's workflow"),
        ("status", "the child's status"),
        ("created_at_ms", f"when the child was created, {_TIMES}"),
    ),
    """
    WITH RECURSIVE tree(run_id, root_run_id, depth) AS (
        SELECT run_id, run_id, 0 FROM raw.tt_runs WHERE parent_run_id IS NULL
        UNION ALL
        SELECT c.run_id, t.root_run_id, t.depth + 1
        FROM raw.tt_runs AS c JOIN tree AS t ON c.parent_run_id = t.run_id
    )
    SELECT c.run_id AS child_run_id, c.parent_run_id, c.parent_frame_no, t.root_run_id,
           CAST(t.depth AS BIGINT) AS depth, c.workflow, c.status, c.created_at_ms
    FROM raw.tt_runs AS c LEFT JOIN tree AS t USING (run_id)
    WHERE c.parent_run_id IS NOT NULL
    """,
)

_DEDUP_COLUMNS = (
    ("ref_count", "checkpoint refs"),
    ("content_count", "distinct contents those refs point at"),
    ("logical_bytes", "sum of the content size over every ref (what copying would store)"),
    ("stored_bytes", "sum of the size of each distinct content once (what is stored)"),
    ("ratio", "``logical_bytes / stored_bytes`` (NULL when nothing is stored)"),
)

DEDUP = View(
    "dedup",
    "content de-duplication per codec, plus one overall row.",
    (
        ("scope", "``codec`` for a per-codec row, ``all`` for the overall row (last)"),
        ("codec", "the codec (NULL on the overall row)"),
        *_DEDUP_COLUMNS,
    ),
    """
    WITH sized AS MATERIALIZED (
        SELECT codec, content_hash, size_bytes FROM checkpoints WHERE size_bytes IS NOT NULL
    ),
    per_codec AS (
        SELECT codec, content_hash, any_value(size_bytes) AS size_bytes, count(*) AS refs
        FROM sized GROUP BY codec, content_hash
    ),
    per_hash AS (
        SELECT content_hash, any_value(size_bytes) AS size_bytes, count(*) AS refs
        FROM sized GROUP BY content_hash
    ),
    combined AS (
        SELECT 'codec' AS scope, codec, sum(refs) AS ref_count, count(*) AS content_count,
               sum(refs * size_bytes) AS logical_bytes, sum(size_bytes) AS stored_bytes
        FROM per_codec GROUP BY codec
        UNION ALL
        SELECT 'all', NULL, coalesce(sum(refs), 0), count(*),
               coalesce(sum(refs * size_bytes), 0), coalesce(sum(size_bytes), 0)
        FROM per_hash
    )
    SELECT scope, codec, CAST(ref_count AS BIGINT) AS ref_count,
           CAST(content_count AS BIGINT) AS content_count,
           CAST(logical_bytes AS BIGINT) AS logical_bytes,
           CAST(stored_bytes AS BIGINT) AS stored_bytes,
           CAST(logical_bytes AS DOUBLE) / nullif(stored_bytes, 0) AS ratio
    FROM combined
    """,
    materialize=True,
)

RUN_DEDUP = View(
    "run_dedup",
    "content de-duplication within each run that has checkpoint refs.",
    (("run_id", "the run"), *_DEDUP_COLUMNS),
    """
    WITH per_content AS (
        SELECT run_id, content_hash, any_value(size_bytes) AS size_bytes, count(*) AS refs
        FROM checkpoints WHERE size_bytes IS NOT NULL
        GROUP BY run_id, content_hash
    )
    SELECT run_id, CAST(sum(refs) AS BIGINT) AS ref_count,
           CAST(count(*) AS BIGINT) AS content_count,
           CAST(sum(refs * size_bytes) AS BIGINT) AS logical_bytes,
           CAST(sum(size_bytes) AS BIGINT) AS stored_bytes,
           CAST(sum(refs * size_bytes) AS DOUBLE) / nullif(sum(size_bytes), 0) AS ratio
    FROM per_content GROUP BY run_id
    """,
    materialize=True,
)

AUDIT = View(
    "audit",
    "one row per destructive or time-travel operation (rewind, fork, reset ...).",
    (
        ("audit_id", "the entry's id"),
        ("run_id", "the run it changed"),
        ("operation", "the operation"),
        ("frame_no", "the frame it targeted (if any)"),
        ("actor", "who did it (if recorded)"),
        ("detail_json", "details, as JSON"),
        ("created_at_ms", f"when it happened, {_TIMES}"),
    ),
    """
    SELECT audit_id, run_id, operation, frame_no, actor,
           CAST(detail_json AS JSON) AS detail_json, created_at_ms
    FROM raw.tt_audit
    """,
)

WORKERS = View(
    "workers",
    "one row per registered worker process, with the runs it owns now.",
    (
        ("worker_id", "the worker's id (``--id``, default host:pid)"),
        ("host", "the host it runs on"),
        ("pid", "its process id"),
        ("workflows_json", "the workflow names it executes, as JSON"),
        ("state", "running or stopped as the worker last recorded it (a killed one stays running)"),
        ("started_at_ms", f"when it registered, {_TIMES}"),
        ("heartbeat_at_ms", "its last heartbeat, likewise (compare with now to find silent ones)"),
        ("owned_runs", "runs it owns now (status running)"),
    ),
    """
    WITH o AS (
        SELECT owner_id AS worker_id, count(*) AS owned_runs FROM raw.tt_runs
        WHERE status = 'running' AND owner_id IS NOT NULL GROUP BY owner_id
    )
    SELECT w.worker_id, w.host, w.pid, CAST(w.workflows_json AS JSON) AS workflows_json,
           w.state, w.started_at_ms, w.heartbeat_at_ms, coalesce(o.owned_runs, 0) AS owned_runs
    FROM raw.tt_workers AS w LEFT JOIN o USING (worker_id)
    """,
)

RUN_LABELS = View(
    "run_labels",
    "one row per label of a run (``JOIN run_labels USING (run_id)`` to keep labelled runs).",
    (
        ("run_id", "the run"),
        ("key", "the label's key (``case``)"),
        ("value", "its value (``retry``)"),
    ),
    """
    SELECT run_id, key, value FROM raw.tt_run_labels
    """,
)

PRICES_TABLE = "model_prices"
"""The lineage's table of prices (``model``, ``input``, ``output``, ``cached_input``, per
million tokens), filled from the ``prices`` a lineage is opened with (empty without)."""

MODEL_CALLS = View(
    "model_calls",
    "one row per model call an agent made (each HTTP try, continuation and streamed reply), "
    "under the run that recorded it, as long as its frame is in the history (not rewound).",
    (
        ("run_id", "the run that recorded the call"),
        ("node_id", "the task's id"),
        ("iteration", "the loop turn, from 0"),
        ("attempt", "the attempt that made the call"),
        ("frame_no", "the frame it was written with (a checkpoint, or the attempt's end)"),
        ("position", "its order among the calls of that frame, from 0"),
        ("call_id", "the call's id"),
        ("model", "the model that answered (else the one asked)"),
        ("finish_reason", "stop, length, tool_calls ... (NULL when it failed)"),
        ("prompt_tokens", "prompt tokens the server reported (NULL: not reported)"),
        ("completion_tokens", "completion tokens (reasoning included) it reported"),
        ("cached_tokens", "prompt tokens served from the provider's cache"),
        ("reasoning_tokens", "completion tokens spent reasoning"),
        ("total_tokens", "prompt + completion (NULL when neither was reported)"),
        ("started_at_ms", f"when the call was sent, {_TIMES}"),
        ("started_at", "``started_at_ms`` as a UTC TIMESTAMP"),
        ("ttft_ms", "milliseconds to the first token of a streamed reply (NULL otherwise)"),
        ("latency_ms", "milliseconds to the end of the reply (or of the failure)"),
        ("status", "the HTTP status (NULL: no answer, or not over HTTP)"),
        ("error", "why the call failed (NULL when it did not)"),
        (
            "cost",
            f"by the lineage's ``{PRICES_TABLE}`` (per million tokens); NULL for a model it "
            "does not price or a call that reported no tokens: never guessed",
        ),
        ("request_hash", "content hash of the request's messages (``checkpoint_payloads``)"),
        ("reply_hash", "content hash of the reply's message"),
        ("inherited", "always false here (a fork's inherited calls are its parent's rows)"),
    ),
    f"""
    SELECT c.run_id, c.node_id, c.iteration, c.attempt, c.frame_no, c.position, c.call_id,
           c.model, c.finish_reason, c.prompt_tokens, c.completion_tokens, c.cached_tokens,
           c.reasoning_tokens,
           CASE WHEN c.prompt_tokens IS NULL AND c.completion_tokens IS NULL THEN NULL
                ELSE coalesce(c.prompt_tokens, 0) + coalesce(c.completion_tokens, 0)
           END AS total_tokens,
           c.started_at_ms, epoch_ms(c.started_at_ms) AS started_at, c.ttft_ms, c.latency_ms,
           c.status, c.error,
           CASE WHEN c.prompt_tokens IS NULL AND c.completion_tokens IS NULL THEN NULL
                ELSE ((coalesce(c.prompt_tokens, 0)
                       - least(coalesce(c.cached_tokens, 0), coalesce(c.prompt_tokens, 0)))
                      * p.input
                      + least(coalesce(c.cached_tokens, 0), coalesce(c.prompt_tokens, 0))
                      * p.cached_input
                      + coalesce(c.completion_tokens, 0) * p.output) / 1000000.0
           END AS cost,
           c.request_hash, c.reply_hash, false AS inherited
    FROM raw.tt_model_calls AS c LEFT JOIN {PRICES_TABLE} AS p ON p.model = c.model
    WHERE c.rewind_id IS NULL
    """,  # noqa: S608 (constants)
)

VIEWS: tuple[View, ...] = (
    RUNS,
    RUN_LABELS,
    NODES,
    ATTEMPTS,
    CHECKPOINTS,
    CONTENTS,
    PAYLOADS,
    FRAMES,
    FORKS,
    DEDUP,
    RUN_DEDUP,
    AUDIT,
    WORKERS,
    MODEL_CALLS,
)
"""Every view, in the order they are created and exported."""

BY_NAME = {view.name: view for view in VIEWS}
"""Every view by name."""
