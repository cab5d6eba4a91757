"""Every lineage view against the same facts read through the store API, on both backends and
through every reader (live scanner, scanner snapshot, Arrow fallback)."""

from __future__ import annotations

import json
from collections import defaultdict

import pandas as pd
import pytest

from smithers_tt.lineage import VIEWS, Lineage, LineageError

from .conftest import TOPIC, Scenario, records


def sizes(scenario: Scenario) -> dict[str, int]:
    """Size of every content any ref points at, read (and verified) through the store."""
    out: dict[str, int] = {}
    for run_id in scenario.run_ids:
        for ref in scenario.refs(run_id):
            if ref.content_hash not in out:
                out[ref.content_hash] = len(scenario.db.store.read_content(ref.content_hash))
    return out


def test_lineage_reports_its_reader(lin: Lineage) -> None:
    assert lin.reader in ("scanner", "arrow")
    assert (lin.extension is None) == (lin.reader == "arrow")
    assert lin.snapshot or lin.reader == "scanner"


def test_every_view_has_exactly_its_documented_columns(lin: Lineage) -> None:
    for view in VIEWS:
        described = lin.sql(f'DESCRIBE "{view.name}"').column_name.tolist()
        assert described == [name for name, _ in view.columns], view.name


def test_every_view_method_documents_its_columns() -> None:
    for method, view in [
        (Lineage.runs, "runs"),
        (Lineage.nodes, "nodes"),
        (Lineage.attempts, "attempts"),
        (Lineage.checkpoints, "checkpoints"),
        (Lineage.frames, "frames"),
        (Lineage.forks, "forks"),
        (Lineage.contents, "contents"),
        (Lineage.dedup, "dedup"),
        (Lineage.dedup, "run_dedup"),
        (Lineage.workers, "workers"),
    ]:
        doc = method.__doc__ or ""
        columns = next(v for v in VIEWS if v.name == view).columns
        assert all(f"``{name}``" in doc for name, _ in columns), (method.__name__, view)


def test_runs_match_the_store(scenario: Scenario, lin: Lineage) -> None:
    store = scenario.db.store
    rows = records(lin.runs())
    assert [r["run_id"] for r in rows] == scenario.run_ids
    for row in rows:
        run = store.get_run(row["run_id"])
        attempts = scenario.attempts(run.run_id)
        public = [f for f in store.frames(run.run_id) if f.frame_no >= 0]
        assert row == row | {
            "workflow": run.workflow,
            "status": run.status,
            "parent_run_id": run.parent_run_id,
            "parent_frame_no": run.parent_frame_no,
            "error": run.error,
            "clock": run.clock,
            "owner_epoch": run.owner_epoch,
            "owner_id": run.owner_id,
            "heartbeat_at_ms": run.heartbeat_at_ms,
            "created_at_ms": run.created_at_ms,
            "updated_at_ms": run.updated_at_ms,
            "node_count": len(scenario.nodes(run.run_id)),
            "attempt_count": len(attempts),
            "failed_attempt_count": sum(a.state == "failed" for a in attempts),
            "ref_count": len(scenario.refs(run.run_id)),
            "frame_count": len(public),
        }
        assert row["created_at"] == pd.Timestamp(run.created_at_ms, unit="ms")


def test_runs_show_retries_forks_and_resets(scenario: Scenario, lin: Lineage) -> None:
    runs = lin.runs().set_index("run_id")
    assert runs.loc[scenario.original, "failed_attempt_count"] == 1  # the flaky researcher
    assert runs.loc[scenario.child, "parent_run_id"] == scenario.original
    assert runs.loc[scenario.grandchild, "parent_run_id"] == scenario.child
    assert runs.loc[scenario.reset_run, "owner_epoch"] > runs.loc[scenario.twin, "owner_epoch"]


def test_nodes_match_the_store(scenario: Scenario, lin: Lineage) -> None:
    for run_id in scenario.run_ids:
        got = records(lin.nodes(run_id))
        want = scenario.nodes(run_id)
        assert [(r["node_id"], r["iteration"], r["state"], r["last_attempt"]) for r in got] == [
            (n.node_id, n.iteration, n.state, n.last_attempt) for n in want
        ]
        assert [
            None if r["output_json"] is None else json.loads(r["output_json"]) for r in got
        ] == [n.output for n in want]


def test_attempts_match_the_store(scenario: Scenario, lin: Lineage) -> None:
    every = lin.attempts()
    assert len(every) == sum(len(scenario.attempts(r)) for r in scenario.run_ids)
    for run_id in scenario.run_ids:
        got = records(lin.attempts(run_id))
        want = scenario.attempts(run_id)
        assert len(got) == len(want)
        for row, attempt in zip(got, want, strict=True):
            resumed = tuple(
                row[f"resumed_{k}"]
                for k in ("run_id", "node_id", "iteration", "attempt", "sequence")
            )
            assert (row["run_id"], row["node_id"], row["iteration"], row["attempt"]) == (
                attempt.key.run_id,
                attempt.key.node_id,
                attempt.key.iteration,
                attempt.key.attempt,
            )
            assert row == row | {
                "state": attempt.state,
                "error": attempt.error,
                "error_code": attempt.error_code,
                "owner_epoch": attempt.owner_epoch,
                "next_sequence": attempt.next_sequence,
                "discard_resume": attempt.discard_resume,
                "started_at_ms": attempt.started_at_ms,
                "finished_at_ms": attempt.finished_at_ms,
            }
            assert resumed == (attempt.resumed_from or (None,) * 5)
            if attempt.finished_at_ms is not None:
                assert row["duration_ms"] == attempt.finished_at_ms - attempt.started_at_ms


