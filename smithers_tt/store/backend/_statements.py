"""The hot path's statements (publish, and the ledger's projections), written once as driver
SQL for every dialect (:class:`Statements`, built once per dialect object by
:attr:`~smithers_tt.store.backend._dialect.Dialect.statements`)."""

from __future__ import annotations

from typing import Any

from smithers_tt.store.backend import _schema as S

RUN_STATE_COLUMNS = (
    "run_id",
    "workflow",
    "workflow_hash",
    "status",
    "owner_id",
    "owner_epoch",
    "heartbeat_at_ms",
    "lease_owner",
    "lease_until_ms",
    "clock",
    "max_checkpoint_bytes",
    "graph_json",
    "input_json",
    "parent_run_id",
    "parent_frame_no",
    "inherits",
)
"""The columns of ``tt_runs`` time travel reads (``_travel.RunState``, in its order)."""

GUARD_MESSAGE = (
    "smithers_tt: a guarded guess was stale (another writer changed the row since this one "
    "last wrote it); the write is applied again, asking. Rows matched: "
)


def guard(holds: str) -> str:
    """``SELECT 1`` when ``holds`` (a condition on ``count(*)``) does, else an error that aborts
    the transaction: a guarded guess found wrong (PostgreSQL, which logs it). The error is a
    cast of text naming why to an integer, so the server's log says what happened; it depends
    on ``count(*)``, so the planner cannot fold it into an error of every execution."""
    return (
        f"SELECT CASE WHEN {holds} THEN 1 ELSE CAST('{GUARD_MESSAGE}' || count(*) AS integer) END"
    )


