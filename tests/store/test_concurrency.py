"""Dense, unique sequences under many concurrent writers (threads and processes)."""

from __future__ import annotations

import threading

import pytest

import smithers_tt as st
from smithers_tt.store import AttemptKey, CheckpointRef, Fence, Store

from ._support import attempt_args, checkpoint, refs_of, run_together

WRITERS = 16
PUBLISHES = 200


def payload(writer: int, i: int) -> st.AgentCheckpoint:
    return checkpoint({"writer": writer, "i": i})


def assert_dense_and_verified(db: st.Database, run_id: str, published: list[CheckpointRef]):
    """Every publication got its own sequence, 0..N-1 with no gap, and every ref's content
    is stored intact."""
    stored = refs_of(db, run_id)
    assert [r.sequence for r in stored] == list(range(WRITERS * PUBLISHES))
    assert sorted(published, key=lambda r: r.sequence) == stored
    report = db.verify()
    assert report.ok
    assert report.checked == WRITERS * PUBLISHES


def test_publish_allocates_dense_unique_sequences_when_16_threads_share_one_database(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    start = threading.Barrier(WRITERS)
    published: list[list[CheckpointRef]] = [[] for _ in range(WRITERS)]
    failures: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            start.wait()
            for i in range(PUBLISHES):
                published[w].append(store.publish(fence, attempt, payload(w, i)))
        except BaseException as error:  # reported below, with the writer's traceback
            failures.append(error)

    batches_before = store.commit_batches
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert failures == []
    for w, refs in enumerate(published):
        assert [r.content_hash for r in refs] == [
            payload(w, i).encode().content_hash for i in range(PUBLISHES)
        ]
        assert [r.sequence for r in refs] == sorted(r.sequence for r in refs)
    assert_dense_and_verified(db, fence.run_id, [r for refs in published for r in refs])
    assert store.commit_batches - batches_before < WRITERS * PUBLISHES  # group commit coalesced


PUBLISH_FROM_A_PROCESS = """
import smithers_tt
from smithers_tt.store import AttemptKey, Fence
url, run_id, epoch, node_id, iteration, attempt, writer, count = args
fence = Fence(run_id, int(epoch))
key = AttemptKey(run_id, node_id, int(iteration), int(attempt))
db = smithers_tt.connect(url)
checkpoints = [
    smithers_tt.AgentCheckpoint("test", 1, {"n": {"writer": int(writer), "i": i}})
    for i in range(int(count))
]
wait_for_go()
emit([[ref.sequence, ref.content_hash] for ref in
      (db.store.publish(fence, key, cp) for cp in checkpoints)])
db.close()
"""


@pytest.mark.slow  # 45 s (SQLite) to 80 s (PostgreSQL) on 2 busy cores
def test_publish_allocates_dense_unique_sequences_when_16_processes_publish_at_once(
    db: st.Database, fence: Fence, attempt: AttemptKey, tmp_path
) -> None:
    argvs = [
        [db.url, *attempt_args(fence, attempt), str(w), str(PUBLISHES)] for w in range(WRITERS)
    ]

    results = run_together(PUBLISH_FROM_A_PROCESS, argvs, tmp_path)

    stored = {r.sequence: r for r in refs_of(db, fence.run_id)}
    assert sorted(stored) == list(range(WRITERS * PUBLISHES))
    for w, pairs in enumerate(results):
        assert len(pairs) == PUBLISHES
        for i, (sequence, digest) in enumerate(pairs):
            assert digest == payload(w, i).encode().content_hash
            assert stored[sequence].content_hash == digest
    sequences = [s for pairs in results for s, _ in pairs]
    assert sorted(sequences) == list(range(WRITERS * PUBLISHES))
    report = db.verify()
    assert report.ok
    assert report.checked == WRITERS * PUBLISHES