def test_attempts_keep_the_failed_try_and_where_the_retry_resumed(
    scenario: Scenario, lin: Lineage
) -> None:
    research = lin.attempts(scenario.original).query("node_id == 'research'")
    assert research.state.tolist() == ["failed", "finished"]
    assert "timed out" in research.error.iloc[0]
    retry = research.iloc[1]
    assert (retry.resumed_run_id, retry.resumed_node_id, retry.resumed_attempt) == (
        scenario.original,
        "research",
        1,
    )


def test_checkpoints_match_the_store(scenario: Scenario, lin: Lineage) -> None:
    known = sizes(scenario)
    assert len(lin.checkpoints()) == sum(len(scenario.refs(r)) for r in scenario.run_ids)
    for run_id in scenario.run_ids:
        got = records(lin.checkpoints(run_id))
        want = scenario.refs(run_id)
        assert [{k: v for k, v in row.items() if k != "created_at"} for row in got] == [
            {
                "run_id": ref.run_id,
                "node_id": ref.node_id,
                "iteration": ref.iteration,
                "attempt": ref.attempt,
                "sequence": ref.sequence,
                "codec": ref.codec,
                "version": ref.version,
                "purpose": ref.purpose,
                "agent_id": ref.agent_id,
                "content_hash": ref.content_hash,
                "size_bytes": known[ref.content_hash],
                "created_at_ms": ref.created_at_ms,
            }
            for ref in want
        ]


def test_checkpoints_include_schema_correction_turns(scenario: Scenario, lin: Lineage) -> None:
    purposes = set(lin.checkpoints(scenario.original).purpose)
    want = {ref.purpose for ref in scenario.refs(scenario.original)}
    assert purposes == want
    assert "schema-correction" in purposes or "turn" in purposes


def test_frames_are_the_public_frames_of_the_store(scenario: Scenario, lin: Lineage) -> None:
    for run_id in scenario.run_ids:
        got = records(lin.frames(run_id))
        want = [f for f in scenario.db.store.frames(run_id) if f.frame_no >= 0]
        assert [r["frame_no"] for r in got] == [f.frame_no for f in want]
        for row, frame in zip(got, want, strict=True):
            data = None if row["data_json"] is None else json.loads(row["data_json"])
            assert (
                row["kind"],
                row["node_id"],
                row["iteration"],
                row["attempt"],
                row["sequence"],
                row["state"],
                row["content_hash"],
                row["codec"],
                row["version"],
                row["purpose"],
                row["agent_id"],
                data,
                row["created_at_ms"],
            ) == (
                frame.kind,
                frame.node_id,
                frame.iteration,
                frame.attempt,
                frame.sequence,
                frame.state,
                frame.content_hash,
                frame.codec,
                frame.version,
                frame.purpose,
                frame.agent_id,
                frame.data,
                frame.created_at_ms,
            )


def test_frames_of_a_fork_start_at_its_own_frame_zero(scenario: Scenario, lin: Lineage) -> None:
    frames = lin.frames(scenario.child)
    assert frames.frame_no.min() == 0
    assert frames.kind.iloc[0] == "forked"
    hidden = [f for f in scenario.db.store.frames(scenario.child) if f.frame_no < 0]
    assert hidden, "a fork keeps its parent's history as base frames below 0"


def test_forks_list_every_child_with_its_parent_and_root(scenario: Scenario, lin: Lineage) -> None:
    want = {
        run.run_id: (run.parent_run_id, run.parent_frame_no)
        for run in (scenario.db.store.get_run(r) for r in scenario.run_ids)
        if run.parent_run_id is not None
    }
    got = records(lin.forks())
    assert {r["child_run_id"]: (r["parent_run_id"], r["parent_frame_no"]) for r in got} == want
    tree = {r["child_run_id"]: (r["root_run_id"], r["depth"]) for r in got}
    assert tree == {
        scenario.child: (scenario.original, 1),
        scenario.grandchild: (scenario.original, 2),
    }


def _dedup_facts(scenario: Scenario) -> tuple[dict[str | None, tuple[int, int, int, int]], dict]:
    known = sizes(scenario)
    per_codec: dict[str, list] = defaultdict(lambda: [0, set(), 0])
    per_run: dict[str, list] = defaultdict(lambda: [0, set(), 0])
    every: list = [0, set(), 0]
    for run_id in scenario.run_ids:
        for ref in scenario.refs(run_id):
            for acc in (per_codec[ref.codec], per_run[run_id], every):
                acc[0] += 1
                acc[1].add(ref.content_hash)
                acc[2] += known[ref.content_hash]

    def fold(acc: list) -> tuple[int, int, int, int]:
        return acc[0], len(acc[1]), acc[2], sum(known[h] for h in acc[1])

    codecs: dict[str | None, tuple[int, int, int, int]] = {c: fold(a) for c, a in per_codec.items()}
    codecs[None] = fold(every)
    return codecs, {r: fold(a) for r, a in per_run.items()}


