"""Verified reads, keyset pagination and bounded history scans."""

from __future__ import annotations

from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.errors import (
    CheckpointCorrupt,
    CheckpointMissing,
    HistoryExhausted,
    InvalidArgument,
)
from smithers_tt.store import AttemptKey, CheckpointRef, Fence, Store
from smithers_tt.store._records import encode_cursor

from ._support import checkpoint, execute, refs_of

# --- integrity ----------------------------------------------------------------------------


def _flip_a_byte(data: bytes, size: int) -> tuple[bytes, int]:
    return data[:5] + bytes([data[5] ^ 0x01]) + data[6:], size


def _wrong_size(data: bytes, size: int) -> tuple[bytes, int]:
    return data, size + 1


def _truncate(data: bytes, size: int) -> tuple[bytes, int]:
    return data[:-1], size - 1


CORRUPTIONS = [
    pytest.param(_flip_a_byte, id="flipped_byte"),
    pytest.param(_wrong_size, id="wrong_size"),
    pytest.param(_truncate, id="truncated"),
]


@pytest.fixture
def stored(store: Store, fence: Fence, attempt: AttemptKey) -> CheckpointRef:
    """A published checkpoint (its content is damaged by the tests below)."""
    return store.publish(fence, attempt, checkpoint("precious"))


def damage(db: st.Database, ref: CheckpointRef, corruption) -> None:
    """Change the stored row directly in the database, as a failing disk or a person might."""
    encoded = checkpoint("precious").encode()
    data, size = corruption(encoded.data, encoded.size)
    changed = execute(
        db,
        "UPDATE tt_checkpoint_contents SET data = :d, size_bytes = :s WHERE content_hash = :h",
        d=data,
        s=size,
        h=ref.content_hash,
    )
    assert changed == 1


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_read_content_raises_checkpoint_corrupt_when_the_stored_row_was_damaged(
    db: st.Database, store: Store, stored: CheckpointRef, corruption
) -> None:
    damage(db, stored, corruption)

    with pytest.raises(CheckpointCorrupt) as caught:
        store.read_content(stored.content_hash)
    assert caught.value.details["content_hash"] == stored.content_hash
    with pytest.raises(CheckpointCorrupt):
        store.load(stored)


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_verify_reports_the_hash_when_the_stored_row_was_damaged(
    db: st.Database, store: Store, stored: CheckpointRef, attempt: AttemptKey, fence, corruption
) -> None:
    healthy = store.publish(fence, attempt, checkpoint("healthy"))
    assert db.verify().ok
    damage(db, stored, corruption)

    report = db.verify(page_size=1)

    assert report.corrupt == [stored.content_hash]
    assert report.checked == 2
    assert not report.ok
    assert store.load(healthy) == checkpoint("healthy")


def test_publish_raises_checkpoint_corrupt_and_writes_no_ref_when_the_stored_copy_differs(
    db: st.Database, store: Store, stored: CheckpointRef, fence: Fence, attempt: AttemptKey
) -> None:
    damage(db, stored, _flip_a_byte)

    with pytest.raises(CheckpointCorrupt):
        store.publish(fence, attempt, checkpoint("precious"))

    assert refs_of(db, fence.run_id) == [stored]
    assert store.get_attempt(attempt).next_sequence == 1


def test_load_raises_checkpoint_corrupt_when_the_ref_names_another_codec(
    db: st.Database, store: Store, stored: CheckpointRef
) -> None:
    execute(db, "UPDATE tt_frame_rows SET codec = 'other' WHERE kind = 'checkpoint'")

    with pytest.raises(CheckpointCorrupt):
        store.load(refs_of(db, stored.run_id)[0])


def test_read_content_raises_checkpoint_missing_when_nothing_has_the_hash(
    store: Store, stored: CheckpointRef
) -> None:
    with pytest.raises(CheckpointMissing):
        store.read_content("0" * 64)


def test_read_content_returns_the_canonical_bytes_when_intact(
    store: Store, stored: CheckpointRef
) -> None:
    assert store.read_content(stored.content_hash) == checkpoint("precious").encode().data


# --- keyset pagination --------------------------------------------------------------------

# (node, iteration, attempt, purposes of the refs it publishes, in order)
LAYOUT = [
    ("a", 0, 1, ["progress", "turn", "progress", "turn", "session"]),
    ("a", 0, 2, ["turn", "progress", "schema-correction", "progress"]),
    ("a", 1, 1, ["progress", "turn", "turn"]),
    ("b", 0, 1, ["turn", "progress", "progress", "progress", "turn", "progress"]),
]


