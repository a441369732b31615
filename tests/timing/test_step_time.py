"""Tests for analysis.timing.step_time and optimize_edges(step_time=...): the fit recovers known
coefficients, the exact expected epoch time agrees with simulated epochs, the time-optimal
edges agree with exhaustive search in exact arithmetic, and bad input gets a clear error."""

from __future__ import annotations

import importlib
import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from analysis import (
    BatchRule,
    LengthHistogram,
    StepTimeModel,
    calibration_shapes,
    evaluate_edges,
    measure_step_times,
    optimize_edges,
    predict_strategy_throughput,
    sweep_bucket_counts,
)
from analysis.answers.throughput import simulated_epoch_times, sweep_throughput
from analysis.loaders import load_step_times
from analysis.optimize import _problem as problem
from analysis.padding.order_stats import expected_batch_sum
from analysis.simulation.strategies import ALL_STRATEGIES, PACKED_STRATEGIES
from analysis.timing.epoch import expected_epoch_time
from analysis.timing.step_time import STEP_TIME_TERMS, check_step_times

# the modules (``analysis.optimize._problem`` is also the name of a function there)
kernel = importlib.import_module("analysis.optimize._kernel")

ratio_tables = importlib.import_module("analysis.optimize._ratios")

TRUTH = StepTimeModel(per_step=0.02, per_sample=4e-4, per_token=3e-6, attention=2e-9)


def synthetic_times(
    model: StepTimeModel, shapes, *, repeats: int, noise: float, rng: np.random.Generator
) -> pd.DataFrame:
    """Step times of ``model`` with multiplicative Gaussian noise (relative sd ``noise``)."""
    rows = [(b, n) for _ in range(repeats) for b, n in shapes]
    frame = pd.DataFrame(rows, columns=["batch_size", "length"])
    exact = model.predict(frame["batch_size"], frame["length"])
    frame["seconds"] = exact * (1 + noise * rng.standard_normal(len(frame)))
    return frame


def term_seconds(model: StepTimeModel, batch_size, length) -> np.ndarray:
    """Seconds each term of ``model`` adds to steps of these shapes: one column per term."""
    unit = [StepTimeModel(tile=model.tile, **{t: 1.0}).predict(batch_size, length) for t in STEP_TIME_TERMS]
    return np.stack(unit, axis=-1) * model.coefficients


def assert_coefficients_close(fitted: StepTimeModel, truth: StepTimeModel, shapes, rtol: float) -> None:
    """Every nonzero coefficient within ``rtol`` of the truth; a true zero within an absolute
    tolerance scaled to the coefficients: ``rtol`` of the coefficient at which its term alone
    would add the longest measured step's time (NNLS leaves ~1e-26, not 0, on some BLAS
    builds and CPUs)."""
    b, n = np.array(shapes, dtype=float).T
    unit = term_seconds(StepTimeModel(**dict.fromkeys(STEP_TIME_TERMS, 1.0), tile=truth.tile), b, n)
    atol = rtol * float(np.max(truth.predict(b, n))) / unit.max(axis=0)
    error = np.abs(fitted.coefficients - truth.coefficients)
    bad = error > np.where(truth.coefficients > 0, rtol * truth.coefficients, atol)
    assert not bad.any(), (
        f"coefficients {[t for t, x in zip(STEP_TIME_TERMS, bad, strict=True) if x]}: "
        f"fitted {fitted.coefficients.tolist()}, truth {truth.coefficients.tolist()}"
    )


# ------------------------------------------------------------------------------------- fit
def test_fit_recovers_exact_coefficients_without_noise():
    shapes = [(b, n) for b in (1, 4, 16) for n in (32, 128, 512, 2048)]
    frame = synthetic_times(TRUTH, shapes, repeats=2, noise=0.0, rng=np.random.default_rng(0))
    fitted = StepTimeModel.fit(frame)
    assert_coefficients_close(fitted, TRUTH, shapes, rtol=1e-9)
    assert fitted.rms_relative_residual < 1e-12