def test_dedup_matches_the_contents_the_refs_point_at(scenario: Scenario, lin: Lineage) -> None:
    want, _ = _dedup_facts(scenario)
    rows = records(lin.dedup())
    assert rows[-1]["scope"] == "all" and rows[-1]["codec"] is None
    assert all(r["scope"] == "codec" for r in rows[:-1])
    got = {
        r["codec"]: (r["ref_count"], r["content_count"], r["logical_bytes"], r["stored_bytes"])
        for r in rows
    }
    assert got == want
    for row in rows:
        assert row["ratio"] == pytest.approx(row["logical_bytes"] / row["stored_bytes"])
    assert rows[-1]["ratio"] > 1.5, "twins, forks and unchanged steps share content"


def test_run_dedup_matches_each_run(scenario: Scenario, lin: Lineage) -> None:
    _, want = _dedup_facts(scenario)
    rows = records(lin.dedup(by="run"))
    got = {
        r["run_id"]: (r["ref_count"], r["content_count"], r["logical_bytes"], r["stored_bytes"])
        for r in rows
    }
    assert got == want


def test_contents_count_the_refs_and_runs_using_them(scenario: Scenario, lin: Lineage) -> None:
    users: dict[str, set] = defaultdict(set)
    counts: dict[str, int] = defaultdict(int)
    for run_id in scenario.run_ids:
        for ref in scenario.refs(run_id):
            users[ref.content_hash].add(run_id)
            counts[ref.content_hash] += 1
    rows = {r["content_hash"]: r for r in records(lin.contents())}
    for digest, runs in users.items():
        assert (rows[digest]["ref_count"], rows[digest]["run_count"]) == (counts[digest], len(runs))
        assert rows[digest]["size_bytes"] == len(scenario.db.store.read_content(digest))


def test_audit_records_the_fork_and_the_reset(scenario: Scenario, lin: Lineage) -> None:
    audit = lin.sql("SELECT run_id, operation FROM audit")
    pairs = set(zip(audit.run_id, audit.operation, strict=True))
    assert (scenario.original, "fork") in pairs
    assert (scenario.child, "fork") in pairs
    assert (scenario.reset_run, "reset") in pairs


def test_payload_json_answers_duckdb_json_functions(scenario: Scenario, lin: Lineage) -> None:
    got = lin.sql(
        """
        SELECT c.node_id, c.attempt, c.sequence, p.codec, p.version,
               json_array_length(p.json -> '$.payload.notes') AS notes,
               p.json ->> '$.payload.topic' AS topic
        FROM checkpoints AS c JOIN checkpoint_payloads AS p USING (content_hash)
        WHERE c.run_id = ? AND c.node_id = 'research'
        ORDER BY c.created_at_ms, c.attempt, c.sequence
        """,
        [scenario.original],
    )
    refs = [r for r in scenario.refs(scenario.original) if r.node_id == "research"]
    refs.sort(key=lambda r: (r.created_at_ms, r.attempt, r.sequence))
    loaded = [scenario.db.store.load(r) for r in refs]
    assert got.notes.tolist() == [len(cp.payload["notes"]) for cp in loaded]
    assert set(got.topic) == {TOPIC["topic"]}
    assert got.codec.tolist() == [cp.codec for cp in loaded]
    assert got.version.tolist() == [cp.version for cp in loaded]


def test_payload_json_is_the_canonical_envelope(scenario: Scenario, lin: Lineage) -> None:
    payloads = lin.sql(
        "SELECT content_hash, size_bytes, CAST(json AS VARCHAR) AS text FROM checkpoint_payloads"
    )
    assert set(sizes(scenario)) <= set(payloads.content_hash)
    for row in payloads.itertuples():
        stored = scenario.db.store.read_content(row.content_hash)
        assert json.loads(row.text) == json.loads(stored)
        assert row.size_bytes == len(stored)


def test_sql_binds_positional_and_named_parameters(scenario: Scenario, lin: Lineage) -> None:
    by_position = lin.sql("SELECT count(*) AS n FROM checkpoints WHERE run_id = ?", [scenario.twin])
    by_name = lin.sql(
        "SELECT count(*) AS n FROM checkpoints WHERE run_id = $run", {"run": scenario.twin}
    )
    assert by_position.n[0] == by_name.n[0] == len(scenario.refs(scenario.twin))
    # A value is data, never SQL.
    sneaky = lin.sql("SELECT count(*) AS n FROM runs WHERE run_id = ?", ["x' OR '1'='1"])
    assert sneaky.n[0] == 0


def test_sql_reports_bad_sql_as_a_lineage_error(lin: Lineage) -> None:
    with pytest.raises(LineageError, match="lineage query failed"):
        lin.sql("SELECT nope FROM runs")
