"""One price per batch (``analysis.timing.price``): every answer that predicts time prices a step
the same way, so ``frontier``, ``pack_or_pad`` and ``predict_strategy_throughput`` agree on
every strategy's tokens/s (issue 30: ``frontier`` priced a packed row as one padded row of the
whole budget, 1,216 tokens/s against 11,424 from the others on the data below)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis import (
    BatchRule,
    LengthHistogram,
    StepTimeModel,
    frontier,
    optimize_edges,
    predict_strategy_throughput,
)
from analysis.answers.pack_or_pad import pack_or_pad, packed_epoch_seconds
from analysis.simulation.strategies import ffd_plan
from analysis.timing.epoch import expected_epoch_time
from analysis.timing.price import step_seconds

ISSUE_MODEL = StepTimeModel(per_step=0.004, per_token=2e-6, attention=5e-8)
RICH_MODEL = StepTimeModel(
    per_step=0.01,
    per_sample=1e-4,
    per_token=1e-6,
    attention=2e-9,
    working_set=1e-12,
    tile=64,
    per_segment=3e-5,
)


@pytest.mark.parametrize(("model", "clip"), [(ISSUE_MODEL, 16384), (RICH_MODEL, 4096)], ids=["issue", "rich"])
def test_frontier_pack_or_pad_and_the_throughput_table_agree_on_every_strategy(model, clip):
    """20,000 lognormal lengths at max_tokens 16,384: exact strategies and packing (whose
    epoch seconds do not depend on which samples share a row) agree to 1e-9; the simulated
    padded ones within four standard errors of the difference of their two simulations."""
    lengths = np.clip(np.random.default_rng(0).lognormal(6.0, 1.0, 20_000).astype(int) + 1, 1, clip)
    hist = LengthHistogram.from_lengths(lengths)
    rule = BatchRule(max_tokens=16384)
    edges = [0, 400, 1200, int(hist.max)]
    names = ["sorted", "random", "bucketed", "length_grouped", "token_budget", "packing"]
    table = predict_strategy_throughput(
        hist, model, rule, edges=edges, rng=np.random.default_rng(2), strategies=names
    )
    front = frontier(
        hist,
        rule,
        rng=np.random.default_rng(1),
        step_time=model,
        max_buckets=2,
        n_lambdas=0,
        epochs=3,
        gradient_accumulation_steps=(1,),
        padding_noises=(0.1,),
        edge_sets={"given": edges},
        simulate_samples=None,
    )
    rate = dict(zip(front.frame["strategy"], front.frame["tokens_per_s"], strict=True))
    rate["bucketed"] = float(front.frame.loc[front.frame["label"] == "given", "tokens_per_s"].iloc[0])
    packed = pack_or_pad(hist, model, rule, edges=edges, rng=np.random.default_rng(3), table=table)
    at_rule = packed.sweep[packed.sweep["token_budget"] == 16384].iloc[0]
    for name in ("sorted", "random", "bucketed", "packing"):
        assert rate[name] == pytest.approx(table.loc[name, "tokens_per_s"], rel=1e-9), name
    assert at_rule["packed_tokens_per_s"] == pytest.approx(table.loc["packing", "tokens_per_s"], rel=1e-9)
    best = max(table.loc[n, "tokens_per_s"] for n in ("sorted", "random", "bucketed"))
    assert at_rule["padded_tokens_per_s"] == pytest.approx(best, rel=1e-9)
    for name in ("length_grouped", "token_budget"):
        se = float(table.loc[name, "tokens_per_s_se"])
        assert (
            abs(rate[name] - table.loc[name, "tokens_per_s"]) <= 4 * math.sqrt(2) * se + 1e-9 * rate[name]
        ), name


def test_a_padded_step_is_priced_as_the_fitted_model_predicts_it():
    """The price in parts (the optimiser's and the exact expectation's) against the features of
    the fit (``StepTimeModel.predict``), over shapes and roundings."""
    rng = np.random.default_rng(5)
    sizes, longest = rng.integers(1, 300, 400), rng.integers(1, 20_000, 400)
    for m in (1, 8, 64):
        rule = BatchRule(max_tokens=10**9, pad_to_multiple_of=m)
        padded = -(-longest // m) * m
        np.testing.assert_allclose(
            step_seconds(RICH_MODEL, sizes, longest, rule), RICH_MODEL.predict(sizes, padded), rtol=1e-12
        )


def test_a_packed_row_is_priced_by_its_capacity_and_its_segments():
    """By hand: per_step + (per_sample + per_segment) * S + per_token * N + attention * sum(l**2)
    + working_set * N**2, N the capacity rounded to the tile."""
    segments = [300, 200, 100]
    n = 1024.0  # 1,000 rounded to the 64 tile
    m = RICH_MODEL
    want = (
        m.per_step
        + (m.per_sample + m.per_segment) * 3
        + m.per_token * n
        + m.attention * sum(v * v for v in segments)
        + m.working_set * n * n
    )
    got = step_seconds(m, [3], [0], BatchRule(max_tokens=1000), square_sum=[140_000], row_tokens=1000)
    assert got.tolist() == [pytest.approx(want, rel=1e-14)]
    with pytest.raises(ValueError, match="row_tokens"):
        step_seconds(m, [3], [0], BatchRule(max_tokens=1000), square_sum=[140_000])


def test_the_exact_epochs_are_their_batches_priced_one_by_one():
    """``sorted`` by brute force over its batches; ``packing`` over the rows of first fit
    decreasing."""
    lengths = np.random.default_rng(8).integers(1, 900, 500)
    hist = LengthHistogram.from_lengths(lengths)
    rule = BatchRule(batch_size=7, pad_to_multiple_of=16)
    ordered = np.sort(lengths)
    batches = [ordered[i : i + 7] for i in range(0, ordered.size, 7)]
    want = math.fsum(RICH_MODEL.predict(len(b), -(-int(b.max()) // 16) * 16) for b in batches)
    assert expected_epoch_time(hist, RICH_MODEL, "sorted", rule) == pytest.approx(want, rel=1e-12)
    bins, sizes, counts = ffd_plan(hist, 2048)
    rows = {}
    for b, v, c in zip(bins.tolist(), sizes.tolist(), counts.tolist(), strict=True):
        rows.setdefault(b, []).extend([v] * c)
    by_hand = math.fsum(
        RICH_MODEL.predict_packed([len(r)], [sum(v * v for v in r)], [2048])[0] for r in rows.values()
    )
    seconds, n_rows = packed_epoch_seconds(hist, RICH_MODEL, 2048)
    assert n_rows == len(rows) and seconds == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize(
    "rule", [BatchRule(batch_size=6, pad_to_multiple_of=8), BatchRule(max_tokens=6000, pad_to_multiple_of=64)]
)
def test_the_optimisers_time_objective_is_the_epochs_price(rule):
    """The optimiser's compiled objective (per-sample weights from the same parts) is the exact
    expected epoch of the priced batches, less the ``per_sample`` seconds no edge changes."""
    hist = LengthHistogram.from_lengths(np.random.default_rng(9).integers(1, 3000, 2_000))
    plan = optimize_edges(hist, 3, rule, step_time=RICH_MODEL)
    seconds = expected_epoch_time(hist, RICH_MODEL, "bucketed", rule, edges=plan.edges)
    assert plan.objective + RICH_MODEL.per_sample * hist.n_samples == pytest.approx(seconds, rel=1e-9)