@pytest.mark.parametrize("seed", range(5))
def test_fit_recovers_known_coefficients_with_noise(seed):
    """2 % noise per step, 5 repeats, the calibration design of a real histogram.  By
    construction (the truth is a feasible non-negative fit): every coefficient >= 0 and the
    fit's relative residuals no larger than the truth's.  Measured over seeds 0..999 of this
    design (largest seen in brackets): every nonzero coefficient within 20 % (13.4 %), the
    true zero (``working_set``, fitted nonzero for half the seeds) adding at most 10 % (5.9 %)
    of any measured step, the per-shape prediction within 4 % (2.9 %)."""
    rng = np.random.default_rng(seed)
    hist = LengthHistogram.from_lengths(rng.integers(20, 2000, size=500))
    shapes = calibration_shapes(hist, batch_size=16, n_lengths=8)
    frame = synthetic_times(TRUTH, shapes, repeats=5, noise=0.02, rng=rng)
    fitted = StepTimeModel.fit(frame)
    assert (fitted.coefficients >= 0).all()
    res = fitted.residuals()
    exact = TRUTH.predict(res["batch_size"], res["length"])
    truth_rms = float(np.sqrt(np.mean((1 - exact / res["seconds"]) ** 2)))
    assert fitted.rms_relative_residual <= truth_rms * (1 + 1e-9)
    nonzero = TRUTH.coefficients > 0
    np.testing.assert_allclose(fitted.coefficients[nonzero], TRUTH.coefficients[nonzero], rtol=0.2)
    zero_share = term_seconds(fitted, res["batch_size"], res["length"])[:, ~nonzero]
    assert (zero_share / res["predicted"].to_numpy()[:, None]).max() <= 0.1
    np.testing.assert_allclose(res["predicted"], exact, rtol=0.04)
    assert 0.005 < res["spread"].median() < 0.05


def test_fit_is_non_negative_and_drops_unused_terms():
    """Times with no per-sample cost and noise that would push it negative: it is 0, not < 0."""
    model = StepTimeModel(per_step=0.05, per_token=1e-5)
    shapes = [(b, n) for b in (1, 2, 8) for n in (10, 100, 1000)]
    frame = synthetic_times(model, shapes, repeats=3, noise=0.01, rng=np.random.default_rng(3))
    fitted = StepTimeModel.fit(frame)
    assert (fitted.coefficients >= 0).all()
    restricted = StepTimeModel.fit(frame, terms=["per_step", "per_token"])
    assert restricted.per_sample == restricted.attention == 0.0
    np.testing.assert_allclose([restricted.per_step, restricted.per_token], [0.05, 1e-5], rtol=0.05)


def test_fit_recovers_a_working_set_term_and_its_batch_size_dependence():
    """``working_set * (B T)**2``: the cost per token grows with the tokens in the batch, so
    at a fixed ``B * L`` a batch of many short samples is not as cheap as ``attention`` alone
    says.  Recovered exactly without noise; the per-sample weight is ``a + B * q``."""
    truth = StepTimeModel(per_step=0.01, per_token=2e-5, attention=1e-8, working_set=3e-10)
    shapes = [(b, n) for b in (2, 8, 32, 128) for n in (16, 64, 256, 1024)]
    frame = synthetic_times(truth, shapes, repeats=2, noise=0.0, rng=np.random.default_rng(0))
    fitted = StepTimeModel.fit(frame)
    assert_coefficients_close(fitted, truth, shapes, rtol=1e-9)
    # 8,192 tokens either way: only attention tells these apart, the (B T)**2 term does not
    assert truth.predict(512, 16) - truth.predict(16, 512) == pytest.approx(
        1e-8 * (512 * 16**2 - 16 * 512**2), rel=1e-9
    )
    a, q = truth.sample_seconds_parts(np.array([16, 512]))
    np.testing.assert_allclose(truth.sample_seconds([16, 512], 8), a + 8 * q, rtol=0)
    np.testing.assert_allclose(8 * truth.sample_seconds(512, 8), truth.predict(8, 512) - 0.01, rtol=1e-12)


