"""Exports: every length lands in the same bucket under each framework's own rule."""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import exports
from analysis.waste import bucket_index


@dataclass(frozen=True)
class StandInPlan:
    """Same fields as analysis.optimize.BucketPlan (used when it is not importable)."""

    edges: list[int]
    batch_sizes: list[int]
    n_buckets: int = 0
    method: str = "optimal"
    efficiency: float = 0.9
    padded_tokens: int = 100
    useful_tokens: int = 90
    objective: float = 100.0
    extra: dict = field(default_factory=dict)


def _real_plan():
    """A real BucketPlan from optimize_edges, or None while it is not there yet."""
    try:
        from analysis import LengthHistogram, optimize_edges
    except ImportError:
        return None
    hist = LengthHistogram.from_lengths(np.arange(1, 200))
    return optimize_edges(hist, 3, batch_size=4)


@st.composite
def plans(draw):
    k = draw(st.integers(1, 8))
    inner = draw(st.lists(st.integers(1, 5000), min_size=k, max_size=k, unique=True))
    e0 = draw(st.integers(0, min(inner) - 1))
    edges = [e0, *sorted(inner)]
    sizes = draw(st.lists(st.integers(1, 64), min_size=k, max_size=k))
    return StandInPlan(edges=edges, batch_sizes=sizes, n_buckets=k)


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
        hits = [i for i, (lo, hi) in enumerate(zip(lower, upper)) if lo <= length < hi]
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


def test_json_and_yaml_agree_and_parse():
    plan = StandInPlan(edges=[0, 10, 30], batch_sizes=[8, 4], n_buckets=2)
    data = json.loads(exports.to_json(plan))
    assert data["edges"] == [0, 10, 30] and data["batch_sizes"] == [8, 4]
    assert data["method"] == "optimal" and data["padded_tokens"] == 100
    assert data["exports"]["nemo"]["bucket_batch_size"] == [8, 4]
    yaml = pytest.importorskip("yaml")  # only to check our hand-written YAML parses
    assert yaml.safe_load(exports.to_yaml(plan)) == data


def test_yaml_quotes_what_would_change_type():
    text = exports.dump_yaml({"a": "yes", "b": "1.5", "c": "x: y", "d": [], "e": {}, "f": "plain"})
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load(text) == {"a": "yes", "b": "1.5", "c": "x: y", "d": [], "e": {},
                                    "f": "plain"}


def test_bad_plans_raise_value_error():
    with pytest.raises(ValueError, match="BucketPlan"):
        exports.to_nemo(object())
    with pytest.raises(ValueError, match="2 buckets but 1 batch sizes"):
        exports.to_tf_data(StandInPlan(edges=[0, 5, 9], batch_sizes=[8]))
    with pytest.raises(ValueError, match="strictly increasing"):
        exports.to_lhotse(StandInPlan(edges=[0, 9, 5], batch_sizes=[8, 8]))


def test_real_bucket_plan_exports():
    plan = _real_plan()
    if plan is None:
        pytest.skip("analysis.optimize_edges not available yet")
    data = json.loads(exports.to_json(plan))
    for key in ("edges", "batch_sizes", "efficiency", "padded_tokens", "useful_tokens", "method"):
        assert key in data
    assert data["edges"] == list(plan.edges)
    lengths = np.arange(plan.edges[0] + 1, plan.edges[-1] + 1)
    bounds = exports.to_tf_data(plan)["bucket_boundaries"]
    assert [bisect.bisect_right(bounds, int(n)) for n in lengths] == \
        bucket_index(lengths, plan.edges).tolist()
