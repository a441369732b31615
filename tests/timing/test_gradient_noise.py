"""The gradient-noise model against brute force and Monte Carlo.

Tiny datasets with explicit per-sample gradient vectors: every batch a strategy can draw is
enumerated (every subset of a bucket, every within-length order of a sorted epoch), and the
exact formulas must match to rounding.  The probe's between-bin part must be unbiased (a
bin mean's own noise subtracted), its jackknife standard errors must match the spread of
repeated probes, and the simulated window noise must match batches of real vectors within 3
standard errors.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from analysis.answers.gradient_noise import strategy_noise
from analysis.batching import BatchRule, bucket_index
from analysis.lengths import LengthHistogram
from analysis.simulation.strategies import epoch_builder
from analysis.timing.noise import measure_gradient_noise, plan_noise

LENGTHS = np.array([1, 1, 1, 2, 2, 2, 3, 3, 3, 3])


def _exact_model(grads: np.ndarray, lengths: np.ndarray) -> object:
    """Every sample probed alone: the model is exact for this dataset (one bin per length)."""
    return measure_gradient_noise(
        lambda idx: grads[idx].mean(0),
        lengths,
        n_bins=int(np.unique(lengths).size),
        groups_per_bin=100,
        folds=3,
        rng=np.random.default_rng(0),
    )


def _subset_error(grads: np.ndarray, pool: np.ndarray, size: int, full: np.ndarray) -> float:
    """Mean ``|mean(g) - G|**2`` over every ``size``-subset of ``pool``."""
    errs = [np.sum((grads[list(c)].mean(0) - full) ** 2) for c in itertools.combinations(pool, size)]
    return float(np.mean(errs))


def _brute_bucketed(grads: np.ndarray, lengths: np.ndarray, edges: list[int], sizes: list[int]) -> float:
    """Per-step variance of a bucketed shuffle: each batch a uniform subset of its bucket."""
    full = grads.mean(0)
    members = bucket_index(lengths, edges)
    total, steps = 0.0, 0
    for b, size in enumerate(sizes):
        pool = np.flatnonzero(members == b)
        batch_sizes = [size] * (pool.size // size) + ([pool.size % size] if pool.size % size else [])
        for s in batch_sizes:
            total += _subset_error(grads, pool, s, full)
            steps += 1
    return total / steps


@pytest.fixture
def grads() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.normal(size=(LENGTHS.size, 3)) + np.array([0.5, 0, 0]) * LENGTHS[:, None]


def test_exact_figures_match_the_dataset(grads: np.ndarray) -> None:
    model = _exact_model(grads, LENGTHS)
    full = grads.mean(0)
    trace = float(np.sum((grads - full) ** 2)) / (LENGTHS.size - 1)
    figures = model.figures()
    assert figures["trace"].value == pytest.approx(trace, rel=1e-12)
    assert figures["gradient_norm2"].value == pytest.approx(float(full @ full), rel=1e-12)
    assert figures["noise_scale"].value == pytest.approx(trace / float(full @ full), rel=1e-12)


@pytest.mark.parametrize(
    ("edges", "rule"),
    [
        ([0, 3], {"batch_size": 3}),  # one bucket: a shuffle
        ([0, 1, 3], {"batch_size": 3}),
        ([0, 1, 2, 3], {"batch_size": 2}),
        ([0, 1, 3], {"max_tokens": 6}),  # a token budget: 6 and 2 samples per batch
    ],
)
def test_bucketed_matches_every_batch(grads: np.ndarray, edges: list[int], rule: dict[str, int]) -> None:
    model = _exact_model(grads, LENGTHS)
    noise = plan_noise(model, LENGTHS, edges=edges, **rule)
    sizes = [rule["batch_size"]] * (len(edges) - 1) if "batch_size" in rule else [6 // e for e in edges[1:]]
    assert noise.variance.value == pytest.approx(_brute_bucketed(grads, LENGTHS, edges, sizes), rel=1e-10)
    # rho: the buckets' between sum of squares per sample over tr Σ
    full, members = grads.mean(0), bucket_index(LENGTHS, edges)
    between = sum(
        np.sum(members == b) * np.sum((grads[members == b].mean(0) - full) ** 2)
        for b in range(len(edges) - 1)
    )
    trace = float(np.sum((grads - full) ** 2)) / (LENGTHS.size - 1)
    assert noise.between_share.value == pytest.approx(between / LENGTHS.size / trace, rel=1e-10)


def test_random_is_the_shuffle_and_the_effective_batch(grads: np.ndarray) -> None:
    model = _exact_model(grads, LENGTHS)
    noise = plan_noise(model, LENGTHS, "random", batch_size=4)
    assert noise.variance.value == pytest.approx(_brute_bucketed(grads, LENGTHS, [0, 3], [4]), rel=1e-10)
    assert noise.variance_ratio.value == pytest.approx(1.0)
    # batches 4, 4, 2: the shuffle of B_eff samples has the same variance tr Σ (1/B_eff - 1/N)
    trace = model.figures(LENGTHS)["trace"].value
    b_eff = noise.effective_batch.value
    assert trace * (1 / b_eff - 1 / LENGTHS.size) == pytest.approx(noise.variance.value, rel=1e-12)


def test_sorted_matches_every_within_length_order(grads: np.ndarray) -> None:
    model = _exact_model(grads, LENGTHS)
    size, full = 4, grads.mean(0)
    groups = [np.flatnonzero(LENGTHS == v) for v in (1, 2, 3)]
    errs = []
    for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
        order = np.concatenate(orders)
        batches = [order[i : i + size] for i in range(0, order.size, size)]
        errs.append(np.mean([np.sum((grads[b].mean(0) - full) ** 2) for b in batches]))
    noise = plan_noise(model, LENGTHS, "sorted", batch_size=size)
    assert noise.variance.value == pytest.approx(float(np.mean(errs)), rel=1e-10)


def test_split_bins_are_priced_as_random_splits() -> None:
    """A bucket edge inside a bin: the model takes the bin's samples on either side as a
    random split; averaging brute force over which samples carry which length checks it."""
    lengths = np.array([1, 2, 2, 3, 4, 4, 5, 6, 6])  # bins (0, 2], (2, 4], (4, 6]: edge 3 splits the middle
    rng = np.random.default_rng(5)
    grads = rng.normal(size=(9, 2)) + lengths[:, None] * np.array([0.3, -0.2])
    model = measure_gradient_noise(
        lambda idx: grads[idx].mean(0), lengths, n_bins=3, groups_per_bin=9, folds=3, rng=rng
    )
    assert model.edges == (0, 2, 4, 6)
    edges, brute = [0, 3, 6], []
    bins = [np.flatnonzero((lengths > lo) & (lengths <= hi)) for lo, hi in ((0, 2), (2, 4), (4, 6))]
    for perm in itertools.permutations(bins[1]):  # which of the middle bin's gradients sit at length 3
        shuffled = grads.copy()
        shuffled[bins[1]] = grads[list(perm)]
        brute.append(_brute_bucketed(shuffled, lengths, edges, [2, 2]))
    noise = plan_noise(model, lengths, edges=edges, batch_size=2)
    assert noise.variance.value == pytest.approx(float(np.mean(brute)), rel=1e-10)


def _population(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    lengths = rng.integers(8, 512, n)
    direction = np.zeros(64)
    direction[:4] = [0.4, -0.3, 0.2, 0.1]
    grads = rng.normal(size=(n, 64)) + np.log(lengths)[:, None] * direction
    return lengths, grads


def test_between_share_is_unbiased_and_its_se_honest() -> None:
    """Repeated small probes of one population: the mean estimate of ρ over bins lands on the
    truth within 3 standard errors, the naive one (bin means squared as they are) far above,
    and the jackknife standard error is of the size of the spread of the estimates (not below)."""
    rng = np.random.default_rng(11)
    lengths, grads = _population(6_000, rng)
    edges = measure_gradient_noise(
        lambda i: grads[i].mean(0), lengths, n_bins=8, groups_per_bin=3, rng=rng
    ).edges
    members = np.searchsorted(np.asarray(edges[1:-1]), lengths, side="left")
    full = grads.mean(0)
    trace = float(np.sum((grads - full) ** 2)) / (lengths.size - 1)
    between = sum(np.sum(members == j) * np.sum((grads[members == j].mean(0) - full) ** 2) for j in range(8))
    rho = between / lengths.size / trace
    estimates, naive, ses = [], [], []
    for _ in range(60):
        model = measure_gradient_noise(
            lambda i: grads[i].mean(0), lengths, n_bins=8, groups_per_bin=12, folds=6, rng=rng
        )
        assert model.edges == edges
        fig = model.figures()["between_share"]
        estimates.append(fig.value)
        ses.append(fig.se)
        w = np.asarray(model.bin_samples) / lengths.size
        centred = model.means - w @ model.means
        naive.append(float(w @ np.sum(centred**2, axis=1)) / model.figures()["trace"].value)
    mean, spread = float(np.mean(estimates)), float(np.std(estimates, ddof=1))
    assert abs(mean - rho) < 3 * spread / math.sqrt(len(estimates))
    assert np.mean(naive) > rho + 5 * spread / math.sqrt(len(estimates))
    # the delete-a-fold jackknife is honest to conservative: about the spread, at most ~2x it
    # when the between part is small against the noise of the bin means (as here)
    assert 0.8 < float(np.mean(ses)) / spread < 2.5


def test_window_noise_matches_batches_of_real_vectors() -> None:
    """Simulated window noise against the measured error of the same strategies' batches of
    explicit gradient vectors, within 3 standard errors (model from the full dataset's
    bins, per-length exchangeable by construction)."""
    rng = np.random.default_rng(7)
    lengths = np.repeat(np.arange(1, 41), 30)
    means = np.cumsum(rng.normal(scale=0.3, size=(40, 8)), axis=0)  # a mean drifting with length
    grads = means[lengths - 1] + rng.normal(size=(lengths.size, 8))
    model = _exact_model(grads, lengths)
    strategies = ["length_grouped", "token_budget", "packing_bfd"]
    frame = strategy_noise(model, lengths, strategies, rng=rng, batch_size=8, windows=[1, 4], epochs=6)
    full = grads.mean(0)
    for name in ["random", *strategies]:
        builder = epoch_builder(lengths, name, batch_size=8)
        for w in (1, 4):
            per_epoch = []
            for _ in range(60):
                batches = builder.epoch(rng).batches()
                # which sample of a length carries which gradient: random (the model's exchangeability)
                mixed = grads[np.lexsort((rng.random(lengths.size), lengths))]
                errs = [mixed[b].mean(0) - full for b in batches]
                sums = [np.sum(errs[i : i + w], axis=0) for i in range(0, len(errs) - w + 1, w)]
                per_epoch.append(np.mean([s @ s for s in sums]) / w)
            row = frame[(frame["strategy"] == name) & (frame["window"] == w)].iloc[0]
            se = math.hypot(np.std(per_epoch, ddof=1) / math.sqrt(len(per_epoch)), row["se"])
            assert abs(np.mean(per_epoch) - row["variance"]) < 3 * se, (name, w)


def test_exact_and_simulated_agree_for_bucketed() -> None:
    rng = np.random.default_rng(2)
    lengths, grads = _population(2_000, rng)
    model = measure_gradient_noise(lambda i: grads[i].mean(0), lengths, n_bins=16, groups_per_bin=8, rng=rng)
    edges = [7, 60, 200, 511]
    exact = plan_noise(model, lengths, edges=edges, batch_size=8)
    frame = strategy_noise(
        model, lengths, ["bucketed"], rng=rng, edges=edges, batch_size=8, windows=[1], epochs=10
    )
    row = frame[frame["strategy"] == "bucketed"].iloc[0]
    assert abs(row["variance"] - exact.variance.value) < 3 * row["se"] + 1e-12
    assert row["ratio"] == pytest.approx(exact.variance_ratio.value, abs=3 * row["ratio_se"] + 1e-9)


def test_bad_input_is_one_line() -> None:
    with pytest.raises(ValueError, match="1-D vector"):
        measure_gradient_noise(lambda i: 1.0, LENGTHS, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="same size|one sketch dimension"):
        measure_gradient_noise(
            lambda i: np.ones(int(i[0]) % 2 + 2), np.ones(12, dtype=int), rng=np.random.default_rng(0)
        )
    with pytest.raises(ValueError, match="needs edges"):
        plan_noise(_exact_model(np.eye(10)[:, :3], LENGTHS), LENGTHS, batch_size=2)
    with pytest.raises(ValueError, match="GradientNoise"):
        plan_noise(object(), LengthHistogram.from_lengths(LENGTHS), "random", batch_size=2)  # type: ignore[arg-type]


def test_the_model_file_round_trips_and_bad_files_are_one_line(tmp_path: object, grads: np.ndarray) -> None:
    from pathlib import Path

    from analysis.loaders import load_gradient_noise, save_gradient_noise

    folder = Path(str(tmp_path))
    model = _exact_model(grads, LENGTHS)
    back = load_gradient_noise(save_gradient_noise(model, folder / "noise.npz"))
    for name in ("means", "within", "mean_variance", "replicate_gram", "replicate_within"):
        np.testing.assert_array_equal(getattr(back, name), getattr(model, name))
    assert (back.edges, back.bin_samples, back.groups, back.group_size) == (
        model.edges,
        model.bin_samples,
        model.groups,
        model.group_size,
    )
    np.savez(folder / "other.npz", means=np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"other\.npz: not a gradient-noise file \(missing format"):
        load_gradient_noise(folder / "other.npz")
    with pytest.raises(ValueError, match="no such file"):
        load_gradient_noise(folder / "absent.npz")


def test_compare_with_noise_prints_the_plan_and_the_windows(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    from pathlib import Path

    from analysis import cli
    from analysis.loaders import save_gradient_noise

    folder = Path(str(tmp_path))
    rng = np.random.default_rng(4)
    lengths, grads = _population(1_200, rng)
    model = measure_gradient_noise(lambda i: grads[i].mean(0), lengths, n_bins=8, groups_per_bin=6, rng=rng)
    save_gradient_noise(model, folder / "noise.npz")
    (folder / "lengths.txt").write_text("\n".join(map(str, lengths)) + "\n")
    argv = ["compare", str(folder / "lengths.txt"), "--buckets", "3", "--epochs", "2", "--quiet"]
    assert cli.main([*argv, "--noise", str(folder / "noise.npz"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    edges = result["edges"]
    expected = plan_noise(model, lengths, edges=edges, batch_size=8)
    figures = result["gradient_noise"]["bucketed_plan"]
    assert figures["effective_batch"]["value"] == pytest.approx(expected.effective_batch.value, rel=1e-12)
    assert {r["strategy"] for r in result["gradient_noise"]["strategies"]} >= {
        "random",
        "bucketed",
        "length_grouped",
    }
    assert cli.main([*argv, "--noise", str(folder / "noise.npz")]) == 0
    assert "trains like a shuffle of" in " ".join(capsys.readouterr().out.split())
    assert cli.main([*argv, "--noise", str(folder / "lengths.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a gradient-noise file" in err


def test_the_report_records_the_noise_model_in_recommendation_json(tmp_path: object) -> None:
    """``report --noise``: recommendation.json carries the model's figures, the recommended
    plan priced exactly, and every strategy's window noise (a one-notebook report)."""
    from pathlib import Path

    from analysis.loaders import save_gradient_noise, save_histogram
    from analysis.report import run_report
    from tests.faces.test_report_folder import notebooks_in

    folder = Path(str(tmp_path))
    rng = np.random.default_rng(6)
    lengths, grads = _population(1_000, rng)
    model = measure_gradient_noise(lambda i: grads[i].mean(0), lengths, n_bins=8, groups_per_bin=6, rng=rng)
    npz = save_gradient_noise(model, folder / "noise.npz")
    src = save_histogram(LengthHistogram.from_lengths(lengths), folder / "in.csv")
    result = run_report(
        src, folder / "report", notebooks_dir=notebooks_in(folder / "nbs"), noise=npz, quiet=True
    )
    record = result.recommendation["gradient_noise"]
    edges = result.recommendation["plan"]["edges"]
    expected = plan_noise(model, lengths, edges=edges, batch_size=8)
    assert record["plan"]["effective_batch"]["value"] == pytest.approx(
        expected.effective_batch.value, rel=1e-12
    )
    assert record["model"]["noise_scale"]["value"] == pytest.approx(
        model.figures(lengths)["noise_scale"].value
    )
    assert {row["strategy"] for row in record["strategies"]} >= {"random", "bucketed", "length_grouped"}
    with pytest.raises(ValueError, match="not a gradient-noise file"):
        run_report(src, folder / "again", notebooks_dir=folder / "nbs", noise=src, quiet=True)


