"""Numbers that cannot lie at any scale: the optimiser for every batch rule, exact
waste, hard limits with one-line errors, memory bounded by the histogram."""

from __future__ import annotations

import itertools
import json
import math
import os
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis import LengthHistogram, load_lengths
from analysis.batching import MAX_RULE_VALUE, BatchRule
from analysis.cli import main
from analysis.optimize import evaluate_edges, optimize_edges
from analysis.padding.waste import expected_padding, expected_strategies, sorted_padding
from analysis.simulation.epochs import (
    SIMULATION_SAMPLE_LIMIT,
    SIMULATION_SUBSAMPLE,
    compare_strategies,
    simulate,
)


def _exhaustive_best(hist: LengthHistogram, k: int, **rule: int) -> float:
    """Least objective over every edge set of ``k`` buckets (brute force)."""
    inner = hist.lengths[:-1].tolist()
    best = math.inf
    for cut in itertools.combinations(inner, k - 1):
        plan = evaluate_edges(hist, [0, *cut, hist.max], **rule)
        best = min(best, plan.objective)
    return best


def _exact_padded(lengths: list[int], counts: list[int], batch_size: int) -> Fraction:
    """Expected padded tokens of one shuffled bucket with math.comb (the model, exactly)."""
    n = sum(counts)
    cum = list(itertools.accumulate(counts))

    def e_max(s: int) -> Fraction:
        total = Fraction(lengths[0])
        for j in range(len(lengths) - 1):
            f = Fraction(math.comb(cum[j], s), math.comb(n, s))
            total += (lengths[j + 1] - lengths[j]) * (1 - f)
        return total

    full, rest = divmod(n, batch_size)
    out = full * batch_size * e_max(batch_size) if full else Fraction(0)
    return out + (rest * e_max(rest) if rest else 0)


# ------------------------------------------------------------- 1. optimiser, every batch rule
def test_batch_size_beyond_a_bucket_is_one_short_batch():
    hist = LengthHistogram.from_lengths(np.arange(1, 1101))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = optimize_edges(hist, 2, batch_size=1000)
    assert plan.edges == [0, 550, 1100]
    assert plan.objective == pytest.approx(_exhaustive_best(hist, 2, batch_size=1000), rel=1e-12)


def test_batch_size_past_the_sample_count_is_fast_and_exact():
    hist = LengthHistogram.from_lengths(np.arange(1, 101))
    plan = optimize_edges(hist, 2, batch_size=10**7)  # 39 s before; now no O(B) loop
    # every bucket is one batch padded to its longest: cost n_1 * e_1 + n_2 * 100
    assert plan.edges == [0, 50, 100]
    assert plan.waste_tokens == 50 * 50 + 100 * 50 - sum(range(1, 101))
    assert isinstance(plan.waste_tokens, int)


@pytest.mark.parametrize(
    "rule",
    [
        {"batch_size": 5},
        {"batch_size": 40},
        {"batch_size": 300},
        {"max_tokens": 60},
        {"max_tokens": 2000},
        {"max_tokens": 10**6},
    ],
)
def test_optimiser_equals_exhaustive_search_for_large_batches(rule):
    rng = np.random.default_rng(7)
    hist = LengthHistogram.from_counts(
        np.sort(rng.choice(np.arange(1, 60), 9, replace=False)), rng.integers(1, 40, 9)
    )
    for k in (2, 3):
        plan = optimize_edges(hist, k, candidates=None, **rule)
        assert plan.objective == pytest.approx(_exhaustive_best(hist, k, **rule), rel=1e-9)


