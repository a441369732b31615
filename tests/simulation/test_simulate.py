"""Simulation: Monte Carlo against the exact expectation, metrics against hand computations."""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import BatchRule, LengthHistogram, compare_strategies, simulate
from analysis.padding.waste import expected_padding, sorted_padding
from analysis.simulation.strategies import STRATEGIES, TOKEN_STRATEGIES, build_epoch, epoch_builder


def _rule(strategy: str, batch_size: int, max_tokens: int) -> dict[str, int]:
    return {"max_tokens": max_tokens} if strategy in TOKEN_STRATEGIES else {"batch_size": batch_size}


def _random_hist(seed: int) -> LengthHistogram:
    """A seeded random histogram: a lognormal body plus a few heavy lengths."""
    rng = np.random.default_rng(seed)
    body = np.clip(rng.lognormal(4.0, 0.7, size=int(rng.integers(800, 2500))), 1, 600).astype(int)
    return LengthHistogram.from_lengths(np.concatenate([body, rng.integers(300, 601, size=20)]))


def _mean_and_se(x: np.ndarray) -> tuple[float, float]:
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))


# ------------------------------------------------------------------ against the exact model
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bucketed_monte_carlo_matches_expected_padding(seed):
    hist = _random_hist(seed)
    edges = [0, int(hist.quantile(0.3)), int(hist.quantile(0.7)), hist.max]
    batch_size = int(np.random.default_rng(seed).integers(3, 17))
    res = simulate(
        hist,
        "bucketed",
        rng=np.random.default_rng(seed),
        epochs=40,
        edges=edges,
        batch_size=batch_size,
        pad_to_multiple_of=1 + seed * 3,
    )
    est = expected_padding(
        hist, edges, rule=BatchRule(batch_size=batch_size, pad_to_multiple_of=1 + seed * 3)
    )
    padded_mean, padded_se = _mean_and_se(res.epochs["padded_tokens"].to_numpy(float))
    assert abs(padded_mean - est.padded_tokens) <= 4 * padded_se
    eff_mean, eff_se = _mean_and_se(res.epochs["efficiency"].to_numpy())
    assert abs(eff_mean - est.efficiency) <= 4 * eff_se
    assert (res.epochs["useful_tokens"] == est.useful_tokens).all()
    assert (res.epochs["batches"] == est.n_batches).all()


def test_bucketed_with_max_tokens_matches_expected_padding():
    hist = _random_hist(3)
    edges = [0, 60, 150, hist.max]
    res = simulate(hist, "bucketed", rng=np.random.default_rng(3), epochs=40, edges=edges, max_tokens=1500)
    est = expected_padding(hist, edges, rule=BatchRule(max_tokens=1500))
    mean, se = _mean_and_se(res.epochs["padded_tokens"].to_numpy(float))
    assert abs(mean - est.padded_tokens) <= 4 * se


def test_one_bucket_bucketed_equals_random_in_distribution():
    hist = _random_hist(4)
    one = [0, hist.max]
    a = simulate(hist, "bucketed", rng=np.random.default_rng(10), epochs=40, edges=one, batch_size=8)
    b = simulate(hist, "random", rng=np.random.default_rng(11), epochs=40, batch_size=8)
    (ma, sa), (mb, sb) = (_mean_and_se(r.epochs["efficiency"].to_numpy()) for r in (a, b))
    assert abs(ma - mb) <= 4 * math.hypot(sa, sb)
    expected = expected_padding(hist, one, rule=BatchRule(batch_size=8)).efficiency
    assert abs(mb - expected) <= 4 * sb


def test_sorted_efficiency_equals_direct_computation():
    hist = _random_hist(5)
    s = hist.expand()
    padded = sum(len(c) * int(c.max()) for c in np.split(s, range(6, s.size, 6)))
    res = simulate(hist, "sorted", rng=np.random.default_rng(0), epochs=3, batch_size=6)
    assert res.padded_tokens == 3 * padded
    assert res.epochs["efficiency"].tolist() == [hist.total_tokens / padded] * 3
    assert sorted_padding(hist, rule=BatchRule(batch_size=6)).padded_tokens == padded