def test_time_to_quality_from_brute_force_variances(grads: np.ndarray) -> None:
    """Steps to the same loss scale as 1 + B_noise / B_eff: rebuilt from every batch of the tiny
    dataset and the step-time model's epoch seconds."""
    from analysis.timing.epoch import expected_epoch_time
    from analysis.timing.noise import time_to_quality
    from analysis.timing.step_time import StepTimeModel

    model = _exact_model(grads, LENGTHS)
    clock = StepTimeModel(per_step=0.05, per_token=0.01)
    edges, n, full = [0, 1, 3], LENGTHS.size, grads.mean(0)
    trace = float(np.sum((grads - full) ** 2)) / (n - 1)
    scale = trace / float(full @ full)

    def b_eff(variance: float) -> float:
        return 1 / (variance / trace + 1 / n)

    plan = b_eff(_brute_bucketed(grads, LENGTHS, edges, [3, 3]))
    shuffle = b_eff(_brute_bucketed(grads, LENGTHS, [0, 3], [3]))
    steps = (1 + scale / plan) / (1 + scale / shuffle)
    three = BatchRule(batch_size=3)
    epoch = expected_epoch_time(LENGTHS, clock, rule=three, edges=edges) / expected_epoch_time(
        LENGTHS, clock, "random", rule=three
    )
    t, s, e = time_to_quality(model, clock, LENGTHS, edges=edges, batch_size=3)
    assert (t.value, s.value, e) == pytest.approx((epoch * steps, steps, epoch), rel=1e-10)