def test_tile_rounds_the_length_terms():
    model = StepTimeModel(per_token=1.0, attention=0.5, tile=8)
    assert model.predict(2, 5) == model.predict(2, 8) == 2 * (8 + 0.5 * 64)
    shapes = [(b, n) for b in (1, 3) for n in (5, 9, 17, 30, 64)]
    frame = synthetic_times(model, shapes, repeats=2, noise=0.0, rng=np.random.default_rng(0))
    assert StepTimeModel.fit(frame, tile=8).rms_relative_residual < 1e-12
    assert StepTimeModel.fit(frame, tile=1).rms_relative_residual > 0.01


def test_to_frame_lists_the_coefficients():
    frame = TRUTH.to_frame()
    assert frame.index.tolist() == ["per_step", "per_sample", "per_token", "attention", "working_set"]
    assert frame["coefficient"].tolist() == TRUTH.coefficients.tolist()
    with pytest.raises(ValueError, match="not fitted"):
        TRUTH.residuals()


# ---------------------------------------------------------------------------------- errors
def good_frame() -> pd.DataFrame:
    shapes = [(b, n) for b in (1, 4) for n in (16, 64, 256)]
    return synthetic_times(TRUTH, shapes, repeats=2, noise=0.0, rng=np.random.default_rng(0))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f[f["batch_size"] == 1], r"3 distinct shapes cannot fit 5 terms; measure at least 6"),
        (lambda f: f[f["length"] < 64], r"every shape has length 16: per_sample, per_token and attention"),
        (lambda f: f.assign(seconds=-f["seconds"]), r"row 0: seconds = -0\.0\d+ must be a finite time > 0"),
        (lambda f: f.iloc[1:], r"shape \(batch_size=1, length=16\) was measured once"),
        (lambda f: f.drop(columns="length"), r"missing length"),
        (lambda f: f.assign(batch_size=0.5), r"row 0: batch_size = 0\.5 is not a positive integer"),
        (lambda f: f.iloc[:0], r"no step times"),
    ],
)
def test_fit_rejects_bad_input(edit, message):
    with pytest.raises(ValueError, match=message):
        StepTimeModel.fit(edit(good_frame()))


def test_model_rejects_bad_coefficients():
    with pytest.raises(ValueError, match="per_token must be a finite number >= 0"):
        StepTimeModel(per_token=-1.0)
    with pytest.raises(ValueError, match="at least one positive coefficient"):
        StepTimeModel()
    with pytest.raises(ValueError, match="terms must be a non-empty subset"):
        StepTimeModel.fit(good_frame(), terms=["flops"])


