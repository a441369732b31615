"""The batching vocabulary (analysis.batching): the batch rule, edges and their text, bucket
membership and rounding, each against its definition or brute force."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import LengthHistogram
from analysis.batching import (
    DEFAULT_BATCH_SIZE,
    BatchRule,
    as_rule,
    bucket_bounds,
    bucket_index,
    check_edges,
    cover_edges,
    parse_edges,
    round_up,
)

# ------------------------------------------------------------------------------ BatchRule


def test_rule_is_frozen_and_normalised():
    rule = BatchRule(batch_size=np.int32(8), pad_to_multiple_of=8.0)
    assert rule == BatchRule(8, None, 8)
    assert type(rule.batch_size) is int and type(rule.pad_to_multiple_of) is int
    with pytest.raises(dataclasses.FrozenInstanceError):
        rule.batch_size = 4  # type: ignore[misc]
    assert hash(rule) == hash(BatchRule(8, None, 8))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "got neither"),
        ({"batch_size": 8, "max_tokens": 4096}, "got both"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"batch_size": 2.5}, "batch_size must be a positive integer"),
        ({"batch_size": True}, "batch_size must be a positive integer"),
        ({"batch_size": "8"}, "batch_size must be a positive integer"),
        ({"max_tokens": -1}, "max_tokens must be a positive integer"),
        ({"batch_size": 8, "pad_to_multiple_of": 0}, "pad_to_multiple_of must be a positive integer"),
        ({"batch_size": 8, "pad_to_multiple_of": None}, "pad_to_multiple_of must be a positive integer"),
    ],
)
def test_rule_validation_is_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        BatchRule(**kwargs)
    assert "\n" not in str(info.value)


def test_resolve_defaults_and_has_no_precedence():
    assert BatchRule.resolve() == BatchRule(batch_size=DEFAULT_BATCH_SIZE)
    assert BatchRule.resolve(pad_to_multiple_of=8) == BatchRule(DEFAULT_BATCH_SIZE, None, 8)
    assert BatchRule.resolve(max_tokens=4096) == BatchRule(max_tokens=4096)
    assert BatchRule.resolve(batch_size=3, pad_to_multiple_of=None).pad_to_multiple_of == 1
    with pytest.raises(ValueError, match="got both"):  # neither wins
        BatchRule.resolve(batch_size=8, max_tokens=4096)


def test_as_rule_takes_a_rule_or_the_shorthand_never_both():
    rule = BatchRule(max_tokens=100, pad_to_multiple_of=4)
    assert as_rule(rule) is rule
    assert as_rule(max_tokens=100, pad_to_multiple_of=4) == rule
    with pytest.raises(ValueError, match="got neither"):  # no default in the engine
        as_rule()
    for extra in ({"batch_size": 2}, {"max_tokens": 2}, {"pad_to_multiple_of": 1}):
        with pytest.raises(ValueError, match="not both"):
            as_rule(rule, **extra)
    with pytest.raises(ValueError, match="rule must be a BatchRule"):
        as_rule({"batch_size": 2})  # type: ignore[arg-type]


@pytest.mark.parametrize("edges", [[0, 1], [0, 3, 7, 100], [99, 500, 4096, 8192]])
@pytest.mark.parametrize("max_tokens", [1, 50, 1000, 16384])
def test_batch_sizes_fit_the_budget_at_each_upper_edge(edges, max_tokens):
    sizes = BatchRule(max_tokens=max_tokens).batch_sizes(edges)
    assert len(sizes) == len(edges) - 1
    for upper, size in zip(edges[1:], sizes, strict=False):
        # the largest size whose full batch of the bucket's longest possible sample fits, or 1
        fits = [b for b in range(1, max_tokens + 1) if b * upper <= max_tokens]
        assert size == (max(fits) if fits else 1)
    assert BatchRule(batch_size=5).batch_sizes(edges) == [5] * (len(edges) - 1)


def test_fixed_batch_size_and_token_budget():
    assert BatchRule(max_tokens=16384).fixed_batch_size(4000) == 4
    assert BatchRule(max_tokens=100).fixed_batch_size(4000) == 1
    assert BatchRule(batch_size=8).fixed_batch_size(4000) == 8
    assert BatchRule(max_tokens=100).token_budget(4000) == 100
    assert BatchRule(batch_size=8).token_budget(4000) == 32000


def test_kwargs_and_text():
    assert BatchRule(batch_size=8).kwargs() == {"batch_size": 8}
    assert BatchRule(max_tokens=4096, pad_to_multiple_of=64).kwargs() == {
        "max_tokens": 4096,
        "pad_to_multiple_of": 64,
    }
    for rule in (BatchRule(batch_size=8), BatchRule(max_tokens=4096, pad_to_multiple_of=64)):
        assert BatchRule(**rule.kwargs()) == rule
    assert BatchRule(batch_size=8).text == "batch_size 8"
    assert BatchRule(max_tokens=16384, pad_to_multiple_of=8).text == "max_tokens 16,384, pad_to_multiple_of 8"


# ------------------------------------------------------------------------------ edges


@pytest.mark.parametrize(
    "edges",
    [
        [0, 770, 1216, 8192],
        (0, 5),
        np.array([0, 5, 9]),
        np.array([0, 5], dtype=np.uint16),
        [np.int64(0), 5.0, 9],
    ],
)
def test_check_edges_returns_python_ints(edges):
    out = check_edges(edges)
    assert out == [int(e) for e in np.asarray(edges).tolist()]
    assert all(type(e) is int for e in out)


@pytest.mark.parametrize(
    "edges, message",
    [
        (None, "must be a sequence of integers, got NoneType"),
        ("0,5,9", "must be a sequence of integers, got str"),
        (7, "must be a sequence of integers, got int"),
        (np.array([[0, 5], [5, 9]]), r"must be 1-D, got an array of shape \(2, 2\)"),
        (np.zeros((0, 2), dtype=int), "must be 1-D"),
        ([0], "at least 2 values"),
        ([], "at least 2 values"),
        ([0, 5.5], r"edges\[1\] = 5.5 is not an integer"),
        ([0, True], r"edges\[1\] = True is not an integer"),
        ([0, "5"], r"edges\[1\] = '5' is not an integer"),
        ([0, 9, 9], r"strictly increasing: edges\[1\] = 9 >= edges\[2\] = 9"),
        ([0, 9, 5], "strictly increasing"),
        ([-1, 5], r"edges\[0\] = -1 is negative"),
    ],
)
def test_check_edges_errors_are_one_line(edges, message):
    with pytest.raises(ValueError, match=message) as info:
        check_edges(edges)
    assert "\n" not in str(info.value)


def test_check_edges_against_the_data():
    hist = LengthHistogram.from_lengths([3, 4, 10])
    assert check_edges([2, 10], hist) == [2, 10]
    with pytest.raises(ValueError, match="must be below the shortest length 3"):
        check_edges([3, 10], hist)
    with pytest.raises(ValueError, match="is below the longest length 10"):
        check_edges([0, 9], hist)


def test_cover_edges_stretches_only_the_ends():
    hist = LengthHistogram.from_lengths([100, 9000])
    assert cover_edges([0, 770, 8192], hist) == [0, 770, 9000]
    assert cover_edges([200, 770, 20000], hist) == [99, 770, 20000]
    # an interior edge beyond the data leaves an empty bucket, not an error
    assert cover_edges([0, 50, 8192], hist) == [0, 50, 9000]
    with pytest.raises(ValueError, match="strictly increasing"):
        cover_edges([0, 9000, 500], hist)


@pytest.mark.parametrize(
    "text, want",
    [
        ("0,770,1216,8192", [0, 770, 1216, 8192]),
        (" 0,10 20 ,30 ", [0, 10, 20, 30]),
        ("0 10\t20\n30", [0, 10, 20, 30]),
        ("0,,10,", [0, 10]),
        ("0, 8_192", [0, 8192]),
        ("+0, 10", [0, 10]),
    ],
)
def test_parse_edges_grammar(text, want):
    assert parse_edges(text) == want


@pytest.mark.parametrize(
    "text, message",
    [
        ("0, ten", "'ten' is not an integer"),
        ("0, 1.5", "'1.5' is not an integer"),
        ("0;10", "'0;10' is not an integer"),
        ("", "at least 2 values"),
        (" , ", "at least 2 values"),
        ("10", "at least 2 values"),
        ("0, 10, 5", "strictly increasing"),
        ("-5, 10", "is negative"),
        ([0, 10], "edges text must be a string"),
    ],
)
def test_parse_edges_errors(text, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_edges(text)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------ membership


def brute_force_bucket(length: int, edges: list[int]) -> int:
    (hit,) = [i for i in range(len(edges) - 1) if edges[i] < length <= edges[i + 1]]
    return hit


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=2, max_size=9, unique=True))
def test_bucket_index_equals_brute_force(raw):
    edges = sorted(raw)
    values = np.arange(edges[0] + 1, edges[-1] + 1)
    got = bucket_index(values, edges)
    assert got.dtype == np.int64
    assert got.tolist() == [brute_force_bucket(v, edges) for v in values.tolist()]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 300), min_size=2, max_size=9, unique=True),
    st.lists(st.integers(1, 300), min_size=1, max_size=40),
)
def test_bucket_bounds_equal_bucket_index(raw, samples):
    edges = sorted(raw)
    hist = LengthHistogram.from_lengths([min(max(s, edges[0] + 1), edges[-1]) for s in samples])
    starts, stops = bucket_bounds(hist.lengths, edges)
    assert len(starts) == len(stops) == len(edges) - 1
    which = bucket_index(hist.lengths, edges)
    for i, (lo, hi) in enumerate(zip(starts, stops, strict=False)):
        assert lo <= hi
        assert np.array_equal(np.flatnonzero(which == i), np.arange(lo, hi))


@pytest.mark.parametrize("multiple", [1, 2, 3, 8, 64])
def test_round_up(multiple):
    values = np.arange(0, 200)
    want = [next(m for m in range(v, v + multiple) if m % multiple == 0) for v in values.tolist()]
    assert round_up(values, multiple).tolist() == want
    assert [round_up(v, multiple) for v in values.tolist()] == want
    assert round_up(np.array([2**62 + 1], dtype=np.int64), 2).tolist() == [2**62 + 2]