class Statements:
    """The hot path's statements (publish, and the ledger's projections), written once as
    driver SQL with bound parameters in the dialect's placeholder style.

    They skip SQLAlchemy's expression building and compilation (which cost about 3 ms of
    Python per publish) and go to the driver as they are. Every value is a bound parameter.
    """

    def __init__(self, dialect: Any) -> None:  # a Dialect (which builds these once)
        q = dialect.sql
        self.advance_run = q(
            "UPDATE tt_runs SET clock = clock + ?, updated_at_ms = ? WHERE run_id = ? "
            "RETURNING status, owner_epoch, clock, max_checkpoint_bytes, cancel_requested, "
            "created_at_ms, hides"
        )
        # A run marked ``hides`` (a rewind's cut) drops the frames above its clock before its
        # next frame is written (see _write.write).
        self.drop_hidden = q("DELETE FROM tt_frame_rows WHERE run_id = ? AND frame_no > ?")
        self.unmark_hidden = q("UPDATE tt_runs SET hides = NULL WHERE run_id = ?")
        # ... and the live rows its rewinds kept for undo (no undo reaches them any more)
        self.drop_kept = tuple(
            q(
                f"DELETE FROM {kept.name} WHERE rewind_id IN "  # noqa: S608 (schema names)
                "(SELECT rewind_id FROM tt_rewinds WHERE run_id = ?)"
            )
            for _, kept in S.REWOUND_ROWS
        )
        self.lock_run = q(
            # The suffix is a constant of the dialect, not data.
            "SELECT status, owner_epoch, owner_id, cancel_requested, inherits FROM tt_runs "  # noqa: S608
            "WHERE run_id = ?" + dialect.row_lock
        )
        self.open_attempts = q(
            "SELECT node_id, iteration, attempt, owner_epoch FROM tt_attempts "
            "WHERE run_id = ? AND state = 'in_progress' ORDER BY node_id, iteration, attempt"
        )
        self.running_nodes = q(
            "SELECT node_id, iteration, last_attempt FROM tt_nodes "
            "WHERE run_id = ? AND state = 'running' ORDER BY node_id, iteration"
        )
        self.insert_run = q(
            # The columns of _ledger.NewRun, in its order, then the clock and the stamps.
            "INSERT INTO tt_runs (run_id, workflow, workflow_hash, status, input_json, "
            "owner_epoch, owner_id, heartbeat_at_ms, cancel_requested, parent_run_id, "
            "parent_frame_no, max_checkpoint_bytes, graph_json, output_json, error, inherits, "
            "clock, created_at_ms, updated_at_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        self.insert_label = q("INSERT INTO tt_run_labels (run_id, key, value) VALUES (?, ?, ?)")
        self.run_state = q(
            # Column names and the suffix are constants, not data.
            f"SELECT {', '.join(RUN_STATE_COLUMNS)} FROM tt_runs WHERE run_id = ?"  # noqa: S608
            + dialect.row_lock
        )
        self.run_level_frame = q(
            # The partial index's own predicate, literally: only then is it used.
            f"SELECT {', '.join(S.frames.c.keys())} FROM tt_frames "  # noqa: S608
            f"WHERE run_id = ? AND frame_no <= ? AND {S.RUN_LEVEL_WHERE.text} "
            "ORDER BY frame_no DESC LIMIT 1"
        )
        self.insert_audit = q(
            "INSERT INTO tt_audit (audit_id, run_id, operation, frame_no, actor, detail_json, "
            "created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)"
        )
        self.claim_run = q(
            "UPDATE tt_runs SET owner_epoch = ?, status = 'running', owner_id = ?, "
            "heartbeat_at_ms = ? WHERE run_id = ?"
        )
        # --- claims, heartbeats, garbage collection ---
        self.heartbeat_run = q(
            "UPDATE tt_runs SET heartbeat_at_ms = ? "
            "WHERE run_id = ? AND status = 'running' AND owner_epoch = ?"
        )
        self.hand_back_run = q(
            # Released, paused or continued: no owner, a new epoch fencing the last one.
            "UPDATE tt_runs SET status = ?, owner_id = NULL, heartbeat_at_ms = NULL, "
            "owner_epoch = owner_epoch + 1 WHERE run_id = ?"
        )
        self.delete_attempt = q(
            "DELETE FROM tt_attempts "
            "WHERE run_id = ? AND node_id = ? AND iteration = ? AND attempt = ?"
        )
        self.get_ref = q(
            "SELECT f.content_hash, f.codec, f.version, f.purpose, f.agent_id, f.created_at_ms "
            "FROM tt_checkpoint_refs r JOIN tt_frames f "
            "ON f.run_id = r.run_id AND f.frame_no = r.frame_no WHERE r.run_id = ? "
            "AND r.node_id = ? AND r.iteration = ? AND r.attempt = ? AND r.sequence = ?"
        )
        self.content_size = q(
            "SELECT size_bytes FROM tt_checkpoint_contents WHERE content_hash = ?"
        )
        self.sequence_past = q(
            "UPDATE tt_attempts SET next_sequence = ? WHERE run_id = ? AND node_id = ? "
            "AND iteration = ? AND attempt = ? AND next_sequence <= ?"
        )
        # --- end of claims, heartbeats, garbage collection ---
        self.end_run = q(
            "UPDATE tt_runs SET status = ?, output_json = ?, error = ?, "
            "owner_epoch = owner_epoch + 1 WHERE run_id = ?"
        )
        self.cancel_run = q(
            "UPDATE tt_runs SET status = 'cancelled', cancel_requested = ?, "
            "owner_epoch = owner_epoch + 1 WHERE run_id = ?"
        )
        self.request_cancel = q("UPDATE tt_runs SET cancel_requested = ? WHERE run_id = ?")
        self.notify_run = None if dialect.notify_sql is None else q(dialect.notify_sql)
        self.next_sequence = q(
            "UPDATE tt_attempts SET next_sequence = next_sequence + 1 "
            "WHERE run_id = ? AND node_id = ? AND iteration = ? AND attempt = ? "
            "AND state = 'in_progress' AND owner_epoch = ? "
            "RETURNING next_sequence"
        )
        # Guarded guesses (PostgreSQL, sent unanswered with the COMMIT): each changes its row
        # only if it holds what the writer guessed, and otherwise aborts the transaction with
        # an error that says so (see guard).
        self.advance_run_if = q(
            "WITH r AS (UPDATE tt_runs SET clock = clock + ?, updated_at_ms = ? "  # noqa: S608
            "WHERE run_id = ? AND status = ? AND owner_epoch = ? AND clock = ? "
            "AND max_checkpoint_bytes IS NOT DISTINCT FROM ? AND cancel_requested = ? "
            "AND created_at_ms = ? AND hides IS NULL "
            f"RETURNING 1) {guard('count(*) = 1')} FROM r"
        )
        self.next_sequence_if = q(
            "WITH a AS (UPDATE tt_attempts SET next_sequence = next_sequence + 1 "  # noqa: S608
            "WHERE run_id = ? AND node_id = ? AND iteration = ? AND attempt = ? "
            "AND state = 'in_progress' AND owner_epoch = ? AND next_sequence = ? "
            f"RETURNING 1) {guard('count(*) = 1')} FROM a"
        )
        self.put_content_if = None if dialect.put_content_if is None else q(dialect.put_content_if)
        self.attempt_state = q(
            "SELECT state, owner_epoch FROM tt_attempts "
            "WHERE run_id = ? AND node_id = ? AND iteration = ? AND attempt = ?"
        )
        self.insert_content = q(
            "INSERT INTO tt_checkpoint_contents (content_hash, data, size_bytes, created_at_ms) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (content_hash) DO NOTHING"
        )
        self.check_content = q(
            "SELECT size_bytes, data = ? FROM tt_checkpoint_contents "  # noqa: S608
            "WHERE content_hash = ?" + dialect.content_lock
        )
        self.insert_ref = q(
            "INSERT INTO tt_checkpoint_refs (run_id, node_id, iteration, attempt, sequence, "
            "frame_no) VALUES (?, ?, ?, ?, ?, ?)"
        )
        self.insert_frame = q(
            "INSERT INTO tt_frame_rows (run_id, frame_no, kind, node_id, iteration, attempt, "
            "sequence, state, content_hash, codec, version, purpose, agent_id, data_json, "
            "created_at_ms, size_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        # A checkpoint's frame and its ref in one statement (where the dialect can: else
        # None, and they go with insert_frame and insert_ref): the frame's parameters, the
        # ref's columns read back from the frame inserted.
        frame_cte = (
            f"f AS ({self.insert_frame} RETURNING run_id, node_id, iteration, attempt, "
            "sequence, frame_no)"
        )
        ref_from_frame = (
            "INSERT INTO tt_checkpoint_refs (run_id, node_id, iteration, attempt, sequence, "
            "frame_no) SELECT * FROM f"
        )
        self.insert_frame_ref = (
            q(f"WITH {frame_cte} {ref_from_frame}") if dialect.frame_ctes else None
        )
        # The same with next_sequence_if's guard (its parameters first): the frame and ref of
        # a checkpoint whose sequence was guessed, inserted only if the attempt held that
        # sequence (else the transaction aborts, as next_sequence_if would have). The guard
        # is the statement's own query: it runs first, the inserts after it.
        self.insert_frame_ref_if = (
            q(
                "WITH a AS (UPDATE tt_attempts SET next_sequence = next_sequence + 1 "  # noqa: S608
                "WHERE run_id = ? AND node_id = ? AND iteration = ? AND attempt = ? "
                "AND state = 'in_progress' AND owner_epoch = ? AND next_sequence = ? "
                f"RETURNING 1), {frame_cte}, r AS ({ref_from_frame}) "
                f"{guard('count(*) = 1')} FROM a"
            )
            if dialect.frame_ctes
            else None
        )
        agent_columns = S.model_calls.c.keys()[:-1]  # all but the LangGraph saver's lg_key
        self.insert_model_call = q(
            # The columns of tt_model_calls in their order (_calls.CALL_COLUMNS checks them).
            f"INSERT INTO tt_model_calls ({', '.join(agent_columns)}) "  # noqa: S608
            f"VALUES ({', '.join('?' * len(agent_columns))})"
        )
        self.next_attempt = q(
            "SELECT COALESCE(MAX(attempt), 0) + 1 FROM tt_attempts "
            "WHERE run_id = ? AND node_id = ? AND iteration = ?"
        )
        self.insert_attempt = q(
            "INSERT INTO tt_attempts (run_id, node_id, iteration, attempt, state, owner_epoch, "
            "next_sequence, discard_resume, error, error_code, resumed_run_id, resumed_node_id, "
            "resumed_iteration, resumed_attempt, resumed_sequence, started_at_ms, finished_at_ms) "
            "VALUES (?, ?, ?, ?, 'in_progress', ?, 0, ?, NULL, NULL, ?, ?, ?, ?, ?, ?, NULL)"
        )
        self.end_attempt = q(
            "UPDATE tt_attempts SET state = ?, error = ?, error_code = ?, discard_resume = ?, "
            "finished_at_ms = ? WHERE run_id = ? AND node_id = ? AND iteration = ? "
            "AND attempt = ? AND state = 'in_progress' AND owner_epoch = ?"
        )
        self.put_node = q(
            "INSERT INTO tt_nodes (run_id, node_id, iteration, state, last_attempt, output_json, "
            "updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id, node_id, iteration) DO UPDATE SET state = excluded.state, "
            "last_attempt = excluded.last_attempt, output_json = excluded.output_json, "
            "updated_at_ms = excluded.updated_at_ms"
        )
        self.node_state = q(
            "UPDATE tt_nodes SET state = ? WHERE run_id = ? AND node_id = ? AND iteration = ? "
            "RETURNING output_json"
        )

        # --- LangGraph saver ---
        self.put_content = q(
            # Content stored with the clock's advance (parameters: hash, bytes, size, stamp).
            # A row (size, same) back when it was stored or checked, none when it must be
            # checked afterwards (store_content); see Dialect.put_content.
            dialect.put_content
        )
        self.lock_lg_run = q(
            # A thread's run locked before the saver reads which values its frames pin; its
            # incarnation (a thread deleted and created again is a new run row) and owner
            # epoch (a new one after any time travel), which the saver's pin cache is keyed
            # by. The suffix is a constant of the dialect.
            "SELECT created_at_ms, owner_epoch FROM tt_runs WHERE run_id = ?"  # noqa: S608
            + dialect.row_lock
        )
        self.insert_lg_thread = q(
            "INSERT INTO tt_lg_threads (run_id, thread_id, checkpoint_ns, created_at_ms) "
            "VALUES (?, ?, ?, ?)"
        )
        self.upsert_lg_index = q(
            # Point a checkpoint's index row at its document frame, with its sends' nodes.
            "INSERT INTO tt_lg_checkpoints (run_id, checkpoint_id, frame_no, writes_json, "
            "sends_json) VALUES (?, ?, ?, NULL, ?) ON CONFLICT (run_id, checkpoint_id) "
            "DO UPDATE SET frame_no = excluded.frame_no, sends_json = excluded.sends_json"
        )
        # --- LangGraph model calls (ledger/_langgraph_calls.py) ---
        self.lg_step = q(
            # What a task's calls need of its input checkpoint: whether it is stored, the
            # frame of its child (the step's checkpoint) and the nodes of its sends.
            "SELECT frame_no, child_frame_no, sends_json FROM tt_lg_checkpoints "
            "WHERE run_id = ? AND checkpoint_id = ?"
        )
        self.upsert_lg_call = q(
            # A call read from an AI message: its id is its thread's and message's, and of
            # the tasks writing the message, the one of least rank (lg_key) has it; one
            # written again after a rewind cut it is the new history's.
            f"INSERT INTO tt_model_calls ({', '.join(S.model_calls.c.keys())}) "  # noqa: S608
            f"VALUES ({', '.join('?' * len(S.model_calls.c))}) ON CONFLICT (call_id) DO UPDATE "
            f"SET {', '.join(f'{c} = excluded.{c}' for c in S.model_calls.c.keys()[1:])} "
            "WHERE excluded.lg_key < tt_model_calls.lg_key OR "
            "(tt_model_calls.rewind_id IS NOT NULL AND "
            f"tt_model_calls.frame_no <> {S.PENDING_CALL_FRAME})"
        )
        self.set_lg_child = q(
            "UPDATE tt_lg_checkpoints SET child_frame_no = ? "
            "WHERE run_id = ? AND checkpoint_id = ? AND child_frame_no IS NULL"
        )
        self.show_lg_calls = q(
            # The calls of a step's tasks stored before its checkpoint: numbered with it.
            "UPDATE tt_model_calls SET frame_no = ?, rewind_id = NULL "  # noqa: S608
            f"WHERE run_id = ? AND frame_no = {S.PENDING_CALL_FRAME} AND rewind_id = ?"
        )
        self.name_lg_send = q(
            # A Send task's calls stored before its input checkpoint: under the send's node.
            "UPDATE tt_model_calls SET node_id = ? "  # noqa: S608
            f"WHERE run_id = ? AND frame_no = {S.PENDING_CALL_FRAME} AND rewind_id = ? "
            "AND node_id = ?"
        )
        self.lg_writes = q(
            "SELECT writes_json FROM tt_lg_checkpoints WHERE run_id = ? AND checkpoint_id = ?"
        )
        # WritesPut's read as a guarded guess (see advance_run_if): the stored writes are
        # these, or there are none.
        self.lg_writes_are = q(
            f"{guard('count(*) = 1')} FROM tt_lg_checkpoints "
            "WHERE run_id = ? AND checkpoint_id = ? AND writes_json = ?"
        )
        self.lg_writes_none = q(
            f"{guard('count(*) = 0')} FROM tt_lg_checkpoints "
            "WHERE run_id = ? AND checkpoint_id = ? AND writes_json IS NOT NULL"
        )
        self.upsert_lg_writes = q(
            # Replace a checkpoint's pending writes (its index row may not exist yet).
            "INSERT INTO tt_lg_checkpoints (run_id, checkpoint_id, frame_no, writes_json) "
            "VALUES (?, ?, NULL, ?) ON CONFLICT (run_id, checkpoint_id) "
            "DO UPDATE SET writes_json = excluded.writes_json"
        )
        self.copy_lg_index = q(
            # A copied thread's index row: the copied document frame and the writes.
            "INSERT INTO tt_lg_checkpoints (run_id, checkpoint_id, frame_no, writes_json, "
            "child_frame_no, sends_json) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id, checkpoint_id) DO UPDATE SET frame_no = excluded.frame_no, "
            "writes_json = excluded.writes_json, child_frame_no = excluded.child_frame_no, "
            "sends_json = excluded.sends_json"
        )
