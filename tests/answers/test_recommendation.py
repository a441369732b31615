"""The recommendation (analysis.recommend) and edge-set comparison, against brute force over
every shuffle and the gain rule written out."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from analysis import (
    METHODS,
    BatchRule,
    LengthHistogram,
    Recommendation,
    StepTimeModel,
    case_plans,
    evaluate_edges,
    optimize_edges,
    predict_strategy_throughput,
    recommend,
    sweep_bucket_counts,
    sweep_throughput,
)
from analysis.answers.recommendation import compare_edge_sets, recommend_for_time
from analysis.batching import cover_edges
from analysis.case import CASE_EDGES, CASE_GEOMETRIC_EDGES

SAMPLES = [1, 2, 3, 4, 50, 60, 70, 80]
HIST = LengthHistogram.from_lengths(SAMPLES)


def shuffled_padding(samples: list[int], batch_size: int) -> Fraction:
    """Expected padded tokens over every ordering, batches cut in order."""
    total, count = Fraction(0), 0
    for order in itertools.permutations(samples):
        total += sum(
            len(order[i : i + batch_size]) * max(order[i : i + batch_size])
            for i in range(0, len(order), batch_size)
        )
        count += 1
    return total / count


def sorted_padding_by_hand(samples: list[int], batch_size: int) -> int:
    s = sorted(samples)
    return sum(len(s[i : i + batch_size]) * max(s[i : i + batch_size]) for i in range(0, len(s), batch_size))


def test_recommend_is_exact_for_each_strategy():
    rec = recommend(HIST, n_buckets=2, batch_size=2)
    assert isinstance(rec, Recommendation) and rec.rule == BatchRule(batch_size=2)
    assert rec.plan.edges == [0, 4, 80] and rec.plan.n_buckets == 2
    s = rec.strategies
    assert list(s) == ["random", "sorted", "bucketed"]
    assert s["random"].padded_tokens == pytest.approx(float(shuffled_padding(SAMPLES, 2)), rel=1e-12)
    assert s["sorted"].padded_tokens == sorted_padding_by_hand(SAMPLES, 2) == 292
    bucketed = shuffled_padding([1, 2, 3, 4], 2) + shuffled_padding([50, 60, 70, 80], 2)
    assert s["bucketed"].padded_tokens == pytest.approx(float(bucketed), rel=1e-12)
    assert rec.plan.efficiency == pytest.approx(float(270 / bucketed), rel=1e-12)
    table = rec.strategy_table()
    assert table.index.tolist() == ["random", "sorted", "bucketed"]
    assert table.loc["sorted", "efficiency"] == 270 / 292


def test_recommend_suggests_k_by_the_gain_rule():
    for min_gain in (0.0, 0.01, 0.05, 0.2):
        rec = recommend(HIST, n_buckets=2, batch_size=2, min_gain=min_gain)
        by_k = {int(k): e for k, e in rec.to_dict()["optimal_efficiency_by_n_buckets"].items()}
        assert sorted(by_k) == list(range(1, HIST.n_distinct + 1))  # at most 16, the data allow 8
        want = next((k for k in sorted(by_k)[:-1] if by_k[k + 1] - by_k[k] < min_gain), max(by_k))
        assert rec.n_buckets_suggested == want
        assert by_k[2] == pytest.approx(rec.plan.efficiency, rel=1e-12)
        assert all(by_k[k] <= by_k[k + 1] + 1e-12 for k in range(1, max(by_k)))
    assert recommend(HIST, n_buckets=2, batch_size=2, max_buckets=3).sweep["n_buckets"].tolist() == [1, 2, 3]


def test_recommend_predicts_throughput_from_one_reference():
    rec = recommend(HIST, n_buckets=2, max_tokens=160, pad_to_multiple_of=4)
    rates = rec.predicted_tokens_per_s(12_000, "random")
    eff = {name: est.efficiency for name, est in rec.strategies.items()}
    assert rates["random"] == pytest.approx(12_000)
    # same useful tokens: the rate scales inversely with padded tokens
    padded = {name: est.padded_tokens for name, est in rec.strategies.items()}
    assert rates["bucketed"] == pytest.approx(12_000 * padded["random"] / padded["bucketed"], rel=1e-12)
    assert rates["sorted"] == pytest.approx(12_000 * eff["sorted"] / eff["random"], rel=1e-12)
    with pytest.raises(ValueError, match="not one of"):
        rec.predicted_tokens_per_s(1.0, "magic")


def test_to_dict_is_json_ready():
    rec = recommend(HIST, n_buckets=3, max_tokens=160)
    d = rec.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert set(d) == {
        "n_buckets",
        "plan",
        "strategies",
        "optimal_efficiency_by_n_buckets",
        "optimal_budget_fill_by_n_buckets",
        "n_buckets_suggested",
        "min_gain",
    }
    assert d["plan"]["max_tokens"] == 160 and d["plan"]["batch_sizes"] == [
        160 // e for e in d["plan"]["edges"][1:]
    ]
    assert list(d["strategies"]) == ["random", "sorted", "bucketed"]
    assert d["strategies"]["sorted"]["batch_sizes"] == [2]  # 160 // 80, one size for the epoch
    assert all(isinstance(k, str) for k in d["optimal_efficiency_by_n_buckets"])


def test_compare_edge_sets_on_the_same_rule():
    optimum = optimize_edges(HIST, 2, batch_size=2)
    other_rule = optimize_edges(HIST, 2, max_tokens=100)
    plans = compare_edge_sets(HIST, {"optimum": optimum, "one": (0, 80), "other": other_rule}, batch_size=2)
    assert list(plans) == ["optimum", "one", "other"]
    assert plans["optimum"] is optimum
    assert plans["one"].method == "given" and plans["one"].edges == [0, 80]
    assert plans["one"].padded_tokens == pytest.approx(float(shuffled_padding(SAMPLES, 2)), rel=1e-12)
    # a plan made for another rule is re-evaluated under this one, keeping its edges
    assert plans["other"].rule == BatchRule(batch_size=2) and plans["other"].batch_sizes == [2, 2]
    assert plans["other"].edges == other_rule.edges and plans["other"].method == "optimal"
    with pytest.raises(ValueError, match="below the longest length 80"):
        compare_edge_sets(HIST, {"short": [0, 70]}, batch_size=2)


def test_recommend_holds_the_sweep_of_every_method_asked():
    """The frame notebook 03 draws: the same as a separate sweep, and the same optimum and K."""
    ks = range(1, HIST.n_distinct + 1)
    rec = recommend(HIST, n_buckets=2, batch_size=2, methods=METHODS)
    assert rec.sweep.equals(sweep_bucket_counts(HIST, ks, rule=BatchRule(batch_size=2)))
    only = recommend(HIST, n_buckets=2, batch_size=2)
    assert list(only.sweep["method"].unique()) == ["optimal"]
    optimal = rec.sweep[rec.sweep["method"] == "optimal"].reset_index(drop=True)
    assert optimal.equals(only.sweep)
    assert rec.n_buckets_suggested == only.n_buckets_suggested and rec.to_dict() == only.to_dict()
    with pytest.raises(ValueError, match="must include 'optimal'"):
        recommend(HIST, n_buckets=2, batch_size=2, methods=["geometric"])


def test_case_plans_are_the_published_edges_covered_and_evaluated():
    hist = LengthHistogram.from_lengths([65, 100, 900, 1500, 2000, 3000, 5000, 9000])
    rule = BatchRule(batch_size=2)
    plans = case_plans(hist, rule)
    assert list(plans) == ["case: published (greedy)", "case: geometric start"]
    for plan, edges in zip(plans.values(), (CASE_EDGES, CASE_GEOMETRIC_EDGES), strict=True):
        want = evaluate_edges(hist, cover_edges(edges, hist), rule)
        assert plan.edges == want.edges and plan.edges[-1] == 9000 and plan.method == "given"
        assert plan.padded_tokens == want.padded_tokens and plan.rule == rule
    assert (
        case_plans(hist, batch_size=2)["case: geometric start"].edges == plans["case: geometric start"].edges
    )


def test_recommend_for_time_is_notebook_04s_calls_and_its_json_is_theirs():
    """One call, the three engine calls notebook 04 made (the same rng drawn from first), and a
    JSON record of them with an undefined standard error (one epoch) as null."""
    hist = LengthHistogram.from_lengths(np.random.default_rng(2).integers(10, 600, size=400))
    model = StepTimeModel(per_step=0.05, per_token=1e-5, attention=1e-8)
    rule = BatchRule(max_tokens=2_048)
    rec = recommend_for_time(hist, model, 3, rule, rng=np.random.default_rng(7), epochs=1, max_buckets=4)
    plan = optimize_edges(hist, 3, rule, step_time=model)
    table = predict_strategy_throughput(
        hist, model, rule, edges=plan.edges, rng=np.random.default_rng(7), epochs=1
    )
    sweep = sweep_throughput(hist, model, range(1, 5), rule)
    assert rec.plan.edges == plan.edges
    pd.testing.assert_frame_equal(rec.strategies, table)
    pd.testing.assert_frame_equal(rec.sweep, sweep)
    assert rec.at_k().loc["time", "edges"] == plan.edges
    record = json.loads(json.dumps(rec.to_dict(), allow_nan=False))
    assert record["model"]["coefficients"] == {
        "per_step": 0.05,
        "per_sample": 0.0,
        "per_token": 1e-5,
        "attention": 1e-8,
        "working_set": 0.0,
    }
    assert record["model"]["rms_relative_residual"] is None  # not fitted
    assert record["strategies"]["token_budget"]["tokens_per_s_se"] is None  # one simulated epoch
    assert record["strategies"]["sorted"]["tokens_per_s_se"] == 0.0  # exact
    assert record["strategies"]["bucketed"]["batch_rule"] == "max_tokens 2,048"
    for name, row in table.iterrows():
        assert record["strategies"][name]["tokens_per_s"] == row["tokens_per_s"]
    time, padding = (record["edges_by_objective"][k] for k in ("time", "padding"))
    assert padding["edges"] == optimize_edges(hist, 3, rule, objective="padding").edges
    assert time["seconds"] <= padding["seconds"]  # the time objective's optimum
    assert record["time_gain"] == pytest.approx(time["tokens_per_s"] / padding["tokens_per_s"] - 1)
    # reproducible: the same seed gives the same record
    again = recommend_for_time(hist, model, 3, rule, rng=np.random.default_rng(7), epochs=1, max_buckets=4)
    assert json.loads(json.dumps(again.to_dict(), allow_nan=False)) == record