@pytest.fixture
def published(store: Store, fence: Fence) -> list[CheckpointRef]:
    """18 refs over two nodes, two iterations, two attempts and four purposes, in key order."""
    refs: list[CheckpointRef] = []
    for node, iteration, number, purposes in LAYOUT:
        key = store.start_attempt(fence, node, iteration).key
        assert key.attempt == number
        for i, purpose in enumerate(purposes):
            cp = checkpoint([node, iteration, number, i])
            refs.append(store.publish(fence, key, cp, purpose=purpose))
    return sorted(refs, key=lambda r: (r.node_id, r.iteration, r.attempt, r.sequence))


def walk(listing, limit: int, **filters: Any) -> list[Any]:
    """Every item of a paginated listing, checking each page's size and cursor."""
    items: list[Any] = []
    cursor = None
    while True:
        page = listing(limit=limit, cursor=cursor, **filters)
        assert 0 < len(page.items) <= limit or (not items and not page.items)
        items.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return items
        assert len(page.items) == limit


REF_FILTERS = [
    pytest.param({}, id="all"),
    pytest.param({"node_id": "a"}, id="node"),
    pytest.param({"node_id": "a", "iteration": 0, "attempt": 2}, id="attempt"),
    pytest.param({"purpose": "turn"}, id="purpose"),
    pytest.param({"node_id": "b", "purpose": "progress"}, id="node_and_purpose"),
]


def matches(ref: CheckpointRef, filters: dict[str, Any]) -> bool:
    return all(getattr(ref, name) == value for name, value in filters.items())


@pytest.mark.parametrize("limit", [1, 4])
@pytest.mark.parametrize("filters", REF_FILTERS)
def test_list_refs_walks_every_matching_ref_exactly_once_across_pages(
    store: Store, fence: Fence, published: list[CheckpointRef], filters, limit: int
) -> None:
    listing = lambda **kw: store.list_refs(fence.run_id, **kw)  # noqa: E731

    assert walk(listing, limit, **filters) == [r for r in published if matches(r, filters)]


def test_list_refs_lists_only_the_asked_run(
    store: Store, fence: Fence, published: list[CheckpointRef]
) -> None:
    _, other = store.create_run("wf")
    key = store.start_attempt(other, "a").key
    theirs = store.publish(other, key, checkpoint("other run"))

    assert store.list_refs(other.run_id).items == [theirs]
    assert store.list_refs(fence.run_id, limit=1000).items == published


@pytest.fixture
def runs(store: Store) -> dict[str, list[str]]:
    """Seven runs: three queued and four running, by status (ids in listing order)."""
    made: dict[str, list[str]] = {"queued": [], "running": []}
    for status in ["queued", "running", "running", "queued", "running", "queued", "running"]:
        run, _ = store.create_run("wf", status=status)
        made[status].append(run.run_id)
    return {status: sorted(ids) for status, ids in made.items()}


@pytest.mark.parametrize("limit", [1, 3])
@pytest.mark.parametrize("status", [None, "queued", "finished"])
def test_list_runs_walks_every_matching_run_exactly_once_across_pages(
    store: Store, runs: dict[str, list[str]], status: str | None, limit: int
) -> None:
    expected = sorted(runs["queued"] + runs["running"]) if status is None else runs.get(status, [])

    listed = walk(store.list_runs, limit, status=status)

    assert [r.run_id for r in listed] == expected


BAD_LIMITS = [
    pytest.param(0, id="zero"),
    pytest.param(1001, id="above_max"),
    pytest.param(-1, id="negative"),
    pytest.param(True, id="bool"),
    pytest.param("10", id="str"),
]


@pytest.mark.parametrize("limit", BAD_LIMITS)
def test_list_refs_raises_invalid_argument_when_the_limit_is_bad(
    store: Store, fence: Fence, limit
) -> None:
    with pytest.raises(InvalidArgument):
        store.list_refs(fence.run_id, limit=limit)


@pytest.mark.parametrize("limit", BAD_LIMITS)
def test_list_runs_raises_invalid_argument_when_the_limit_is_bad(store: Store, limit) -> None:
    with pytest.raises(InvalidArgument):
        store.list_runs(limit=limit)


BAD_CURSORS = [
    pytest.param("not a cursor!", id="garbage"),
    pytest.param("", id="empty"),
    pytest.param("e30", id="json_object"),
    pytest.param(encode_cursor("runs", ["x"]), id="cursor_of_the_runs_listing"),
    pytest.param(encode_cursor("refs", ["a", "0", 1, 0]), id="wrong_types"),
    pytest.param(encode_cursor("refs", ["a", 0, 1]), id="too_short"),
    pytest.param(encode_cursor("refs", ["a", True, 1, 0]), id="bool_for_int"),
]


