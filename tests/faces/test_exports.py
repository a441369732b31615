"""Exports: every length lands in the same bucket under each framework's own rule."""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import LengthHistogram, exports, optimize_edges
from analysis.batching import bucket_index


@dataclass(frozen=True)
class StandInPlan:
    """What an export needs of a plan (analysis.exports.PlanLike): edges and batch sizes."""

    edges: list[int]
    batch_sizes: list[int]


def _real_plan():
    hist = LengthHistogram.from_lengths(np.arange(1, 200))
    return optimize_edges(hist, 3, batch_size=4, pad_to_multiple_of=8)


@st.composite
def plans(draw):
    k = draw(st.integers(1, 8))
    inner = draw(st.lists(st.integers(1, 5000), min_size=k, max_size=k, unique=True))
    e0 = draw(st.integers(0, min(inner) - 1))
    edges = [e0, *sorted(inner)]
    sizes = draw(st.lists(st.integers(1, 64), min_size=k, max_size=k))
    return StandInPlan(edges=edges, batch_sizes=sizes)


def _every_length(plan):
    return np.arange(plan.edges[0] + 1, plan.edges[-1] + 1)


@settings(max_examples=60, deadline=None)
@given(plans())
def test_lhotse_bins_reproduce_our_buckets_with_bisect_right_and_left(plan):
    out = exports.to_lhotse(plan)
    ours = bucket_index(_every_length(plan), plan.edges).tolist()
    bins = out["duration_bins"]
    uppers = out["constraint"]["max_seq_len_buckets"]
    assert out["num_buckets"] == len(bins) + 1 == len(plan.batch_sizes)
    for rule in (bisect.bisect_right, bisect.bisect_left):
        assert [rule(bins, float(n)) for n in _every_length(plan)] == ours
        # FixedBucketBatchSizeConstraint: same index over its K upper bounds, always < K.
        assert [rule(uppers, float(n)) for n in _every_length(plan)] == ours
    assert out["constraint"]["batch_sizes"] == plan.batch_sizes


@settings(max_examples=60, deadline=None)
@given(plans())
def test_nemo_bins_reproduce_our_buckets(plan):
    out = exports.to_nemo(plan)
    bins = out["bucket_duration_bins"]
    assert out["num_buckets"] == len(bins) == len(out["bucket_batch_size"])
    ours = bucket_index(_every_length(plan), plan.edges).tolist()

    def find_smallest_bucket(length):  # NeMo's 1-D rule: bisect_left, None past the end
        idx = bisect.bisect_left(bins, length)
        return None if idx == len(bins) else idx

    assert [find_smallest_bucket(float(n)) for n in _every_length(plan)] == ours
    assert [bisect.bisect_right(bins, float(n)) for n in _every_length(plan)] == ours  # older NeMo
    assert find_smallest_bucket(float(plan.edges[-1] + 1)) is None  # too long: dropped


@settings(max_examples=60, deadline=None)
@given(plans())
def test_tf_data_boundaries_reproduce_our_buckets(plan):
    out = exports.to_tf_data(plan)
    bounds = out["bucket_boundaries"]
    assert all(isinstance(b, int) for b in bounds)
    assert len(out["bucket_batch_sizes"]) == len(bounds) + 1
    lower, upper = [0, *bounds], [*bounds, np.iinfo(np.int32).max]

    def tf_bucket(length):  # (buckets_min <= length) & (length < buckets_max)
        hits = [i for i, (lo, hi) in enumerate(zip(lower, upper, strict=False)) if lo <= length < hi]
        assert len(hits) == 1
        return hits[0]

    ours = bucket_index(_every_length(plan), plan.edges).tolist()
    assert [tf_bucket(int(n)) for n in _every_length(plan)] == ours


@settings(max_examples=60, deadline=None)
@given(plans())
def test_hf_upper_bounds_reproduce_our_buckets(plan):
    out = exports.to_hf(plan)
    bounds = out["bucket_upper_bounds"]
    got = np.searchsorted(bounds, _every_length(plan), side="left").tolist()
    assert got == bucket_index(_every_length(plan), plan.edges).tolist()
    assert out["training_args"] == {"length_column_name": "length"}
    assert out["bucket_batch_sizes"] == plan.batch_sizes


def test_case_edges_exports_by_hand():
    plan = StandInPlan(edges=[0, 770, 1216, 1728, 2432, 3296, 8192], batch_sizes=[8] * 6)
    assert exports.to_tf_data(plan)["bucket_boundaries"] == [771, 1217, 1729, 2433, 3297]
    assert exports.to_nemo(plan)["bucket_duration_bins"][-1] == 8192.5
    assert exports.to_lhotse(plan)["duration_bins"][0] == 770.5


def test_json_is_the_plan_and_every_export():
    plan = _real_plan()
    data = json.loads(exports.to_json(plan))
    assert data["edges"] == plan.edges and data["batch_sizes"] == [4, 4, 4]
    assert data["method"] == "optimal" and data["n_buckets"] == 3 and data["exact"] is True
    assert (data["batch_size"], data["max_tokens"], data["pad_to_multiple_of"]) == (4, None, 8)
    assert data["efficiency"] == plan.efficiency and data["padded_tokens"] == plan.padded_tokens
    assert data["useful_tokens"] == sum(range(1, 200))
    assert sorted(data["exports"]) == ["hf", "lhotse", "nemo", "tf_data"]
    assert data["exports"]["nemo"]["bucket_batch_size"] == [4, 4, 4]
    assert data["exports"]["tf_data"]["bucket_boundaries"] == [e + 1 for e in plan.edges[1:-1]]
    assert "\n" not in exports.to_json(plan, indent=None)


def test_bad_plans_raise_value_error():
    with pytest.raises(ValueError, match="BucketPlan"):
        exports.to_nemo(object())
    with pytest.raises(ValueError, match="2 buckets but 1 batch sizes"):
        exports.to_tf_data(StandInPlan(edges=[0, 5, 9], batch_sizes=[8]))
    with pytest.raises(ValueError, match="strictly increasing"):
        exports.to_lhotse(StandInPlan(edges=[0, 9, 5], batch_sizes=[8, 8]))
    with pytest.raises(ValueError, match="batch sizes must be positive"):
        exports.to_hf(StandInPlan(edges=[0, 5, 9], batch_sizes=[8, 0]))


def test_real_bucket_plan_exports():
    plan = _real_plan()
    data = json.loads(exports.to_json(plan))
    for key in ("edges", "batch_sizes", "efficiency", "padded_tokens", "useful_tokens", "method"):
        assert key in data
    assert data["edges"] == list(plan.edges)
    lengths = np.arange(plan.edges[0] + 1, plan.edges[-1] + 1)
    bounds = exports.to_tf_data(plan)["bucket_boundaries"]
    assert [bisect.bisect_right(bounds, int(n)) for n in lengths] == bucket_index(
        lengths, plan.edges
    ).tolist()
