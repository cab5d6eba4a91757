"""Lost COMMIT replies (DESIGN invariant 8): a write whose COMMIT reached PostgreSQL but whose
answer never came back is applied exactly once and reported as done, or raises
``OutcomeUnknown``; it is never run twice nor reported as failed.

Every test goes through :class:`tests.faults.PgProxy`, a real loopback proxy in front of the
real server that forwards a chosen COMMIT, lets the server carry it out, swallows its reply and
cuts the connection. :func:`each_lost_commit` repeats an operation, on fresh state each time,
losing the reply to its first COMMIT, then its second, and so on until the operation has no
more COMMITs, and checks after each that what the user sees is exactly what they would see had
nothing gone wrong.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

import smithers_tt as st
from smithers_tt.engine import GenerateRequest, GenerateResult, Workflow
from smithers_tt.errors import (
    FenceLost,
    OutcomeUnknown,
    SmithersError,
    StoreError,
    TransientStoreError,
)
from smithers_tt.store import Fence, Store
from smithers_tt.store._claims import claim_next, register_worker, worker_heartbeat
from smithers_tt.store._records import now_ms
from smithers_tt.store.backend._engine import RetryPolicy
from smithers_tt.store.ledger._publish import PublishUnit
from tests.faults import PgProxy

from ._support import checkpoint, count, execute, orphan, refs_of

pytestmark = pytest.mark.postgres

S = TypeVar("S")
R = TypeVar("R")


@pytest.fixture
def pdb(proxied_pg_url: str) -> Iterator[st.Database]:
    """A migrated database reached through the fault proxy."""
    database = st.connect(proxied_pg_url)
    try:
        yield database
    finally:
        database.close()


def each_lost_commit(
    proxy: PgProxy,
    setup: Callable[[], S],
    op: Callable[[S], R],
    check: Callable[[S, R], None],
    *,
    limit: int = 40,
) -> int:
    """For k = 0, 1, ...: ``setup()``, then ``op`` with the reply to its k-th COMMIT lost, then
    ``check(state, result)``; stop once ``op`` made fewer than k + 1 COMMITs. Returns how many
    COMMITs ``op`` makes."""
    for k in range(limit):
        state = setup()
        before = proxy.commits_seen
        dropped = proxy.drop_commit_reply(skip=k)
        result = op(state)
        if proxy.commits_seen - before <= k:
            proxy.disarm()
            assert k > 0, "the operation committed nothing"
            check(state, result)
            return k
        assert dropped.wait(5), f"the reply to COMMIT #{k} was not lost"
        check(state, result)
    raise AssertionError(f"the operation made more than {limit} COMMITs")


def running_run(store: Store) -> Fence:
    _, fence = store.create_run("wf", run_id=f"r-{secrets.token_hex(6)}")
    return fence


def kinds(store: Store, run_id: str) -> list[str]:
    return [f.kind for f in store.frames(run_id)]


# --- runs, attempts, publications ------------------------------------------------------------


def test_create_run_whose_commit_reply_is_lost_makes_one_run_that_can_continue(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store

    def op(run_id: str) -> Fence:
        record, fence = store.create_run("wf", {"q": 1}, run_id=run_id)
        assert record.run_id == run_id
        return fence

    def check(run_id: str, fence: Fence) -> None:
        assert count(pdb, "tt_runs", run_id=run_id) == 1
        assert kinds(store, run_id) == ["run_created"]
        key = store.start_attempt(fence, "node", node_state="running").key
        store.publish(fence, key, checkpoint(1))
        store.finish_attempt(fence, key, "finished", node_state="finished", output=1)
        store.finish_run(fence, "finished", output=1)
        assert store.get_run(run_id).status == "finished"

    each_lost_commit(pg_proxy, lambda: f"r-{secrets.token_hex(6)}", op, check)


def test_submit_whose_commit_reply_is_lost_queues_one_run(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    wf = small_workflow()

    def check(_: None, run: st.Run) -> None:
        assert run.status == "queued"
        assert [r.id for r in pdb.runs(status="queued")] == [run.id]
        pdb.cancel(run.id)  # out of the way of the next round

    each_lost_commit(pg_proxy, lambda: None, lambda _: pdb.submit(wf, {"q": 1}), check)


def test_publishes_whose_commit_reply_is_lost_store_each_checkpoint_once(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store

    def setup() -> tuple[Fence, Any]:
        fence = running_run(store)
        return fence, store.start_attempt(fence, "node").key

    def op(state: tuple[Fence, Any]) -> list[int]:
        fence, key = state
        return [store.publish(fence, key, checkpoint(n)).sequence for n in range(3)]

    def check(state: tuple[Fence, Any], sequences: list[int]) -> None:
        fence, _ = state
        assert sequences == [0, 1, 2]
        assert [r.sequence for r in refs_of(pdb, fence.run_id)] == [0, 1, 2]
        assert kinds(store, fence.run_id).count("checkpoint") == 3

    each_lost_commit(pg_proxy, setup, op, check)


def test_batch_with_a_fenced_out_unit_whose_commit_reply_is_lost_stores_the_others_once(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    # A batch whose unit fails is applied again unit by unit under savepoints; the commit
    # token must not be rolled back with a failed unit's savepoint.
    store = pdb.store

    def setup() -> list[PublishUnit]:
        fence = running_run(store)
        key = store.start_attempt(fence, "node").key
        stale = Fence(fence.run_id, fence.epoch - 1)
        return [
            PublishUnit(stale, key, checkpoint("late").encode(), "progress", None),
            PublishUnit(fence, key, checkpoint("kept").encode(), "progress", None),
        ]

    def check(units: list[PublishUnit], _: None) -> None:
        late, kept = units
        assert isinstance(late.error, FenceLost)
        assert kept.error is None and kept.result is not None
        assert kept.result.sequence == 0
        assert [r.sequence for r in refs_of(pdb, kept.key.run_id)] == [0]

    each_lost_commit(pg_proxy, setup, store._committer._commit, check)


def test_start_attempt_whose_commit_reply_is_lost_opens_one_attempt(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store

    def op(fence: Fence) -> Any:
        return store.start_attempt(fence, "node", node_state="running")

    def check(fence: Fence, attempt: Any) -> None:
        assert attempt.key.attempt == 1
        assert [a.key.attempt for a in store.list_attempts(fence.run_id)] == [1]
        assert store.publish(fence, attempt.key, checkpoint(0)).sequence == 0

    each_lost_commit(pg_proxy, lambda: running_run(store), op, check)


def test_finish_attempt_whose_commit_reply_is_lost_succeeds(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store

    def setup() -> tuple[Fence, Any]:
        fence = running_run(store)
        return fence, store.start_attempt(fence, "node", node_state="running").key

    def op(state: tuple[Fence, Any]) -> None:
        fence, key = state
        store.finish_attempt(fence, key, "finished", node_state="finished", output={"a": 1})

    def check(state: tuple[Fence, Any], _: None) -> None:
        fence, key = state
        assert store.get_attempt(key).state == "finished"
        assert [(n.state, n.output) for n in store.list_nodes(fence.run_id)] == [
            ("finished", {"a": 1})
        ]
        assert kinds(store, fence.run_id).count("attempt_finished") == 1

    each_lost_commit(pg_proxy, setup, op, check)


def test_finish_run_whose_commit_reply_is_lost_succeeds(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store

    def check(fence: Fence, _: None) -> None:
        run = store.get_run(fence.run_id)
        assert (run.status, run.output) == ("finished", {"done": True})
        assert kinds(store, fence.run_id).count("run_finished") == 1

    each_lost_commit(
        pg_proxy,
        lambda: running_run(store),
        lambda fence: store.finish_run(fence, "finished", output={"done": True}),
        check,
    )


# --- claims, heartbeats, cancellation --------------------------------------------------------


def test_claim_run_whose_commit_reply_is_lost_returns_the_owning_fence(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store

    def check(old: Fence, fence: Fence) -> None:
        assert fence.epoch == old.epoch + 1 == store.get_run(old.run_id).owner_epoch
        assert kinds(store, old.run_id).count("run_claimed") == 1
        store.start_attempt(fence, "node")  # the returned fence owns the run

    each_lost_commit(
        pg_proxy,
        lambda: running_run(store),
        lambda fence: store.claim_run(fence.run_id, "new-owner"),
        check,
    )


def test_worker_claim_whose_commit_reply_is_lost_returns_the_claimed_run(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store
    known = {"queued-wf": "hash-1"}

    def setup() -> str:
        record, _ = store.create_run("queued-wf", workflow_hash="hash-1", status="queued")
        return record.run_id

    def check(run_id: str, claim: Any) -> None:
        assert claim is not None, "the claimed run was reported as no claim"
        assert claim.fence.run_id == run_id
        run = store.get_run(run_id)
        assert (run.status, run.owner_id, run.owner_epoch) == ("running", "w1", claim.fence.epoch)
        assert kinds(store, run_id).count("run_claimed") == 1
        store.finish_run(claim.fence, "finished")

    each_lost_commit(
        pg_proxy,
        setup,
        lambda _: claim_next(store, "w1", known, stale_after_ms=60_000),
        check,
    )


def test_heartbeats_whose_commit_reply_is_lost_report_ownership_kept(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store
    register_worker(store, "w1", "host", 1, ["wf"])

    def op(fence: Fence) -> tuple[bool, list[Fence]]:
        return store.heartbeat(fence), worker_heartbeat(store, "w1", [fence])

    def check(fence: Fence, result: tuple[bool, list[Fence]]) -> None:
        assert result == (True, [])
        assert store.get_run(fence.run_id).owner_epoch == fence.epoch

    each_lost_commit(pg_proxy, lambda: running_run(store), op, check)


def test_cancel_whose_commit_reply_is_lost_cancels_once(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store

    def setup() -> str:
        fence = running_run(store)
        store.start_attempt(fence, "node", node_state="running")
        return fence.run_id

    def check(run_id: str, _: None) -> None:
        assert store.get_run(run_id).status == "cancelled"
        assert kinds(store, run_id).count("run_cancelled") == 1
        assert [a.state for a in store.list_attempts(run_id)] == ["cancelled"]

    each_lost_commit(pg_proxy, setup, store.cancel_run, check)


def test_request_cancel_whose_commit_reply_is_lost_records_one_request(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store

    def check(fence: Fence, _: None) -> None:
        assert store.get_run(fence.run_id).cancel_requested
        assert kinds(store, fence.run_id).count("cancel_requested") == 1

    each_lost_commit(
        pg_proxy, lambda: running_run(store), lambda f: store.request_cancel(f.run_id), check
    )


# --- a whole run -----------------------------------------------------------------------------


def small_workflow() -> Workflow:
    """Two tasks; the first publishes two checkpoints."""

    class Agent:
        id = "counter"
        checkpoint_formats = [st.CheckpointFormat("test.state", [1])]
        checkpoint_capabilities = [st.CheckpointCapability("test.state", [1], ["resume"])]

        async def generate(self, request: GenerateRequest) -> GenerateResult:
            for step in range(2):
                await request.on_checkpoint(st.AgentCheckpoint("test.state", 1, {"step": step}))
            return GenerateResult({"steps": 2})

    class Echo:
        id = "echo"

        async def generate(self, request: GenerateRequest) -> GenerateResult:
            return GenerateResult({"ok": True})

    wf = Workflow("ambiguous")
    wf.task("count", agent=Agent())
    wf.task("echo", agent=Echo(), needs=["count"])
    return wf


def test_db_run_whose_commit_replies_are_lost_finishes_exactly_once(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    wf = small_workflow()

    def op(run_id: str) -> st.Run:
        return pdb.run(wf, {"q": 1}, run_id=run_id)

    def check(run_id: str, run: st.Run) -> None:
        assert run.id == run_id
        assert run.status == "finished", run.error
        assert count(pdb, "tt_runs", run_id=run_id) == 1
        assert [(r.node_id, r.attempt, r.sequence) for r in refs_of(pdb, run_id)] == [
            ("count", 1, 0),
            ("count", 1, 1),
        ]
        assert [(a.key.node_id, a.state) for a in pdb.store.list_attempts(run_id)] == [
            ("count", "finished"),
            ("echo", "finished"),
        ]
        assert kinds(pdb.store, run_id).count("checkpoint") == 2

    commits = each_lost_commit(pg_proxy, lambda: f"r-{secrets.token_hex(6)}", op, check)
    assert commits >= 6  # create, two starts, two publishes, two finishes, the run's end


# --- time travel ---------------------------------------------------------------------------


def finished_run(store: Store) -> str:
    """A finished run of two nodes: frames 0 to 9."""
    fence = running_run(store)
    for n, node in enumerate(("a", "b")):
        key = store.start_attempt(fence, node, node_state="running").key
        store.publish(fence, key, checkpoint(f"{node}0"))
        store.publish(fence, key, checkpoint(f"{node}1"))
        store.finish_attempt(fence, key, "finished", node_state="finished", output=n)
    store.finish_run(fence, "finished", output={"a": 0, "b": 1})
    return fence.run_id


def audits(pdb: st.Database, run_id: str, operation: str) -> int:
    return count(pdb, "tt_audit", run_id=run_id, operation=operation)


def test_rewind_whose_commit_reply_is_lost_rewinds_once_and_says_so(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store

    def check(run_id: str, snap: Any) -> None:
        assert snap.frame_no == 4
        run = store.get_run(run_id)
        assert (run.clock, run.status) == (4, "interrupted")
        assert [r.sequence for r in refs_of(pdb, run_id)] == [0, 1]
        assert audits(pdb, run_id, "rewind") == 1
        pdb.rewind(run_id, 2, confirm=True)  # the lease was given back

    each_lost_commit(
        pg_proxy,
        lambda: finished_run(store),
        lambda run_id: pdb.rewind(run_id, 4, confirm=True),
        check,
    )


@pytest.mark.parametrize("operation", ["rewind", "reset"])
def test_time_travel_is_never_reported_failed_once_it_committed(
    pdb: st.Database, pg_proxy: PgProxy, operation: str
) -> None:
    # The server goes away right after one of the operation's COMMITs (each in turn): an
    # operation that committed returns its result (giving its lease back is no reason to
    # fail it); one that raises changed nothing.
    pdb.engine.retry = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02)
    store = pdb.store
    act = {
        "rewind": lambda run_id: pdb.rewind(run_id, 4, confirm=True),
        "reset": lambda run_id: pdb.reset(run_id, "b"),
    }[operation]
    for k in range(20):
        run_id = finished_run(store)
        began = pg_proxy.outage_after_commit(skip=k)
        try:
            act(run_id)
            error = None
        except SmithersError as caught:
            error = caught
        pg_proxy.disarm()
        pg_proxy.restore()
        if not began.is_set():
            assert k > 0
            return
        audited = audits(pdb, run_id, operation)
        if error is None:
            assert audited == 1
        else:
            assert audited == 0, f"the {operation} committed, yet raised {error!r}"
            assert isinstance(error, TransientStoreError | OutcomeUnknown), error
    raise AssertionError("too many COMMITs")


def test_fork_whose_commit_reply_is_lost_makes_one_child(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store

    def check(run_id: str, child: st.Run) -> None:
        children = [r for r in pdb.runs(limit=1000) if r.record.parent_run_id == run_id]
        assert [c.id for c in children] == [child.id]
        assert audits(pdb, run_id, "fork") == 1
        assert [r.sequence for r in child.checkpoints()] == [0, 1]

    each_lost_commit(
        pg_proxy,
        lambda: finished_run(store),
        lambda run_id: pdb.fork(run_id, 4),
        check,
    )


def test_reset_whose_commit_reply_is_lost_resets_once(pdb: st.Database, pg_proxy: PgProxy) -> None:
    store = pdb.store

    def check(run_id: str, gone: list[str]) -> None:
        assert gone == ["b"]
        run = store.get_run(run_id)
        assert run.status == "interrupted"
        assert kinds(store, run_id).count("reset") == 1
        assert [a.key.node_id for a in store.list_attempts(run_id)] == ["a"]
        assert audits(pdb, run_id, "reset") == 1
        pdb.reset(run_id, "a")  # the lease was given back

    each_lost_commit(
        pg_proxy,
        lambda: finished_run(store),
        lambda run_id: pdb.reset(run_id, "b"),
        check,
    )


# --- garbage collection -----------------------------------------------------------------------


def test_collection_whose_commit_reply_is_lost_reports_what_it_deleted(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    def setup() -> list[str]:
        return [orphan(pdb, checkpoint(secrets.token_hex(4))) for _ in range(3)]

    def check(hashes: list[str], report: Any) -> None:
        assert report.deleted == 3
        for digest in hashes:
            assert count(pdb, "tt_checkpoint_contents", content_hash=digest) == 0

    each_lost_commit(pg_proxy, setup, lambda _: pdb.collect_garbage(), check)


def test_prune_whose_commit_reply_is_lost_reports_the_runs_it_deleted(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    def setup() -> str:
        run_id = finished_run(pdb.store)
        execute(pdb, "UPDATE tt_runs SET updated_at_ms = 0 WHERE run_id = :r", r=run_id)
        return run_id

    def check(run_id: str, report: Any) -> None:
        assert report.deleted == [run_id]
        assert count(pdb, "tt_runs", run_id=run_id) == 0

    each_lost_commit(pg_proxy, setup, lambda _: pdb.gc(older_than=3600), check)


# --- when the outcome cannot be known ---------------------------------------------------------


def test_lost_commit_reply_with_the_database_gone_raises_outcome_unknown(
    pdb: st.Database, pg_proxy: PgProxy
) -> None:
    store = pdb.store
    pdb.engine.retry = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02)
    run_id = f"r-{secrets.token_hex(6)}"
    pg_proxy.drop_commit_reply(outage=True)
    with pytest.raises(OutcomeUnknown) as caught:
        store.create_run("wf", run_id=run_id)
    pg_proxy.restore()
    error = caught.value
    assert isinstance(error, StoreError)
    assert not error.retryable
    assert "may or may not have happened" in error.message
    assert "nothing was" not in error.message
    # It had in fact committed: repeating the call blindly would have been wrong.
    assert store.get_run(run_id).status == "running"


# --- tokens stay few --------------------------------------------------------------------------


def test_expired_commit_tokens_are_pruned_by_later_writes(pdb: st.Database) -> None:
    from smithers_tt.store.backend._engine import _PRUNE_EVERY, COMMIT_TOKEN_TTL_MS

    old = now_ms() - COMMIT_TOKEN_TTL_MS - 60_000
    for n in range(100):
        execute(pdb, "INSERT INTO tt_commit_tokens VALUES (:t, :n)", t=old, n=n)
    fence = running_run(pdb.store)
    register_worker(pdb.store, "w1", "host", 1, ["wf"])
    for _ in range(2 * _PRUNE_EVERY):  # a worker's heartbeat: a write that carries a token
        worker_heartbeat(pdb.store, "w1", [fence])
    assert count(pdb, "tt_commit_tokens", created_at_ms=old) == 0