@pytest.mark.parametrize("cursor", BAD_CURSORS)
def test_list_refs_raises_invalid_argument_when_the_cursor_is_not_one_of_its_own(
    store: Store, fence: Fence, cursor: str
) -> None:
    with pytest.raises(InvalidArgument):
        store.list_refs(fence.run_id, cursor=cursor)


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param("%%%", id="garbage"),
        pytest.param(encode_cursor("refs", ["a", 0, 1, 0]), id="cursor_of_the_refs_listing"),
        pytest.param(encode_cursor("runs", [7]), id="wrong_type"),
    ],
)
def test_list_runs_raises_invalid_argument_when_the_cursor_is_not_one_of_its_own(
    store: Store, cursor: str
) -> None:
    with pytest.raises(InvalidArgument):
        store.list_runs(cursor=cursor)


# --- newest first, bounded ----------------------------------------------------------------


@pytest.fixture
def history(store: Store, fence: Fence) -> list[tuple[int, int]]:
    """Node ``n``: attempt 1 publishes 3 refs, attempt 2 publishes 2 (newest first)."""
    for attempt, refs in [(1, 3), (2, 2)]:
        key = store.start_attempt(fence, "n").key
        assert key.attempt == attempt
        for i in range(refs):
            store.publish(fence, key, checkpoint([attempt, i]))
        store.finish_attempt(fence, key, "failed")
    return [(2, 1), (2, 0), (1, 2), (1, 1), (1, 0)]


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        pytest.param(None, (2, 1), id="newest"),
        pytest.param((2, 1), (2, 0), id="before_newest"),
        pytest.param((2, 0), (1, 2), id="across_attempts"),
        pytest.param((3, 0), (2, 1), id="before_a_later_attempt"),
        pytest.param((1, 0), None, id="before_the_oldest"),
    ],
)
def test_newest_ref_returns_the_newest_ref_strictly_before(
    store: Store, fence: Fence, history, before, expected
) -> None:
    ref = store.newest_ref(fence.run_id, "n", before=before)

    assert (ref and (ref.attempt, ref.sequence)) == expected


def test_newest_ref_returns_none_when_the_node_has_no_refs(
    store: Store, fence: Fence, history
) -> None:
    assert store.newest_ref(fence.run_id, "n", 1) is None
    assert store.newest_ref(fence.run_id, "other") is None


@pytest.mark.parametrize("page", [1, 2])
def test_iter_refs_newest_first_yields_every_ref_newest_first_when_within_the_bound(
    store: Store, fence: Fence, history, page: int
) -> None:
    refs = store.iter_refs_newest_first(fence.run_id, "n", page=page, bound=len(history))

    assert [(r.attempt, r.sequence) for r in refs] == history


@pytest.mark.parametrize("page", [1, 2])
def test_iter_refs_newest_first_starts_strictly_before_the_given_position(
    store: Store, fence: Fence, history, page: int
) -> None:
    refs = store.iter_refs_newest_first(fence.run_id, "n", before=(2, 0), page=page)

    assert [(r.attempt, r.sequence) for r in refs] == history[2:]


@pytest.mark.parametrize("page", [1, 2])
def test_iter_refs_newest_first_raises_history_exhausted_after_its_bound(
    store: Store, fence: Fence, history, page: int
) -> None:
    seen: list[tuple[int, int]] = []

    with pytest.raises(HistoryExhausted) as caught:
        for ref in store.iter_refs_newest_first(fence.run_id, "n", page=page, bound=3):
            seen.append((ref.attempt, ref.sequence))

    assert seen == history[:3]
    assert caught.value.details["bound"] == 3


def test_iter_refs_newest_first_skips_attempts_that_discarded_their_state(
    store: Store, fence: Fence
) -> None:
    kept: list[tuple[int, int]] = []
    for attempt, discard in [(1, True), (2, False), (3, True), (4, False)]:
        key = store.start_attempt(fence, "n").key
        for i in range(2):
            ref = store.publish(fence, key, checkpoint([attempt, i]))
            if not discard:
                kept.append((ref.attempt, ref.sequence))
        if attempt < 4:  # the last one is still in progress
            store.finish_attempt(fence, key, "failed", discard_resume=discard)

    skipping = store.iter_refs_newest_first(fence.run_id, "n", skip_discarded=True, page=1)
    everything = store.iter_refs_newest_first(fence.run_id, "n")

    assert [(r.attempt, r.sequence) for r in skipping] == kept[::-1]
    assert len(list(everything)) == 8