def test_token_budget_large_batches_on_the_bundled_data():
    hist = load_lengths("data/case_lengths.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = optimize_edges(hist, 3, max_tokens=10**10)  # B > samples in every bucket
    assert 0 < plan.efficiency <= 1 and len(plan.edges) == 4


# ------------------------------------------------------------- 2. waste never negative, exact
def test_huge_counts_give_the_right_efficiency():
    hist = LengthHistogram.from_counts([5, 7], [2**62, 2**62])
    est = expected_padding(hist, [0, 7], rule=BatchRule(batch_size=1))
    assert est.waste_tokens == 0 and est.efficiency == 1.0 and est.n_batches == 2**63
    est = expected_padding(hist, [0, 7], rule=BatchRule(batch_size=3))  # E[max of 3] = 6.75 vs mean 6
    assert est.efficiency == pytest.approx(6 / 6.75, rel=1e-14)
    assert est.waste_tokens == pytest.approx(0.75 * 2**63, rel=1e-14)


def test_waste_matches_exact_rational_arithmetic():
    lengths, counts = [3, 4, 9, 20], [5, 1, 7, 2]
    hist = LengthHistogram.from_counts(lengths, counts)
    for b in (1, 2, 3, 6, 15, 16):
        est = expected_padding(hist, [0, 20], rule=BatchRule(batch_size=b))
        want = _exact_padded(lengths, counts, b) - hist.total_tokens
        assert est.waste_tokens == pytest.approx(float(want), rel=1e-13, abs=0)


def test_cli_prints_exact_padded_tokens(tmp_path):
    counts = [123_456_789_012, 987_654_321]
    path = tmp_path / "exact.csv"
    with open(path, "w") as fh:
        fh.write("length,count\n" + "".join(f"{v},{c}\n" for v, c in zip([3, 7], counts)))
    hist = load_lengths(path)
    est = expected_padding(hist, [0, 3, 7], rule=BatchRule(batch_size=8))  # a bucket per length: exact
    assert est.padded_tokens == est.useful_tokens == hist.total_tokens
    os.remove(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_random_histograms(data):
    m = data.draw(st.integers(1, 6))
    lengths = sorted(data.draw(st.sets(st.integers(1, 10**9), min_size=m, max_size=m)))
    counts = data.draw(st.lists(st.integers(1, 10**12), min_size=m, max_size=m))
    hist = LengthHistogram.from_counts(lengths, counts)
    if data.draw(st.booleans()):
        rule = BatchRule(batch_size=data.draw(st.integers(1, 10**13)))
    else:
        rule = BatchRule(max_tokens=data.draw(st.integers(1, 10**16)))
    k = data.draw(st.integers(1, m))
    cuts = (
        sorted(data.draw(st.sets(st.sampled_from(lengths[:-1]), min_size=k - 1, max_size=k - 1)))
        if m > 1
        else []
    )
    edges = [0, *cuts, lengths[-1]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = expected_strategies(hist, edges, rule)
        per_length = expected_padding(hist, [0, *lengths], rule)
        plan = optimize_edges(hist, k, rule)
    for est in (*table.values(), per_length, plan.estimate):
        assert est.waste_tokens >= 0 and 0 < est.efficiency <= 1
        assert est.padded_tokens == est.useful_tokens + est.waste_tokens
    # exact integers where the expectation is integral
    assert per_length.waste_tokens == 0 and isinstance(per_length.waste_tokens, int)
    assert isinstance(table["sorted"].waste_tokens, int)
    ones = expected_padding(hist, edges, rule=BatchRule(batch_size=1))
    assert ones.waste_tokens == 0 and ones.efficiency == 1.0
    # the optimum is never worse than a baseline on the same K (objective and padding)
    for method in ("geometric", "equal_count", "equal_tokens"):
        base = optimize_edges(hist, k, rule, method=method)
        if base.n_buckets == k:
            # the DP's float bucket costs decide ties to ~1e-9 relative (cancellation in n*E[max])
            assert plan.objective <= base.objective * (1 + 1e-8)


def test_token_budget_rules_use_the_tightest_edge_and_never_beat_the_optimum():
    """Lengths {1, 2, 3, 4, 6}, one sample each, max_tokens 12, K = 2: Lhotse's equal_tokens
    edge 5 holds the same samples as 4 but divides the budget by 5 (batches of 2, not 3), so
    it scored 19.33 against the optimum's 20.0.  Rules' edges now move down to the longest
    length they hold, and the optimum is the best plan on those edges (exhaustive search)."""
    hist = LengthHistogram.from_counts([1, 2, 3, 4, 6], [1] * 5)
    rule = BatchRule(max_tokens=12)
    base = optimize_edges(hist, 2, rule, method="equal_tokens")
    assert list(base.edges) == [0, 4, 6]
    plan = optimize_edges(hist, 2, rule)
    every = [evaluate_edges(hist, [0, cut, 6], rule).objective for cut in (1, 2, 3, 4)]
    assert plan.objective == pytest.approx(min(every), rel=1e-12)
    assert plan.objective <= base.objective


# ------------------------------------------------------------- 3. limits, clear errors
def test_rule_values_have_a_named_limit():
    with pytest.raises(ValueError, match=r"^batch_size = .* exceeds the limit 2\*\*62"):
        BatchRule(batch_size=10**30)
    with pytest.raises(ValueError, match=r"^max_tokens = .* exceeds the limit 2\*\*62"):
        BatchRule(max_tokens=10**30)
    with pytest.raises(ValueError, match=r"^pad_to_multiple_of = .* exceeds the limit"):
        BatchRule(batch_size=8, pad_to_multiple_of=10**30)
    assert BatchRule(batch_size=MAX_RULE_VALUE).batch_size == 2**62


def test_padding_multiple_never_wraps():
    hist = LengthHistogram.from_lengths([2**62, 2**62 + 1, 5])
    est = sorted_padding(hist, rule=BatchRule(batch_size=2, pad_to_multiple_of=2**61))
    assert est.waste_tokens >= 0 and est.efficiency <= 1
    with pytest.raises(ValueError, match="past the int64 limit"):
        optimize_edges(
            LengthHistogram.from_lengths([2**63 - 2, 5]), 1, batch_size=2, pad_to_multiple_of=2**61
        )


@pytest.mark.parametrize("lengths", [[2**60] * 8 + [3] * 8, [2**63 - 1, 5]])
def test_simulation_refuses_int64_overflow(lengths):
    with pytest.raises(ValueError, match=r"overflows the simulation's int64 totals; clip"):
        simulate(lengths, "random", rng=np.random.default_rng(0), batch_size=8)


def test_simulation_within_int64_stays_exact():
    res = simulate([2**59, 3], "random", rng=np.random.default_rng(0), batch_size=2)
    assert res.useful_tokens == 2**59 + 3 and res.padded_tokens == 2**60


# ------------------------------------------------------------- 4. memory bounded by the histogram
def test_simulation_of_a_huge_histogram_uses_a_stated_subsample():
    hist = LengthHistogram.from_counts([10, 20, 40], [10**12, 3 * 10**11, 10**11])
    res = simulate(hist, "random", rng=np.random.default_rng(3), batch_size=4)
    assert res.subsampled and res.n_samples == SIMULATION_SUBSAMPLE
    assert res.population_samples == hist.n_samples > SIMULATION_SAMPLE_LIMIT
    exact = expected_padding(hist, [0, 40], rule=BatchRule(batch_size=4)).efficiency
    assert 0 < res.efficiency_se < 0.01
    assert abs(res.efficiency - exact) < 5 * res.efficiency_se
    table = compare_strategies(
        hist,
        rng=np.random.default_rng(4),
        edges=[0, 10, 40],
        epochs=1,
        batch_size=4,
        strategies=["sorted", "bucketed"],
    )
    assert (table["simulated_samples"] == SIMULATION_SUBSAMPLE).all()
    assert table.attrs["population_samples"] == hist.n_samples


def test_a_subsample_s_counts_are_scaled_to_the_data_s_epoch(capsys, tmp_path):
    """``compare`` on 1.4e12 samples once showed the 1,000,000-sample subsample's batches and
    steps (250,000 at batch size 4); an epoch of the data has ceil(N / 4) batches, exactly, for
    ``sorted`` and ``random``: the table, the CLI table and its JSON say so (within 1e-9)."""
    hist = LengthHistogram.from_counts([10, 20, 40], [10**12, 3 * 10**11, 10**11])
    want = -(-hist.n_samples // 4)
    table = compare_strategies(
        hist,
        rng=np.random.default_rng(4),
        edges=[0, 10, 40],
        epochs=1,
        batch_size=4,
        strategies=["sorted", "random"],
    )
    for name in ("sorted", "random"):
        assert table.loc[name, "batches"] == pytest.approx(want, rel=1e-9)
        assert table.loc[name, "steps"] == pytest.approx(want, rel=1e-9)
    path = tmp_path / "huge.csv"
    path.write_text("length,count\n10,1000000000000\n20,300000000000\n40,100000000000\n")
    assert (
        main(
            [
                "--quiet",
                "compare",
                str(path),
                "--batch-size",
                "4",
                "--epochs",
                "1",
                "--buckets",
                "2",
                "--json",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)["strategies"]
    assert rows["random"]["batches"] == pytest.approx(want, rel=1e-9)
    assert (
        main(["--quiet", "compare", str(path), "--batch-size", "4", "--epochs", "1", "--buckets", "2"]) == 0
    )
    printed = capsys.readouterr().out
    assert f"{want:,}" in printed and "scaled to the data's epoch" in " ".join(printed.split())


def test_small_data_is_simulated_in_full():
    res = simulate([1, 2, 3], "random", rng=np.random.default_rng(0), batch_size=2)
    assert not res.subsampled and res.efficiency_se == 0.0 and res.n_samples == 3


# ------------------------------------------------------------- 5. one-line messages
def _cli_error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Warning" not in err
    return err.splitlines()[-1]  # argparse shows its usage above the one error line


def test_cli_messages_name_flag_file_line_and_limit(capsys, tmp_path):
    err = _cli_error(capsys, ["optimize", "data/case_lengths.csv", "--batch-size", str(10**30)])
    assert "--batch-size" in err and "2**62" in err
    err = _cli_error(capsys, ["optimize", "data/case_lengths.csv", "--max-tokens", str(10**30)])
    assert "--max-tokens" in err and "2**62" in err
    err = _cli_error(capsys, ["compare", "data/case_lengths.csv", "--edges", "0,8192", "--seed", "-1"])
    assert "--seed" in err
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"length\n5\n\xff\n7\n")
    err = _cli_error(capsys, ["summary", str(bad)])
    assert "line 3" in err and "UTF-8" in err
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("length\n" + "5\n" * 300_000 + "abc\n")
    err = _cli_error(capsys, ["summary", str(mixed)])
    assert "line 300002" in err


def test_loader_messages(tmp_path):
    with pytest.raises(ValueError, match="empty path"):
        load_lengths("")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        load_lengths(fifo)


def test_edges_messages():
    hist = LengthHistogram.from_lengths([1, 5, 9])
    with pytest.raises(ValueError, match="1-D"):
        expected_padding(hist, np.array([[0, 5], [9, 10]]), rule=BatchRule(batch_size=2))
    with pytest.raises(ValueError, match="sequence of integers"):
        expected_padding(hist, None, rule=BatchRule(batch_size=2))


def test_optimiser_exact_when_log_binomials_are_huge():
    """180 M samples of one length and B = 65: log C(x, B) ~ 1,026, and the DP exponentiates
    differences of ~3.6e-7; an lgamma difference once lost that and picked a worse plan."""
    hist = LengthHistogram.from_counts([1, 2, 3, 4, 5], [180_044_282, 1, 1, 1, 1])
    rule = BatchRule(max_tokens=130)
    for k in (2, 3, 4):
        plan = optimize_edges(hist, k, rule)
        best = min(
            (evaluate_edges(hist, [0, *cut, 5], rule) for cut in itertools.combinations([1, 2, 3, 4], k - 1)),
            key=lambda p: p.objective,
        )
        assert plan.objective == pytest.approx(best.objective, rel=1e-12)