# ------------------------------------------------------------------ the batches table
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("world_size", [1, 3])
def test_batches_table_is_consistent(strategy, world_size):
    lengths = np.random.default_rng(1).integers(1, 200, size=500)
    res = simulate(
        lengths,
        strategy,
        rng=np.random.default_rng(2),
        epochs=2,
        world_size=world_size,
        edges=[0, 50, 120, 199],
        pad_to_multiple_of=8,
        **_rule(strategy, 7, 1600),
    )
    frame = res.batches
    assert list(frame.columns) == [
        "epoch",
        "step",
        "rank",
        "bucket",
        "size",
        "longest",
        "useful",
        "padded",
        "square_sum",
    ]
    assert (frame.dtypes == np.int64).all()
    repeats = strategy == "bucketed" and world_size > 1  # steps completed (analysis.sampler)
    for epoch, part in frame.groupby("epoch"):
        if repeats:
            assert part["size"].sum() > 500 and len(part) % world_size == 0
            assert (part.groupby("step")["bucket"].nunique() == 1).all()  # sync_buckets
        else:
            assert part["size"].sum() == 500
            assert part["useful"].sum() == int(lengths.sum())
        position = np.arange(len(part))
        np.testing.assert_array_equal(part["rank"], position % world_size)
        np.testing.assert_array_equal(part["step"], position // world_size)
        assert res.epochs.loc[epoch, "steps"] == -(-len(part) // world_size)
    if strategy == "packing":
        assert (frame["padded"] == 1600).all() and (frame["useful"] <= 1600).all()
    else:
        np.testing.assert_array_equal(frame["padded"], frame["size"] * (-(-frame["longest"] // 8) * 8))
    assert ("straggler_factor" in res.epochs.columns) == (world_size > 1)
    assert isinstance(res.useful_tokens, int) and isinstance(res.padded_tokens, int)
    assert res.useful_tokens == int(frame["useful"].sum())
    assert repeats or res.useful_tokens == 2 * int(lengths.sum())
    assert res.padded_tokens == int(frame["padded"].sum())
    assert res.efficiency == pytest.approx(res.useful_tokens / res.padded_tokens)


# ------------------------------------------------------------------ against the previous code
FINGERPRINTS = Path(__file__).parents[1] / "data" / "simulate_fingerprints.json"


def _fingerprints() -> dict[str, dict[str, Any]]:
    """Per strategy and setup: a sha256 of the integers of two epochs' batches
    (``epoch_builder``) and of a 3-epoch ``simulate`` (its batches table and the integer epoch
    metrics), and the float epoch metrics themselves (compared with a tolerance: their last
    bits depend on the NumPy/BLAS build).  ``tests/data/simulate_fingerprints.json`` holds them
    as computed by 53a1c2e, whose hashes of the same epochs and metrics (floats by their exact
    repr) were those of 08835f2, the code before the simulator's speed work; regenerate (only for an
    intended change of the epochs or metrics) with ``PYTHONPATH=. python tests/simulation/test_simulate.py
    --write``."""
    lengths = np.clip(np.random.default_rng(2024).lognormal(5.0, 1.0, size=6000), 1, 4000).astype(np.int64)
    edges = [0, 90, 200, 450, 1000, 4000]
    setups = [
        (1, True, 1, {"batch_size": 8}),
        (3, False, 8, {"max_tokens": 16000}),
        (4, True, 1, {"batch_size": 5}),
    ]
    out = {}
    for strategy in STRATEGIES:
        for world_size, sync, multiple, rule in setups:
            options = dict(edges=edges, world_size=world_size, sync_buckets=sync, **rule)
            digest = hashlib.sha256()
            builder = epoch_builder(lengths, strategy, **options)
            rng = np.random.default_rng(7)
            for _ in range(2):
                ep = builder.epoch(rng)
                for part in (ep.indices, ep.offsets, ep.buckets):
                    digest.update(np.ascontiguousarray(part, dtype=np.int64).tobytes())
            data = LengthHistogram.from_lengths(lengths) if strategy == "bucketed" and sync else lengths
            res = simulate(
                data, strategy, rng=np.random.default_rng(7), epochs=3, pad_to_multiple_of=multiple, **options
            )
            digest.update(res.batches.drop(columns="square_sum").to_numpy(dtype=np.int64).tobytes())
            table = res.epochs.reset_index()
            integers = [c for c in table.columns if table[c].dtype.kind in "iu"]
            # mixing came after the fingerprints (tests/padding/test_mixing.py checks it)
            floats = [c for c in table.columns if c not in integers and not c.startswith("mixing")]
            digest.update(json.dumps(integers).encode())
            digest.update(table[integers].to_numpy(dtype=np.int64).tobytes())
            out[f"{strategy} world_size={world_size} sync={sync} multiple={multiple} {rule}"] = {
                "integers": digest.hexdigest(),
                "floats": {c: table[c].astype(float).tolist() for c in floats},
            }
    return out


def test_epochs_and_metrics_are_the_previous_implementations():
    """Every batch and integer metric bit for bit; the float metrics to 1e-12 (relative)."""
    got, want = _fingerprints(), json.loads(FINGERPRINTS.read_text())
    assert sorted(got) == sorted(want)
    for key, expected in want.items():
        assert got[key]["integers"] == expected["integers"], key
        assert sorted(got[key]["floats"]) == sorted(expected["floats"]), key
        for column, values in expected["floats"].items():
            np.testing.assert_allclose(
                got[key]["floats"][column],
                values,
                rtol=1e-12,
                atol=0,
                equal_nan=True,
                err_msg=f"{key} {column}",
            )


def _splitmix64(value: int) -> int:
    """SplitMix64's finaliser on a Python int (the documented batch-hash mix)."""
    mask = (1 << 64) - 1
    z = (value + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), m=st.integers(1, 60), block=st.sampled_from([1, 4, 16, 1 << 14]))
def test_batch_sums_match_the_loop(seed, m, block):
    """The per-batch sums computed block by block against one Python step per sample."""
    import analysis.simulation.metrics as epoch_metrics

    gen = np.random.default_rng(seed)
    sizes = gen.integers(1, 12, size=m)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    indices = gen.permutation(int(offsets[-1]) + 7)[: int(offsets[-1])].astype(np.int64)
    lengths = gen.integers(1, 5000, size=int(offsets[-1]) + 7)
    saved, epoch_metrics._BLOCK = epoch_metrics._BLOCK, block
    try:
        longest, useful, squares, mixed = epoch_metrics._batch_sums(
            lengths.astype(np.uint16), indices, offsets, True
        )
    finally:
        epoch_metrics._BLOCK = saved
    batches = [indices[a:b].tolist() for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    L = lengths.tolist()
    assert longest.tolist() == [max(L[i] for i in b) for b in batches]
    assert useful.tolist() == [sum(L[i] for i in b) for b in batches]
    assert squares is not None and squares.tolist() == [sum(L[i] ** 2 for i in b) for b in batches]
    expected = [sum(_splitmix64(i) for i in b) % 2**64 for b in batches]
    assert mixed.tolist() == expected


def test_packing_efficiency_is_tokens_over_bins_times_budget():
    lengths = np.random.default_rng(3).integers(1, 100, size=300)
    res = simulate(lengths, "packing", rng=np.random.default_rng(0), max_tokens=256)
    bins = int(res.epochs.loc[1, "batches"])
    assert res.epochs.loc[1, "efficiency"] == int(lengths.sum()) / (bins * 256)


def test_same_seed_same_simulation():
    lengths = np.random.default_rng(4).integers(1, 300, size=400)
    kw = dict(epochs=2, edges=[0, 100, 299], batch_size=4, world_size=2)
    a = simulate(lengths, "bucketed", rng=np.random.default_rng(9), **kw)
    b = simulate(lengths, "bucketed", rng=np.random.default_rng(9), **kw)
    pd.testing.assert_frame_equal(a.batches, b.batches)
    pd.testing.assert_frame_equal(a.epochs, b.epochs)


# ------------------------------------------------------------------ metrics by hand
def test_metrics_on_a_hand_example():
    res = simulate(
        [1, 2, 3, 4, 5, 6], "sorted", rng=np.random.default_rng(0), epochs=2, batch_size=2, world_size=2
    )
    row = res.epochs.loc[1]
    # batches {1,2} {3,4} {5,6}: std 0.5 each, means 1.5, 3.5, 5.5
    assert row["within_batch_cv"] == pytest.approx((1 / 3 + 1 / 7 + 1 / 11) / 3)
    assert row["efficiency"] == 21 / 24 and row["waste_tokens"] == 3
    assert row["steps"] == 2
    assert res.epochs["composition_repeat"].tolist() == [0.0, 1.0]
    # steps: two batches, then one batch alone (a lone rank is its own mean)
    padded = res.batches.loc[res.batches["epoch"] == 1, "padded"].tolist()
    first = max(padded[:2]) / (sum(padded[:2]) / 2)
    assert row["straggler_factor"] == pytest.approx((first + 1) / 2)
    useful = res.batches.loc[res.batches["epoch"] == 1, "useful"].tolist()
    per_step = [useful[0] + useful[1], useful[2]]
    assert row["tokens_per_step_mean"] == pytest.approx(10.5)
    assert row["tokens_per_step_cv"] == pytest.approx(statistics.pstdev(per_step) / 10.5)


def _pearson(x: list[float], y: list[float]) -> float:
    mx, my = statistics.fmean(x), statistics.fmean(y)
    num = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=False))
    den = math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))
    return num / den


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_metrics_match_a_direct_computation(strategy):
    """Rebuild the same epochs from the same seed and recompute every metric in pure Python."""
    lengths = np.random.default_rng(5).integers(1, 120, size=160)
    world_size, multiple, epochs = 3, 4, 3
    rule = _rule(strategy, 6, 480)
    edges = [0, 40, 80, 119]
    res = simulate(
        lengths,
        strategy,
        rng=np.random.default_rng(6),
        epochs=epochs,
        edges=edges,
        world_size=world_size,
        pad_to_multiple_of=multiple,
        **rule,
    )
    given = BatchRule(**rule, pad_to_multiple_of=multiple)  # token_budget fills by padded length
    builder = epoch_builder(lengths, strategy, given, edges=edges, world_size=world_size)
    assert builder.rule == given
    rng = np.random.default_rng(6)
    seen: set[frozenset[int]] = set()
    L = lengths.tolist()
    for e in range(1, epochs + 1):
        batches = [b.tolist() for b in builder.epoch(rng).batches()]
        row = res.epochs.loc[e]
        sizes = [len(b) for b in batches]
        useful = [sum(L[i] for i in b) for b in batches]
        if strategy == "packing":
            padded = [480] * len(batches)
        else:
            padded = [len(b) * (-(-max(L[i] for i in b) // multiple) * multiple) for b in batches]
        assert row["padded_tokens"] == sum(padded) and row["useful_tokens"] == sum(useful)
        cvs = [statistics.pstdev([L[i] for i in b]) / statistics.fmean([L[i] for i in b]) for b in batches]
        assert row["within_batch_cv"] == pytest.approx(statistics.fmean(cvs), rel=1e-12)
        # per optimizer step: world_size consecutive batches together
        steps = range(0, len(batches), world_size)
        means = [sum(useful[t : t + world_size]) / sum(sizes[t : t + world_size]) for t in steps]
        assert row["lag1_autocorr"] == pytest.approx(_pearson(means[:-1], means[1:]), rel=1e-9)
        sets = [frozenset(b) for b in batches]
        repeat = sum(s in seen for s in sets) / len(sets) if e > 1 else 0.0
        assert row["composition_repeat"] == pytest.approx(repeat)
        seen |= set(sets)
        steps = [range(i, min(i + world_size, len(batches))) for i in range(0, len(batches), world_size)]
        per_step = [sum(useful[j] for j in s) for s in steps]
        assert row["steps"] == len(steps)
        assert row["tokens_per_step_mean"] == pytest.approx(statistics.fmean(per_step))
        assert row["tokens_per_step_cv"] == pytest.approx(
            statistics.pstdev(per_step) / statistics.fmean(per_step)
        )
        straggler = statistics.fmean(
            max(padded[j] for j in s) / statistics.fmean(padded[j] for j in s) for s in steps
        )
        assert row["straggler_factor"] == pytest.approx(straggler)
    if strategy == "sorted":
        assert res.epochs["composition_repeat"].tolist() == [0.0, 1.0, 1.0]


def test_random_has_no_repeats_and_sorted_no_spread():
    lengths = np.random.default_rng(7).integers(1, 1000, size=5000)
    r = simulate(lengths, "random", rng=np.random.default_rng(0), epochs=3, batch_size=8)
    s = simulate(lengths, "sorted", rng=np.random.default_rng(0), epochs=3, batch_size=8)
    assert r.epochs["composition_repeat"].max() < 0.01
    assert abs(r.epochs["lag1_autocorr"]).max() < 0.1
    assert s.epochs["within_batch_cv"].max() < 0.01 < r.epochs["within_batch_cv"].min()


def test_lag1_autocorr_is_nan_when_undefined():
    res = simulate([5, 5, 5, 5], "random", rng=np.random.default_rng(0), batch_size=1)
    assert math.isnan(res.epochs.loc[1, "lag1_autocorr"])
    res = simulate([5, 6], "random", rng=np.random.default_rng(0), batch_size=1)
    assert math.isnan(res.epochs.loc[1, "lag1_autocorr"])


def test_summary_and_to_frame():
    res = simulate([3, 1, 2, 8], "sorted", rng=np.random.default_rng(0), epochs=2, batch_size=2)
    summary = res.summary()
    assert summary["strategy"] == "sorted" and summary["epochs"] == 2
    assert summary["efficiency"] == pytest.approx(14 / 20)  # {1,2} pads to 4, {3,8} to 16
    assert summary["useful_tokens"] == 28 and summary["padded_tokens"] == 40
    assert summary["composition_repeat"] == 1.0  # epochs after the first
    one = simulate([3, 1, 2, 8], "sorted", rng=np.random.default_rng(0), batch_size=2)
    assert math.isnan(one.summary()["composition_repeat"])
    pd.testing.assert_frame_equal(res.to_frame(), res.epochs)


# ------------------------------------------------------------------ compare_strategies
def test_compare_strategies_table():
    hist = _random_hist(6)
    edges = [0, 50, 120, hist.max]
    table = compare_strategies(
        hist, rng=np.random.default_rng(0), edges=edges, epochs=2, batch_size=8, world_size=2
    )
    assert table.index.tolist() == list(STRATEGIES)
    assert table.loc["packing", "batch_rule"] == f"max_tokens {8 * hist.max:,}"
    assert table.loc["token_budget", "batch_rule"] == f"max_tokens {8 * hist.max:,}"
    assert table.loc["sorted", "batch_rule"] == "batch_size 8"
    assert table.loc["bucketed", "batch_rule"] == "batch_size 8"
    assert table.loc["sorted", "efficiency"] == pytest.approx(table.loc["sorted", "expected_efficiency"])
    exact = expected_padding(hist, edges, rule=BatchRule(batch_size=8)).efficiency
    assert table.loc["bucketed", "expected_efficiency"] == exact
    assert table.loc["bucketed", "efficiency"] == pytest.approx(exact, abs=0.03)
    assert (
        table.loc["random", "expected_efficiency"]
        == expected_padding(hist, [0, hist.max], rule=BatchRule(batch_size=8)).efficiency
    )
    no_exact = ["length_grouped", "token_budget", "packing"]
    assert table[["expected_efficiency"]].loc[no_exact].isna().all().all()
    assert "straggler_factor" in table.columns
    assert table.loc["sorted", "composition_repeat"] == 1.0
    assert table.loc["packing", "efficiency"] > table.loc["random", "efficiency"]


def test_compare_strategies_with_max_tokens_only():
    lengths = np.random.default_rng(8).integers(1, 100, size=300)
    table = compare_strategies(
        lengths,
        rng=np.random.default_rng(0),
        edges=[0, 50, 99],
        max_tokens=400,
        strategies=["random", "bucketed", "token_budget"],
    )
    # random takes the one batch size that fits the longest sample; the others the budget
    assert table["batch_rule"].tolist() == ["batch_size 4", "max_tokens 400", "max_tokens 400"]
    assert (
        table.loc["random", "expected_efficiency"]
        == expected_padding(lengths, [0, 99], rule=BatchRule(batch_size=400 // 99)).efficiency
    )
    assert (
        table.loc["bucketed", "expected_efficiency"]
        == expected_padding(lengths, [0, 50, 99], rule=BatchRule(batch_size=None, max_tokens=400)).efficiency
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(strategies=["fast"]), "unknown strategy 'fast'"),
        (dict(batch_size=None), "got neither"),
        (dict(max_tokens=10), "got both"),
        (dict(rule=BatchRule(batch_size=2)), "not both"),
        (dict(edges=[0, 2]), "do not cover"),
        (dict(batch_size=0), "batch_size must be a positive integer"),
    ],
)
def test_compare_strategies_bad_input(kwargs, message):
    args = dict(rng=np.random.default_rng(0), edges=[0, 5, 9], batch_size=2) | kwargs
    with pytest.raises(ValueError, match=message):
        compare_strategies([1, 4, 9], **args)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(epochs=0), "epochs must be a positive integer"),
        (dict(world_size=0), "world_size must be a positive integer"),
        (dict(pad_to_multiple_of=0), "pad_to_multiple_of must be a positive integer"),
        (dict(rng=1), "rng must be a numpy.random.Generator"),
        (dict(batch_size=-1), "batch_size must be a positive integer"),
    ],
)
def test_simulate_bad_input(kwargs, message):
    args = dict(rng=np.random.default_rng(0), batch_size=2) | kwargs
    with pytest.raises(ValueError, match=message):
        simulate([1, 4, 9], "random", **args)


def test_compare_strategies_predicts_throughput_from_a_reference():
    lengths = np.random.default_rng(9).integers(1, 500, size=2000)
    table = compare_strategies(
        lengths,
        rng=np.random.default_rng(0),
        edges=[0, 100, 250, 499],
        batch_size=8,
        strategies=["sorted", "random", "bucketed"],
        reference_strategy="sorted",
        reference_tokens_per_s=32_000,
    )
    assert table.loc["sorted", "predicted_tokens_per_s"] == pytest.approx(32_000)
    ratio = table["efficiency"] / table.loc["sorted", "efficiency"]
    np.testing.assert_allclose(table["predicted_tokens_per_s"], 32_000 * ratio, rtol=1e-12)
    with pytest.raises(ValueError, match="not among the strategies"):
        compare_strategies(
            lengths,
            rng=np.random.default_rng(0),
            edges=[0, 499],
            batch_size=8,
            strategies=["random"],
            reference_strategy="sorted",
            reference_tokens_per_s=1.0,
        )
    with pytest.raises(ValueError, match="give both"):
        compare_strategies(
            lengths, rng=np.random.default_rng(0), edges=[0, 499], batch_size=8, reference_strategy="sorted"
        )


def test_by_bucket_matches_expected_padding_per_bucket():
    hist = _random_hist(7)
    edges = [0, 40, 90, hist.max]
    res = simulate(hist, "bucketed", rng=np.random.default_rng(1), epochs=30, edges=edges, batch_size=8)
    table = res.by_bucket()
    est = expected_padding(hist, edges, rule=BatchRule(batch_size=8)).to_frame()
    np.testing.assert_array_equal(table["batches"], est["batches"])
    np.testing.assert_array_equal(table["useful_tokens"], est["tokens"])
    per_epoch = res.batches.groupby(["bucket", "epoch"])["padded"].sum().unstack()
    se = per_epoch.std(axis=1, ddof=1) / math.sqrt(30)
    assert (abs(table["padded_tokens"] - est["padded_tokens"]) <= 4 * se + 1e-9).all()


def test_strategy_figures_are_built():
    from matplotlib.figure import Figure

    from analysis.plots import plot_padded_per_step, plot_randomness, plot_strategy_bars

    lengths = np.random.default_rng(10).integers(1, 300, size=600)
    table = compare_strategies(
        lengths,
        rng=np.random.default_rng(0),
        edges=[0, 100, 299],
        batch_size=4,
        epochs=2,
        reference_strategy="sorted",
        reference_tokens_per_s=1000,
    )
    bars = plot_strategy_bars(table)
    assert isinstance(bars, Figure) and len(bars.axes) == 3
    randomness = plot_randomness(table)
    assert len(randomness.axes) == 3 and isinstance(randomness, Figure)
    assert randomness.axes[0].get_xlabel().startswith("spread")  # the CV is "spread", never "mixing"
    results = {
        s: simulate(lengths, s, rng=np.random.default_rng(0), batch_size=4, edges=[0, 100, 299])
        for s in ("sorted", "bucketed")
    }
    assert len(plot_padded_per_step(results, steps=50).axes) == 2
    with pytest.raises(ValueError, match="none of the requested columns"):
        plot_strategy_bars(table, columns=["nope"])


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    FINGERPRINTS.parent.mkdir(exist_ok=True)
    FINGERPRINTS.write_text(json.dumps(_fingerprints(), indent=1, sort_keys=True) + "\n")


def test_batches_square_sum_is_the_sum_of_squared_lengths():
    lengths = np.random.default_rng(4).integers(1, 300, size=400)
    epoch = build_epoch(lengths, "packing_bfd", rng=np.random.default_rng(9), max_tokens=1000)
    res = simulate(lengths, "packing_bfd", rng=np.random.default_rng(9), max_tokens=1000)
    want = sorted(int((lengths[b].astype(np.int64) ** 2).sum()) for b in epoch.batches())
    assert sorted(res.batches["square_sum"].tolist()) == want
