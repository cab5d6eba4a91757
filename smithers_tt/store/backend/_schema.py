"""The one definition of every table. Migrations create and check tables from this module.

All names start with ``tt_`` so the tables can share a database with an application.
Timestamps (``*_at_ms``) are wall-clock milliseconds for people to read; ordering decisions
never use them (the per-run logical ``clock`` does that).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    text,
)

metadata = MetaData()

RUN_STATUSES = ("queued", "running", "finished", "failed", "cancelled", "interrupted", "paused")
ATTEMPT_STATES = ("in_progress", "finished", "failed", "cancelled", "interrupted", "reset")
PURPOSES = ("progress", "turn", "schema-correction", "session")

HASH = String(64)
ID = String(200)


def _in(column: str, values: tuple[str, ...]) -> str:
    # Literals from the constants above, never from user input.
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _any(column: str, values: tuple[str, ...]) -> str:
    """``column`` is one of ``values``, as a chain of ``OR``s: what a CHECK constraint (0018)
    and a partial index's predicate (0012) are on SQLite, where an ``IN`` list costs a
    temporary table of its values per row written."""
    return f"({' OR '.join(f'{column} = {v!r}' for v in values)})"


migrations_table = Table(
    "tt_migrations",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("checksum", HASH, nullable=False),
    Column("applied_at_ms", BigInteger, nullable=False),
)

runs = Table(
    "tt_runs",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("workflow", String(200), nullable=False),
    Column("workflow_hash", HASH, nullable=True),
    Column("status", String(20), nullable=False),
    Column("input_json", Text, nullable=True),
    Column("output_json", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("owner_epoch", BigInteger, nullable=False),
    Column("owner_id", String(200), nullable=True),
    Column("heartbeat_at_ms", BigInteger, nullable=True),
    Column("cancel_requested", Boolean, nullable=False),
    Column("parent_run_id", ID, nullable=True),
    Column("parent_frame_no", BigInteger, nullable=True),
    Column("max_checkpoint_bytes", Integer, nullable=True),
    Column("clock", BigInteger, nullable=False),
    Column("graph_json", Text, nullable=True),
    Column("inherits", Boolean, nullable=True),
    Column("lease_owner", String(200), nullable=True),
    Column("lease_until_ms", BigInteger, nullable=True),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
    Column("hides", Boolean, nullable=True),
    CheckConstraint(_any("status", RUN_STATUSES), name="tt_runs_status"),
    CheckConstraint("owner_epoch >= 0", name="tt_runs_epoch"),
)
Index("tt_runs_parent", runs.c.parent_run_id)
"""``inherits`` is true on a fork made by reference that has not been materialised: its
history before frame 0 is its parent's up to ``parent_frame_no`` (read there, never copied)
and it has no live nodes, attempts or refs of its own yet (see
:mod:`smithers_tt.timetravel._inherit`). ``hides`` is true when frames above ``clock`` may be
stored (a rewind's cut, kept for its undo): the run's next frame deletes them first (NULL
otherwise)."""
Index("tt_runs_status_idx", runs.c.status, runs.c.run_id)

run_labels = Table(
    "tt_run_labels",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("key", String(64), primary_key=True),
    Column("value", String(200), nullable=False),
    ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
)
"""A run's labels (``smithers_tt._labels``), one row per key, written with the run (its
creation, or its fork) and never changed; deleting the run deletes them. A table rather than a
JSON column of ``tt_runs``: "runs labelled case=retry" is an index probe on both backends and
in DuckDB, in SQL each of them speaks the same, with no JSON path to quote."""
Index("tt_run_labels_value", run_labels.c.key, run_labels.c.value, run_labels.c.run_id)

NODE_STATES = ("pending", "running", "finished", "failed", "cancelled", "skipped", "cached")

nodes = Table(
    "tt_nodes",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("node_id", String(200), primary_key=True),
    Column("iteration", Integer, primary_key=True),
    Column("state", String(20), nullable=False),
    Column("last_attempt", Integer, nullable=True),
    Column("output_json", Text, nullable=True),
    Column("updated_at_ms", BigInteger, nullable=False),
    ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
    CheckConstraint(_any("state", NODE_STATES), name="tt_nodes_state"),
)

attempts = Table(
    "tt_attempts",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("node_id", String(200), primary_key=True),
    Column("iteration", Integer, primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("state", String(20), nullable=False),
    Column("owner_epoch", BigInteger, nullable=False),
    Column("next_sequence", Integer, nullable=False),
    Column("discard_resume", Boolean, nullable=False),
    Column("error", Text, nullable=True),
    Column("error_code", String(100), nullable=True),
    Column("resumed_run_id", ID, nullable=True),
    Column("resumed_node_id", String(200), nullable=True),
    Column("resumed_iteration", Integer, nullable=True),
    Column("resumed_attempt", Integer, nullable=True),
    Column("resumed_sequence", Integer, nullable=True),
    Column("started_at_ms", BigInteger, nullable=False),
    Column("finished_at_ms", BigInteger, nullable=True),
    ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
    CheckConstraint(_any("state", ATTEMPT_STATES), name="tt_attempts_state"),
    CheckConstraint("attempt >= 1 AND iteration >= 0", name="tt_attempts_numbers"),
)

contents = Table(
    "tt_checkpoint_contents",
    metadata,
    Column("content_hash", HASH, primary_key=True),
    Column("data", LargeBinary, nullable=False),
    Column("size_bytes", Integer, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    CheckConstraint("length(content_hash) = 64", name="tt_contents_hash"),
)

refs = Table(
    "tt_checkpoint_refs",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("node_id", String(200), primary_key=True),
    Column("iteration", Integer, primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("sequence", Integer, primary_key=True),
    Column("frame_no", BigInteger, nullable=False),
    ForeignKeyConstraint(
        ["run_id", "node_id", "iteration", "attempt"],
        [
            "tt_attempts.run_id",
            "tt_attempts.node_id",
            "tt_attempts.iteration",
            "tt_attempts.attempt",
        ],
        ondelete="CASCADE",
    ),
    CheckConstraint("sequence >= 0", name="tt_refs_numbers"),
    sqlite_with_rowid=False,
)
"""A live ref: its key and ``frame_no``, the checkpoint frame of the same run that holds its
content hash, codec, version, purpose, agent and time (readers join on ``(run_id,
frame_no)``; the hash is stored once per publish, in the frame)."""

FRAME_KINDS = (
    "run_created",
    "run_claimed",
    "run_finished",
    "run_failed",
    "run_cancelled",
    "cancel_requested",
    "attempt_started",
    "checkpoint",
    "attempt_finished",
    "node_state",
    "cache_hit",
    "forked",
    "reset",
    "run_paused",
    "run_continued",
    "run_released",
    "breakpoints_set",
)

frame_rows = Table(
    "tt_frame_rows",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("frame_no", BigInteger, primary_key=True),
    Column("kind", String(30), nullable=False),
    Column("node_id", String(200), nullable=True),
    Column("iteration", Integer, nullable=True),
    Column("attempt", Integer, nullable=True),
    Column("sequence", Integer, nullable=True),
    Column("state", String(20), nullable=True),
    Column("content_hash", HASH, nullable=True),
    Column("codec", String(200), nullable=True),
    Column("version", Integer, nullable=True),
    Column("purpose", String(20), nullable=True),
    Column("agent_id", String(200), nullable=True),
    Column("data_json", Text, nullable=True),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("size_bytes", Integer, nullable=True),
    ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
    CheckConstraint(_any("kind", FRAME_KINDS), name="tt_frames_kind"),
)
"""Every frame stored, those a rewind hid included: the frames above their run's ``clock``
(what a rewind cut, kept in place for its undo; the run row's ``hides`` says some may be
there, and the next frame written deletes them: see :mod:`smithers_tt.store.ledger._write`).
Only writers and what must see hidden frames (garbage collection's pins) name this table;
every read of a history reads :data:`frames`.

``size_bytes`` is a checkpoint frame's content size (``data`` ``{"size": n}``: such a frame
stores ``data_json`` NULL and ``size_bytes`` n; readers give back ``{"size": n}``)."""
Index("tt_frames_content", frame_rows.c.content_hash)

views = MetaData()
"""The views (migrations create them; the shape check compares tables only)."""

frames = Table(
    "tt_frames",
    views,
    *(Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable) for c in frame_rows.c),
)
"""The history: the rows of :data:`frame_rows` at or below their run's ``clock`` (a view,
written per dialect by ``Dialect.frames_view``). Read it; write :data:`frame_rows`."""

RUN_LEVEL_KINDS = (
    "run_created",
    "run_claimed",
    "run_finished",
    "run_failed",
    "run_cancelled",
    "forked",
    "reset",
    "run_paused",
    "run_continued",
    "run_released",
)
"""Frame kinds that change the run's status, output or error: a partial index lists them, so
"the run's state at frame N" is one index probe however long the history (a run has a few
of them, against one checkpoint frame per publish, which the index leaves out)."""

RUN_LEVEL_WHERE = text(_any("kind", RUN_LEVEL_KINDS))
"""The index's predicate, as literal SQL: a query uses a partial index only when its own WHERE
holds the same terms (SQLite matches them literally; PostgreSQL, whose index keeps the ``IN``
list of migration 0011, proves it from this chain)."""

Index(
    "tt_frames_run_level",
    frame_rows.c.run_id,
    frame_rows.c.frame_no,
    sqlite_where=RUN_LEVEL_WHERE,
    postgresql_where=text(_in("kind", RUN_LEVEL_KINDS)),
)

NODE_LEVEL_KINDS = ("attempt_started", "attempt_finished", "node_state", "cache_hit")
"""Frame kinds that change a node or an attempt (all but checkpoints): a partial index lists
them by node, so what a node or attempt was at frame N is read from that node's own frames (a
few per attempt), however long the history; checkpoint frames, one per publish, are left out."""

NODE_LEVEL_WHERE = text(_any("kind", NODE_LEVEL_KINDS))

Index(
    "tt_frames_node_level",
    frame_rows.c.run_id,
    frame_rows.c.node_id,
    frame_rows.c.iteration,
    frame_rows.c.frame_no,
    sqlite_where=NODE_LEVEL_WHERE,
    postgresql_where=text(_in("kind", NODE_LEVEL_KINDS)),
)

cache = Table(
    "tt_cache",
    metadata,
    Column("cache_key", HASH, primary_key=True),
    Column("output_json", Text, nullable=True),
    Column("content_hash", HASH, nullable=True),
    Column("codec", String(200), nullable=True),
    Column("version", Integer, nullable=True),
    Column("run_id", ID, nullable=False),
    Column("node_id", String(200), nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    ForeignKeyConstraint(["content_hash"], ["tt_checkpoint_contents.content_hash"]),
)
Index("tt_cache_content", cache.c.content_hash)

audit = Table(
    "tt_audit",
    metadata,
    Column("audit_id", String(40), primary_key=True),
    Column("run_id", ID, nullable=False),
    Column("operation", String(20), nullable=False),
    Column("frame_no", BigInteger, nullable=True),
    Column("actor", String(200), nullable=True),
    Column("detail_json", Text, nullable=True),
    Column("created_at_ms", BigInteger, nullable=False),
)
Index("tt_audit_run", audit.c.run_id, audit.c.created_at_ms)

workers = Table(
    "tt_workers",
    metadata,
    Column("worker_id", String(200), primary_key=True),
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("workflows_json", Text, nullable=False),
    Column("state", String(20), nullable=False),
    Column("started_at_ms", BigInteger, nullable=False),
    Column("heartbeat_at_ms", BigInteger, nullable=False),
)

# --- commit tokens (smithers_tt.store.backend._engine) --------------------------------------
# Every PostgreSQL write transaction inserts one row here, pipelined with its COMMIT. When the
# COMMIT's reply is lost the store looks the row up to tell a committed transaction from one
# that rolled back (DESIGN invariant 8). Rows are only needed for seconds; writers delete
# those older than COMMIT_TOKEN_TTL_MS in small pages, so the table stays small. The key
# leads with the time so that pruning is a range scan of the primary key.

commit_tokens = Table(
    "tt_commit_tokens",
    metadata,
    Column("created_at_ms", BigInteger, primary_key=True, autoincrement=False),
    Column("nonce", BigInteger, primary_key=True, autoincrement=False),
)

# --- LangGraph saver (smithers_tt.integrations.langgraph) ------------------------------------
# A LangGraph thread (thread_id + checkpoint_ns) is one run (workflow "langgraph"). Its
# checkpoints are "checkpoint" frames of that run, which pin their content; these two tables
# only index them by LangGraph's own keys. Neither holds a content hash: frames do the pinning.

lg_threads = Table(
    "tt_lg_threads",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("thread_id", Text, nullable=False),
    Column("checkpoint_ns", Text, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
)
Index("tt_lg_threads_thread", lg_threads.c.thread_id, lg_threads.c.checkpoint_ns)

lg_checkpoints = Table(
    "tt_lg_checkpoints",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("checkpoint_id", String(200), primary_key=True),
    Column("frame_no", BigInteger, nullable=True),
    Column("writes_json", Text, nullable=True),
    Column("child_frame_no", BigInteger, nullable=True),
    Column("sends_json", Text, nullable=True),
    ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
)
"""``frame_no`` is the frame holding the checkpoint document (NULL while only writes arrived);
``writes_json`` holds the checkpoint's pending writes, small values inline; ``child_frame_no``
the frame of the first checkpoint stored with this one as its parent (the step its tasks ran
in made it: their model calls are numbered with it); ``sends_json`` the nodes its pending
sends go to, in order (NULL: none)."""

# What a rewind removed, kept for undo_rewind until the run is written on top of it (or the
# run is deleted): the run row's ending before the rewind. Its frames stay in tt_frame_rows,
# above the run's clock (hidden by the view tt_frames), until the next frame of the run
# deletes them (since 0020; they were moved to tt_rewound_frames before).

rewinds = Table(
    "tt_rewinds",
    metadata,
    Column("rewind_id", ID, primary_key=True),
    Column("run_id", ID, nullable=False),
    Column("from_clock", BigInteger, nullable=False),
    Column("to_frame", BigInteger, nullable=False),
    Column("status", String(20), nullable=False),
    Column("output_json", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("kept_rows", Boolean, nullable=True),
    ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
)
"""``kept_rows`` is true when the rewind kept the live rows it deleted or wrote over in the
three tables below (since 0021; a rewind of half a long run does), so its undo writes them
back instead of folding the frames it shows again."""
Index("tt_rewinds_run", rewinds.c.run_id, rewinds.c.created_at_ms)


def _kept(name: str, live: Table, *, keyed: bool = False) -> Table:
    """A table of the rows of ``live`` a rewind deleted or wrote over, as they were, by
    ``rewind_id``: the table's own columns, no constraint (nothing refers to these rows), read
    and deleted by rewind (``release_rewinds``). ``keyed``: a primary key of ``rewind_id``
    and the live table's key (``verify`` pages through a table with JSON by its key); else
    only an index on ``rewind_id`` (a key's index cost the rewind's copy of 50,000 refs 0.15 s
    on PostgreSQL)."""
    kept = Table(
        name,
        metadata,
        Column("rewind_id", ID, primary_key=keyed, nullable=False),
        *(
            Column(c.name, c.type, primary_key=keyed and c.primary_key, nullable=c.nullable)
            for c in live.c
        ),
    )
    if not keyed:
        Index(f"{name}_rewind", kept.c.rewind_id)
    return kept


rewound_nodes = _kept("tt_rewound_nodes", nodes, keyed=True)
rewound_attempts = _kept("tt_rewound_attempts", attempts)
rewound_refs = _kept("tt_rewound_refs", refs)
REWOUND_ROWS = ((nodes, rewound_nodes), (attempts, rewound_attempts), (refs, rewound_refs))
"""Each live table with the table that keeps what a rewind took from it."""


# --- model calls (smithers_tt.store._calls) ---------------------------------------------
# One row per call an agent made to a model (an HTTP retry, a continuation and a streamed
# reply are calls of their own), written by the ledger with the frame it rode in with (a
# checkpoint's publish, or the attempt's end): ``frame_no`` is that frame, so time travel
# treats a call as it treats its frame. A fork reads its parent's calls up to the fork frame
# (never copied); a rewind marks the calls of the frames it removes with its ``rewind_id``
# (hidden, kept for its undo, deleted when retention releases the rewind). The request and
# the reply are content (``tt_checkpoint_contents``, stored once by hash and pinned here).

MODEL_CALL_TOKENS = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")

model_calls = Table(
    "tt_model_calls",
    metadata,
    Column("call_id", String(40), primary_key=True),
    Column("run_id", ID, nullable=False),
    Column("frame_no", BigInteger, nullable=False),
    Column("position", Integer, nullable=False),
    Column("node_id", String(200), nullable=False),
    Column("iteration", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("model", String(200), nullable=True),
    Column("request_hash", HASH, nullable=True),
    Column("reply_hash", HASH, nullable=True),
    Column("finish_reason", String(40), nullable=True),
    *(Column(name, BigInteger, nullable=True) for name in MODEL_CALL_TOKENS),
    Column("started_at_ms", BigInteger, nullable=False),
    Column("ttft_ms", Float, nullable=True),
    Column("latency_ms", Float, nullable=True),
    Column("status", Integer, nullable=True),
    Column("error", Text, nullable=True),
    Column("rewind_id", ID, nullable=True),
    Column("lg_key", Text, nullable=True),
    ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
)
"""``position`` orders the calls of one frame; ``rewind_id`` is NULL while the call's frame is
in the history. A call the LangGraph saver read from an AI message has an id made of its
thread and the message's id, and ``lg_key``, the rank of the task that wrote it (of the tasks
writing the same message, the least is the call's: ``LangGraphCallsRecorded``); until the
checkpoint its step makes is stored it waits, hidden from every frame as a rewound call is:
``rewind_id`` names the step's input checkpoint (:data:`PENDING_CALL_MARK` and its id) and
``frame_no`` is :data:`PENDING_CALL_FRAME`; the newest view of the run shows it (a step that
failed never makes its checkpoint, and what its tasks' calls cost still counts)."""

PENDING_CALL_FRAME = -1
"""``frame_no`` of a call waiting for the checkpoint of its step (LangGraph saver)."""

PENDING_CALL_MARK = "lg-step:"
"""How ``rewind_id`` of a waiting call begins (no rewind's id does: they are hex)."""
Index("tt_model_calls_frame", model_calls.c.run_id, model_calls.c.frame_no)
Index("tt_model_calls_request", model_calls.c.request_hash)
Index("tt_model_calls_reply", model_calls.c.reply_hash)

CONTENT_PINS: list[Column] = [
    frame_rows.c.content_hash,
    cache.c.content_hash,
    model_calls.c.request_hash,
    model_calls.c.reply_hash,
]
"""Columns whose values keep content alive: garbage collection removes a content row only
when no column listed here holds its hash."""

# --- what-if sweeps (smithers_tt.store._sweeps) -----------------------------------------
# A sweep forks one frame of a run once per variant and runs the forks. Its branches are
# runs labelled sweep=<id> and variant=<name> (the labels are written with the fork, in its
# transaction, so a crash never leaves a branch the sweep cannot find); this row keeps what
# the labels cannot: the variants' edits (to make the forks a crash left unmade), whether the
# sweep was cancelled, and the score a user's function gave each branch.

sweeps = Table(
    "tt_sweeps",
    metadata,
    Column("sweep_id", ID, primary_key=True),
    Column("run_id", ID, nullable=False),
    Column("frame_no", BigInteger, nullable=False),
    Column("workflow", String(200), nullable=False),
    Column("variants_json", Text, nullable=False),
    Column("cancel_requested", Boolean, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("promoted_variant", String(200), nullable=True),
    Column("promoted_run_id", ID, nullable=True),
    Column("promoted_at_ms", BigInteger, nullable=True),
    Column("discarded_json", Text, nullable=True),
    Column("driver", String(200), nullable=True),
    Column("driver_until_ms", BigInteger, nullable=True),
)
"""``run_id`` is the run forked (no foreign key: deleting it leaves its forks and the sweep);
``variants_json`` is ``[[name, edits], ...]`` in the order given; ``promoted_*`` name the
branch a person chose to keep (NULL until one is promoted), ``discarded_json`` the other
branches they asked to delete with it (``{variant: run_id}``, written before they are);
``driver`` is the process making the sweep's forks and running its branches, until
``driver_until_ms`` unless it renews (one at a time: a second waits)."""
Index("tt_sweeps_run", sweeps.c.run_id, sweeps.c.created_at_ms)

sweep_scores = Table(
    "tt_sweep_scores",
    metadata,
    Column("sweep_id", ID, primary_key=True),
    Column("variant", String(200), primary_key=True),
    Column("run_id", ID, nullable=False),
    Column("score_json", Text, nullable=False),
    Column("scored_at_ms", BigInteger, nullable=False),
    ForeignKeyConstraint(["sweep_id"], ["tt_sweeps.sweep_id"], ondelete="CASCADE"),
)
"""The score of a variant's branch ``run_id`` (a number or a dict of numbers, as JSON)."""
