"""The inspector pages through a snapshot's sorted ref keys as a ``SortedUnion`` (the keys of
a kept copy plus the keys added since, never merged): every way a page, a search or a
comparison reads it must give what the merged, sorted list gives."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smithers_tt.widgets._sorted import SortedUnion

KEYS = st.tuples(st.sampled_from(["a", "b", "plan"]), st.integers(0, 3), st.integers(1, 3))


@st.composite
def unions(draw: st.DrawFn) -> tuple[SortedUnion, list[tuple[str, int, int]]]:
    """A SortedUnion and the merged list it stands for (two disjoint sorted lists)."""
    keys = draw(st.lists(KEYS, unique=True, max_size=40))
    in_extra = draw(st.lists(st.booleans(), min_size=len(keys), max_size=len(keys)))
    base = sorted(k for k, x in zip(keys, in_extra, strict=True) if not x)
    extra = sorted(k for k, x in zip(keys, in_extra, strict=True) if x)
    return SortedUnion(base, extra), sorted(keys)


@given(unions())
def test_length_items_and_iteration_are_the_merged_lists(case) -> None:  # type: ignore[no-untyped-def]
    union, merged = case
    assert len(union) == len(merged)
    assert list(union) == merged
    assert [union[i] for i in range(len(merged))] == merged
    assert [union[-i] for i in range(1, len(merged) + 1)] == [
        merged[-i] for i in range(1, len(merged) + 1)
    ]
    for outside in (len(merged), -len(merged) - 1):
        with pytest.raises(IndexError, match="out of range"):
            union[outside]


@given(unions(), st.integers(-45, 45), st.integers(-45, 45), st.sampled_from([None, 1, 2, -1, 3]))
def test_every_slice_is_the_merged_lists_slice(case, start: int, stop: int, step) -> None:  # type: ignore[no-untyped-def]
    union, merged = case
    assert union[start:stop:step] == merged[start:stop:step]
    assert union[start:] == merged[start:]
    assert union[:stop] == merged[:stop]


@given(unions(), KEYS)
def test_membership_and_position_follow_the_merged_list(case, probe) -> None:  # type: ignore[no-untyped-def]
    union, merged = case
    for key in [*merged, probe]:
        assert (key in union) is (key in merged)
        if key in merged:
            at = merged.index(key)
            assert union.index(key) == at
            assert union.index(key, at) == at
            assert union.index(key, 0, at + 1) == at
            with pytest.raises(ValueError, match="is not in the sequence"):
                union.index(key, at + 1)
            with pytest.raises(ValueError, match="is not in the sequence"):
                union.index(key, 0, at)
        else:
            with pytest.raises(ValueError, match="is not in the sequence"):
                union.index(key)


@given(unions())
def test_it_equals_lists_tuples_and_unions_of_the_same_keys_only(case) -> None:  # type: ignore[no-untyped-def]
    union, merged = case
    assert union == merged
    assert union == tuple(merged)
    assert union == SortedUnion(merged, [])
    assert union == SortedUnion([], merged)
    assert union != [*merged, ("z", 9, 9)]
    assert union != SortedUnion([*merged, ("z", 9, 9)], [])
    assert union != set(merged)  # neither a list nor a union: not compared
    assert repr(union) == f"SortedUnion({merged!r})"
    with pytest.raises(TypeError):
        hash(union)