def test_load_step_times_round_trip_and_errors(tmp_path):
    frame = good_frame()
    path = tmp_path / "times.csv"
    frame.to_csv(path, index=False)
    pd.testing.assert_frame_equal(load_step_times(path), frame)
    bad = tmp_path / "bad.csv"
    bad.write_text("batch_size,length,seconds\n8,128,0.5\n8,abc,0.5\n")
    with pytest.raises(ValueError, match=r"bad\.csv: row 1: length = 'abc' is not a positive integer"):
        load_step_times(bad)
    with pytest.raises(ValueError, match=r"missing\.csv: no such file"):
        load_step_times(tmp_path / "missing.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"empty\.csv: not a CSV of step times"):
        load_step_times(empty)


def test_measure_step_times_interleaves_shapes_after_warmup():
    calls = []
    frame = measure_step_times(lambda b, n: calls.append((b, n)), [(2, 8), (4, 16)], repeats=3, warmup=2)
    assert calls == [(2, 8), (2, 8), (4, 16), (4, 16)] + [(2, 8), (4, 16)] * 3
    assert frame[["batch_size", "length"]].values.tolist() == [[2, 8], [4, 16]] * 3
    assert (frame["seconds"] >= 0).all() and frame["seconds"].dtype == float
    with pytest.raises(
        ValueError, match=r"shapes\[1\] = \(3,\) is not a \(batch_size, length\[, segment_length\]\) tuple"
    ):
        measure_step_times(lambda b, n: None, [(1, 2), (3,)])
    with pytest.raises(ValueError, match="step must be callable"):
        measure_step_times(None, [(1, 2)])


def test_calibration_shapes_cover_the_rule():
    hist = LengthHistogram.from_lengths([16, 40, 300, 1024])
    shapes = calibration_shapes(hist, max_tokens=8192, n_lengths=6)
    lengths = sorted({n for _, n in shapes})
    assert lengths[0] == 16 and lengths[-1] == 1024 and len(lengths) == 6
    for n in lengths:  # the budget's batch, and the fixed-size strategies' max_tokens // longest
        sizes = {b for b, m in shapes if m == n}
        assert {8192 // n, 8} <= sizes
    assert 10 <= len(shapes) <= 60


# ----------------------------------------------------------------- expected vs simulated time
@pytest.mark.parametrize(
    ("strategy", "rule", "pad", "tile"),
    [
        ("bucketed", {"batch_size": 5}, 1, 1),
        ("bucketed", {"max_tokens": 600}, 4, 8),
        ("random", {"batch_size": 7}, 1, 16),
        ("random", {"max_tokens": 900}, 1, 1),
    ],
)
def test_expected_epoch_time_matches_simulated_epochs(strategy, rule, pad, tile):
    """The exact expectation lies within 3 standard errors of 400 simulated epochs."""
    rng = np.random.default_rng(11)
    lengths = np.minimum(rng.lognormal(4.0, 0.8, size=403).astype(np.int64) + 1, 150)
    model = StepTimeModel(
        per_step=0.3, per_sample=0.01, per_token=2e-3, attention=3e-5, working_set=1e-7, tile=tile
    )
    edges = [0, 30, 60, 150]
    exact = expected_epoch_time(
        lengths, model, strategy, rule=BatchRule(pad_to_multiple_of=pad, **rule), edges=edges
    )
    extra = {"edges": edges} if strategy == "bucketed" else {}
    sim = simulated_epoch_times(
        lengths, model, strategy, rng=rng, epochs=400, pad_to_multiple_of=pad, **rule, **extra
    )
    se = sim["seconds"].std(ddof=1) / math.sqrt(len(sim))
    assert se > 0
    assert abs(sim["seconds"].mean() - exact) < 3 * se


def test_sorted_time_is_deterministic_and_matches_simulation():
    lengths = np.random.default_rng(2).integers(1, 300, size=101)
    model = StepTimeModel(per_step=0.1, per_token=1e-3, attention=1e-6, tile=32)
    exact = expected_epoch_time(lengths, model, "sorted", rule=BatchRule(batch_size=8, pad_to_multiple_of=8))
    sim = simulated_epoch_times(
        lengths, model, "sorted", rng=np.random.default_rng(0), epochs=2, batch_size=8, pad_to_multiple_of=8
    )
    np.testing.assert_allclose(sim["seconds"], exact, rtol=1e-12)


def test_slowest_rank_sets_the_step_time():
    """Two ranks, sorted batches [1,2] [3,4] [5,6]: steps {b0, b1} and {b2}, in some order."""
    model = StepTimeModel(per_step=1.0, per_token=0.5)
    sim = simulated_epoch_times(
        [1, 2, 3, 4, 5, 6],
        model,
        "sorted",
        rng=np.random.default_rng(0),
        epochs=3,
        batch_size=2,
        world_size=2,
    )
    per_batch = {2: 1 + 2.0, 4: 1 + 4.0, 6: 1 + 6.0}  # longest -> seconds of a 2-sample batch
    possible = {
        per_batch[6] + per_batch[4],
        per_batch[6] + per_batch[2],
        per_batch[4] + per_batch[6],
        max(per_batch[2], per_batch[4]) + per_batch[6],
    }
    assert set(sim["seconds"].tolist()) <= possible
    assert (sim["steps"] == 2).all()


def test_predict_strategy_throughput_rows():
    rng = np.random.default_rng(5)
    lengths = rng.integers(10, 400, size=240)
    model = StepTimeModel(per_step=0.05, per_token=1e-5, attention=1e-8)
    edges = [0, 120, 250, 399]
    table = predict_strategy_throughput(lengths, model, edges=edges, batch_size=8, rng=rng, epochs=4)
    assert table.index.tolist() == list(ALL_STRATEGIES)
    assert table["exact"].tolist() == [True, True, True] + [False] * 6
    # B = 8 rows of 8 samples; the last batch of 240 = 30 * 8 is full
    assert table.loc["sorted", ["rows_per_step", "samples_per_step", "samples_per_step_cv"]].tolist() == [
        8,
        8,
        0,
    ]
    assert (table.loc[list(PACKED_STRATEGIES), "rows_per_step"] == 1).all()
    total = int(lengths.sum())
    assert table.loc["bucketed", "tokens_per_s"] == pytest.approx(
        total / expected_epoch_time(lengths, model, rule=BatchRule(batch_size=8), edges=edges), rel=1e-12
    )
    # the padded-token prediction is anchored at the reference (sorted) row
    assert table.loc["sorted", "padded_tokens_per_s"] == pytest.approx(table.loc["sorted", "tokens_per_s"])
    measured = predict_strategy_throughput(
        lengths,
        model,
        edges=edges,
        batch_size=8,
        rng=rng,
        strategies=["sorted", "random"],
        reference_tokens_per_s=1000.0,
    )
    ratio = measured.loc["random", "efficiency"] / measured.loc["sorted", "efficiency"]
    assert measured.loc["random", "padded_tokens_per_s"] == pytest.approx(1000.0 * ratio)
    two = predict_strategy_throughput(
        lengths,
        model,
        edges=edges,
        batch_size=8,
        rng=rng,
        strategies=["random"],
        reference="random",
        world_size=2,
    )
    assert not two["exact"].any()  # a step waits for its slowest rank: simulated
    assert two.loc["random", "tokens_per_s"] > table.loc["random", "tokens_per_s"]


@pytest.mark.parametrize("strategy", PACKED_STRATEGIES)
def test_packed_epochs_are_priced_segment_by_segment(strategy):
    """With one rank a packed epoch costs per_step * rows + (per_sample + per_segment) * n +
    (per_token * C + working_set * C**2) * rows + attention * sum(l**2), whatever the packing."""
    lengths = np.random.default_rng(8).integers(10, 400, size=500)
    model = StepTimeModel(
        per_step=0.05, per_sample=1e-3, per_token=1e-5, attention=1e-8, working_set=1e-11, per_segment=2e-3
    )
    out = simulated_epoch_times(
        lengths, model, strategy, rng=np.random.default_rng(1), epochs=2, max_tokens=2048
    )
    rows = out["steps"].to_numpy(dtype=float)
    attention = float((lengths.astype(float) ** 2).sum())
    want = 0.05 * rows + 3e-3 * 500 + (1e-5 * 2048 + 1e-11 * 2048**2) * rows + 1e-8 * attention
    np.testing.assert_allclose(out["seconds"].to_numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(out["samples_per_step"].to_numpy(), 500 / rows, rtol=1e-12)


# ------------------------------------------------------------------ optimiser for time
def exact_time_objective(
    lengths, counts, edges, model, *, batch_size=None, max_tokens=None, pad=1
) -> Fraction:
    """The time objective in exact rationals: per bucket, per_step * ceil(n/B) plus the
    expected seconds of its floor(n/B) full batches, B * E[g_B(max of a random B-subset)],
    and of its last batch of r = n mod B samples at its own size, r * E[g_r(max of r)], with
    g_s = per_token T + (attention + working_set s) T**2."""
    c1, c2, c0 = Fraction(model.per_token), Fraction(model.attention), Fraction(model.per_step)
    c4 = Fraction(model.working_set)

    def g(v, s):
        t = -(-(-(-v // pad) * pad) // model.tile) * model.tile
        return c1 * t + (c2 + c4 * s) * t * t

    total = Fraction(0)
    for lo, hi in itertools.pairwise(edges):
        inside = [(v, c) for v, c in zip(lengths, counts, strict=True) if lo < v <= hi]
        if not inside:
            continue
        b = batch_size if batch_size is not None else max(1, max_tokens // (-(-hi // pad) * pad))
        n = sum(c for _, c in inside)
        total += c0 * -(-n // b)

        def e_max(s, inside=inside, n=n):
            below, prev, expect = 0, 0, Fraction(0)
            for v, c in inside:
                below += c
                now = math.comb(below, s)
                expect += g(v, s) * (now - prev)
                prev = now
            return expect / math.comb(n, s)

        full, r = divmod(n, b)
        if full:
            total += full * b * e_max(b)
        if r:
            total += r * e_max(r)
    return total


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("sums", ["default", "log_ratios"])
def test_time_optimal_edges_equal_exhaustive_search(seed, sums, monkeypatch):
    if sums != "default":  # force the DP's ratios from the table of log x!
        monkeypatch.setattr(ratio_tables, "_LINEAR_LOG_LIMIT", -1.0)
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 9))
    lengths = sorted(rng.choice(np.arange(1, 60), m, replace=False).tolist())
    counts = rng.integers(1, 14, m).tolist()
    hist = LengthHistogram.from_counts(lengths, counts)
    rule = (
        {"batch_size": int(rng.integers(1, 7))}
        if seed % 2 == 0
        else {"max_tokens": int(rng.integers(20, 200))}
    )
    pad = [1, 4][seed % 3 == 0]
    # per-batch seconds from negligible to dominant, so the optimum moves with it
    model = StepTimeModel(
        per_step=[0.0, 0.05, 5.0, 500.0][seed % 4],
        per_token=0.01,
        attention=[0.0, 1e-3][seed % 5 == 0],
        working_set=[0.0, 1e-5][seed % 3 == 1],  # B follows the edge under a token budget
        tile=[1, 8][seed % 7 == 0],
    )
    cands = lengths[:-1]
    for k in range(1, min(4, m) + 1):
        best = min(
            exact_time_objective(lengths, counts, [0, *cut, lengths[-1]], model, pad=pad, **rule)
            for cut in itertools.combinations(cands, k - 1)
        )
        plan = optimize_edges(hist, k, step_time=model, pad_to_multiple_of=pad, **rule)
        got = exact_time_objective(lengths, counts, plan.edges, model, pad=pad, **rule)
        assert float(abs(got - best) / best) <= 1e-12
        assert plan.objective == pytest.approx(float(got), rel=1e-12)
        greedy = optimize_edges(hist, k, step_time=model, pad_to_multiple_of=pad, method="greedy", **rule)
        assert exact_time_objective(lengths, counts, greedy.edges, model, pad=pad, **rule) >= best


@pytest.mark.parametrize("seed", range(3))
def test_token_budget_time_costs_with_a_working_set_equal_exact_rationals(seed):
    """Under a token budget ``B`` follows the bucket's edge, so a working-set term makes each
    sample's seconds ``a + B q`` depend on the bucket: the kernel carries a second running
    sum (restarted with the first).  Every bucket cost on 70 lengths (counts up to 60, ``B``
    from 1 to ~30, restarts that skip terms) equals the exact rational objective to 1e-10."""
    rng = np.random.default_rng(40 + seed)
    lengths = np.sort(rng.choice(np.arange(2, 300), 70, replace=False))
    counts = rng.integers(1, 60, lengths.size)
    hist = LengthHistogram.from_counts(lengths, counts)
    max_tokens = int(rng.integers(300, 900))
    model = StepTimeModel(
        per_step=0.2, per_token=1e-3, attention=2e-6, working_set=3e-8, tile=[1, 4][seed % 2]
    )
    prob = problem.build_problem(hist, BatchRule(max_tokens=max_tokens), 1, model)
    assert prob.weight2.any()
    points = np.r_[0, np.sort(rng.choice(np.arange(1, prob.m), 9, replace=False)), prob.m]
    mat = kernel.cost_matrix(prob, points)
    ls, cs = lengths.tolist(), counts.tolist()
    for a, b in itertools.combinations(range(points.size), 2):
        lo = 0 if points[a] == 0 else ls[points[a] - 1]
        hi = ls[points[b] - 1]
        inside = [(v, c) for v, c in zip(ls, cs, strict=True) if lo < v <= hi]
        want = exact_time_objective(
            [v for v, _ in inside], [c for _, c in inside], [0, hi], model, max_tokens=max_tokens
        )
        assert mat[a, b] == pytest.approx(float(want), rel=1e-10)


def test_per_step_cost_moves_the_optimum_to_fewer_batches():
    """Token budget: many short samples.  Padding alone splits them off; a large per-step
    cost prefers buckets whose batches hold more samples."""
    hist = LengthHistogram.from_counts([10, 20, 200, 400], [30, 30, 20, 20])
    cheap = StepTimeModel(per_token=1e-3, attention=1e-5)
    costly = StepTimeModel(per_step=50.0, per_token=1e-3, attention=1e-5)
    a = optimize_edges(hist, 2, step_time=cheap, batch_size=4)
    b = optimize_edges(hist, 2, step_time=costly, batch_size=4)
    assert a.step_time is cheap and a.objective < b.objective
    assert evaluate_edges(hist, a.edges, batch_size=4, step_time=cheap).objective == a.objective


def test_step_time_must_be_a_model_and_padding_plans_keep_none():
    hist = LengthHistogram.from_counts([1, 2, 3], [2, 2, 2])
    with pytest.raises(ValueError, match="step_time must be a StepTimeModel, got dict"):
        optimize_edges(hist, 2, batch_size=2, step_time={"per_token": 1.0})
    plan = optimize_edges(hist, 2, batch_size=2)
    assert plan.step_time is None
    timed = optimize_edges(hist, 2, BatchRule(batch_size=2), step_time=TRUTH)
    assert timed.step_time is TRUTH and "step_time" not in repr(timed)


def test_expected_batch_sum_is_full_batches_plus_the_partial_one():
    """Lengths 1, 1, 3 cut into batches of 2: the pair is {1, 1} with probability 1/3, and
    the leftover pads to itself; with g = L: E = 2 * (1/3 * 1 + 2/3 * 3) + (2/3 * 1 + 1/3 * 3)."""
    g, cum = np.array([1.0, 3.0]), np.array([2, 3])
    assert expected_batch_sum(g, cum, 2) == pytest.approx(2 * (1 / 3 + 2) + (2 / 3 + 1), rel=1e-15)
    assert expected_batch_sum(g, cum, 5) == 3 * 3.0  # one short batch at the longest
    assert expected_batch_sum(g, cum, 1) == pytest.approx(5.0)  # every sample alone


@pytest.mark.parametrize("working_set", [0.0, 1e-9])
def test_sweep_throughput_time_edges_are_never_slower(working_set):
    rng = np.random.default_rng(8)
    hist = LengthHistogram.from_lengths(np.minimum(rng.lognormal(5, 0.9, 3000).astype(int) + 1, 2000))
    model = StepTimeModel(
        per_step=0.05, per_sample=1e-4, per_token=1e-5, attention=2e-8, working_set=working_set
    )
    sweep = sweep_throughput(hist, model, [1, 2, 4, 6], max_tokens=4096)
    wide = sweep.pivot(index="n_buckets", columns="objective", values="tokens_per_s")
    # the DP prices a partial batch as a full one; the exact times may differ by that much
    assert (wide["time"] >= wide["padding"] * (1 - 1e-4)).all()
    assert wide.loc[1, "time"] == pytest.approx(wide.loc[1, "padding"])
    by_time = sweep_bucket_counts(hist, [4], ["optimal"], max_tokens=4096, step_time=model)
    assert by_time["edges"].iloc[0] == sweep.query("n_buckets == 4 and objective == 'time'")["edges"].iloc[0]


# ------------------------------------------------------------------ packed steps in the model
def test_padded_features_are_the_padded_only_model_bit_for_bit():
    rng = np.random.default_rng(3)
    b = rng.integers(1, 300, size=200).astype(float)
    n = rng.integers(1, 9000, size=200).astype(float)
    model = StepTimeModel(
        per_step=0.01, per_sample=1e-4, per_token=3e-5, attention=4e-8, working_set=3e-10, tile=16
    )
    t = np.ceil(n / 16) * 16
    old = np.stack([np.ones_like(b), b, b * t, b * t * t, (b * t) ** 2], axis=-1) @ model.coefficients
    assert np.array_equal(model.predict(b, n), old)


def test_fit_recovers_a_per_segment_term_from_packed_steps():
    truth = StepTimeModel(per_step=0.02, per_sample=1e-4, per_token=2e-6, attention=1e-9, per_segment=3e-3)
    padded = [(b, n, 0) for b in (1, 4, 16) for n in (64, 256, 1024)]
    packed = [(1, k * seg, seg) for seg in (32, 128, 512) for k in (2, 8, 16)]
    frame = pd.DataFrame((padded + packed) * 2, columns=["batch_size", "length", "segment_length"])
    frame["seconds"] = truth.predict(frame["batch_size"], frame["length"], frame["segment_length"])
    fitted = StepTimeModel.fit(frame)
    coef = fitted.to_frame()["coefficient"]
    np.testing.assert_allclose(coef.to_numpy(), [0.02, 1e-4, 2e-6, 1e-9, 0.0, 3e-3], rtol=1e-6, atol=1e-15)
    # a packed row of k segments of l:
    # per_step + (per_sample + per_segment) k + per_token k l + attention k l**2
    k, seg = 8, 128
    expected = 0.02 + (1e-4 + 3e-3) * k + 2e-6 * k * seg + 1e-9 * k * seg**2
    assert truth.predict(1, k * seg, seg) == pytest.approx(expected, rel=1e-12)
    # the same step priced from its segments' totals
    assert truth.predict_packed([k], [k * seg**2], [k * seg])[0] == pytest.approx(expected, rel=1e-12)
    assert "segment_length" in fitted.residuals().columns


def test_fit_refuses_per_segment_without_packed_steps_and_one_length():
    frame = pd.DataFrame({"batch_size": [1, 2, 4, 8] * 2, "length": [64] * 8, "seconds": [1.0, 2, 4, 8] * 2})
    with pytest.raises(ValueError, match="every shape has length 64: per_sample, per_token and attention"):
        StepTimeModel.fit(frame)
    assert StepTimeModel.fit(frame, terms=["per_step", "per_token"]).per_token > 0  # fittable
    with pytest.raises(ValueError, match="per_segment term needs packed steps"):
        StepTimeModel.fit(frame, terms=["per_token", "per_segment"])


@pytest.mark.parametrize(
    "column, value, message",
    [
        ("length", 1e300, r"length = 1e\+300 is not a positive integer up to 2\*\*53"),
        ("batch_size", 2.0**60, "batch_size = .* is not a positive integer up to 2"),
        ("segment_length", 48, "length 128 is not a multiple of segment_length 48"),
        ("segment_length", -1, "segment_length = -1 is not an integer >= 0"),
    ],
)
def test_check_step_times_refuses_out_of_range_values(column, value, message):
    frame = pd.DataFrame({"batch_size": [8], "length": [128], "seconds": [0.5], "segment_length": [0]})
    frame[column] = [value]
    with pytest.raises(ValueError, match=message):
        check_step_times(frame)


def test_blank_segment_length_is_a_padded_step(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("batch_size,length,seconds,segment_length\n8,128,0.5,\n1,128,0.2,32\n")
    frame = load_step_times(path)
    assert frame["segment_length"].tolist() == [0, 32]


def test_measure_step_times_tells_step_a_packed_shape():
    calls = []

    def step(batch_size, length, segment_length=None):
        calls.append((batch_size, length, segment_length))

    frame = measure_step_times(step, [(2, 8), (1, 16, 4)], repeats=2, warmup=1)
    assert calls == [(2, 8, None), (1, 16, 4)] * 3
    assert frame[["batch_size", "length", "segment_length"]].values.tolist() == [[2, 8, 0], [1, 16, 4]] * 2
    with pytest.raises(ValueError, match="length 16 is not a multiple of segment_length 5"):
        measure_step_times(step, [(1, 16, 5)])


def test_calibration_shapes_packed_rows_fill_the_token_budget():
    hist = LengthHistogram.from_lengths([10, 100, 1000])
    shapes = calibration_shapes(hist, max_tokens=4000, n_lengths=3, packed=True)
    packed = [s for s in shapes if len(s) == 3]
    assert {s[2] for s in packed} == {10, 100, 1000}
    assert all(s[0] == 1 and s[1] % s[2] == 0 and s[1] <= 4000 for s in packed)
    assert (1, 4000, 10) in packed and (1, 1000, 1000) in packed  # a full row, and a quarter of one
    assert [s for s in shapes if len(s) == 2] == calibration_shapes(hist, max_tokens=4000, n_lengths=3)
