"""Tokens/s of every strategy on your hardware: exact epochs and simulated ones, priced by a
fitted step-time model.

A fitted :class:`~analysis.timing.step_time.StepTimeModel` is linear in its coefficients, so the
expected time of an epoch is exact from the same order statistics as
:func:`analysis.padding.waste.expected_padding`: a bucket of ``n`` samples cut into batches of ``B`` costs
``per_step * ceil(n / B) + per_sample * n + E[sum over batches of B * g_B(longest)]`` with
``g_B(L) = per_token * T(L) + (attention + working_set * B) * T(L)**2``
(:meth:`~analysis.timing.step_time.StepTimeModel.sample_seconds`)
(:func:`expected_epoch_time`, for ``sorted``, ``random`` and ``bucketed``).  Other strategies
are priced batch by batch over simulated epochs (:func:`simulated_epoch_times`, each batch by
:func:`analysis.timing.price.step_seconds`; a packed row of the ``packing*`` strategies as a
packed step: attention within each sample); with
``world_size > 1`` a step lasts as long as its slowest rank.
:func:`predict_strategy_throughput` puts both beside the padded-token prediction
(:mod:`analysis.timing.proportional`), and :func:`sweep_throughput` prices the optimal edges of both
objectives (padding, and time: ``optimize_edges(..., step_time=model)``) for every K.

Nothing here reads a file or imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis._validate import known_name, positive_int
from analysis.batching import BatchRule, as_rule, bucket_bounds, check_edges
from analysis.lengths import LengthHistogram, as_histogram
from analysis.optimize import sweep_bucket_counts
from analysis.padding.waste import EXACT_STRATEGIES, exact_padding
from analysis.simulation.epochs import simulate
from analysis.simulation.strategies import ALL_STRATEGIES, PACKED_STRATEGIES, strategy_rule
from analysis.timing.epoch import expected_epoch_time
from analysis.timing.price import step_seconds
from analysis.timing.proportional import predict_from_reference
from analysis.timing.step_time import StepTimeModel, check_model

__all__ = [
    "simulated_epoch_times",
    "predict_strategy_throughput",
    "sweep_throughput",
    "DEFAULT_STRATEGIES",
]

#: The strategies predicted when none are named: every padded one and every packer.
DEFAULT_STRATEGIES = ALL_STRATEGIES


def _exact_step_sizes(
    hist: LengthHistogram, name: str, rule: BatchRule, edges: list[int]
) -> dict[str, float]:
    """Rows (= samples) per step of an exact strategy: their mean and CV (population)."""
    if name == "bucketed":
        counts = [int(hist.counts[lo:hi].sum()) for lo, hi in zip(*bucket_bounds(hist.lengths, edges))]
        sizes = list(rule.batch_sizes(edges))
    else:
        counts, sizes = [hist.n_samples], [rule.fixed_batch_size(hist.max)]
    steps = squares = 0
    for n, b in zip(counts, sizes, strict=True):
        full, rest = divmod(n, b)
        steps += full + (rest > 0)
        squares += full * b * b + rest * rest
    mean = hist.n_samples / steps
    cv = math.sqrt(max(squares / steps - mean * mean, 0.0)) / mean
    return {"rows_per_step": mean, "samples_per_step": mean, "samples_per_step_cv": cv}


def batch_seconds(
    model: StepTimeModel, batches: pd.DataFrame, strategy: str, rule: BatchRule, longest: int
) -> np.ndarray:
    """The seconds of each batch of a simulated epoch (``SimulationResult.batches``) of
    ``strategy`` under ``rule`` on data whose longest sample is ``longest``: a padded batch
    as its size and longest, a packed row (the ``packing*`` strategies) as a row of the token
    budget holding its samples as segments (:func:`analysis.timing.price.step_seconds`).

    Examples
    --------
    >>> frame = pd.DataFrame({"size": [2, 3], "longest": [10, 4], "square_sum": [136.0, 48.0]})
    >>> batch_seconds(StepTimeModel(per_token=0.1), frame, "sorted", BatchRule(batch_size=2), 10).tolist()
    [2.0, 1.2000000000000002]
    >>> batch_seconds(StepTimeModel(per_token=0.1), frame, "packing", BatchRule(max_tokens=20), 10).tolist()
    [2.0, 2.0]
    """
    size = batches["size"].to_numpy()
    if strategy in PACKED_STRATEGIES:
        budget = rule.token_budget(longest)  # as the simulated builder's
        return step_seconds(
            model, size, 0, rule, square_sum=batches["square_sum"].to_numpy(), row_tokens=budget
        )
    return step_seconds(model, size, batches["longest"].to_numpy(), rule)


def simulated_epoch_times(
    lengths: LengthHistogram | Sequence[int] | np.ndarray,
    model: StepTimeModel,
    strategy: str,
    rule: BatchRule | None = None,
    *,
    rng: np.random.Generator,
    epochs: int = 3,
    world_size: int = 1,
    edges: Sequence[int] | None = None,
    sync_buckets: bool = True,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
) -> pd.DataFrame:
    """Seconds and useful tokens of simulated epochs, the model applied to every batch.

    The epochs are :func:`~analysis.simulate`'s (same rule, ``edges``, ``world_size``,
    ``sync_buckets``).  A step lasts as long as its slowest rank's batch.  A packed row (the
    ``packing*`` strategies) is priced as a packed step: the token budget's tokens, its
    samples as segments, attention within each (:meth:`StepTimeModel.predict_packed`).

    Returns
    -------
    pandas.DataFrame
        Index ``epoch``; columns ``seconds``, ``useful_tokens``, ``padded_tokens``, ``steps``,
        ``tokens_per_s``, ``samples_per_step`` (mean) and ``samples_per_step_cv``.

    Examples
    --------
    >>> model = StepTimeModel(per_step=1.0, per_token=0.1)
    >>> out = simulated_epoch_times([1, 2, 3, 4], model, "sorted", rng=np.random.default_rng(0),
    ...                             epochs=2, batch_size=2)
    >>> out["seconds"].round(12).tolist()  # 2 steps + 0.1 * (2 * 2 + 2 * 4)
    [3.2, 3.2]
    """
    model = check_model(model)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    res = simulate(
        lengths,
        strategy,
        rule,
        rng=rng,
        epochs=epochs,
        world_size=world_size,
        edges=edges,
        sync_buckets=sync_buckets,
    )
    batches = res.batches
    seconds = batch_seconds(model, batches, strategy, rule, as_histogram(lengths).max)
    steps = pd.DataFrame({"epoch": batches["epoch"], "step": batches["step"], "seconds": seconds})
    per_step = steps.groupby(["epoch", "step"])["seconds"].max()
    samples = batches.groupby(["epoch", "step"])["size"].sum().astype(float).groupby(level="epoch")
    out = pd.DataFrame(
        {
            "seconds": per_step.groupby(level="epoch").sum(),
            "useful_tokens": res.epochs["useful_tokens"].astype(float),
            "padded_tokens": res.epochs["padded_tokens"].astype(float),
            "steps": per_step.groupby(level="epoch").size(),
        }
    )
    out["tokens_per_s"] = out["useful_tokens"] / out["seconds"]
    out["samples_per_step"] = samples.mean()
    out["samples_per_step_cv"] = samples.std(ddof=0) / samples.mean()
    out.index.name = "epoch"
    return out


def predict_strategy_throughput(
    lengths: LengthHistogram | Sequence[int] | np.ndarray,
    model: StepTimeModel,
    rule: BatchRule | None = None,
    *,
    edges: Sequence[int],
    rng: np.random.Generator,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    world_size: int = 1,
    epochs: int = 3,
    reference: str = "sorted",
    reference_tokens_per_s: float | None = None,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
) -> pd.DataFrame:
    """Predicted useful tokens/s of each strategy, padded and packed in one table: the
    step-time model beside padded tokens.

    By default every strategy (:data:`DEFAULT_STRATEGIES`): the padded ones and the four
    packers, whose rows of the token budget are priced as packed steps (attention within
    each sample).  ``sorted``, ``random`` and ``bucketed`` are exact (:func:`expected_epoch_time`) when
    ``world_size == 1``; the others, and every strategy when ``world_size > 1`` (a step waits
    for its slowest rank), come from ``epochs`` simulated epochs
    (:func:`simulated_epoch_times`; tokens/s is pooled over them, ``tokens_per_s_se`` is the
    standard error across epochs).  Each strategy reads the rule as
    :func:`~analysis.compare_strategies` does (the token strategies get
    ``rule.token_budget(longest)``); ``batch_rule`` says what each row used.

    The padded-token prediction (:func:`~analysis.predict_throughput`) scales the
    ``reference`` strategy's tokens/s by efficiency; that reference is
    ``reference_tokens_per_s`` when given (a measured run), else the step-time model's own
    prediction for it.

    Returns
    -------
    pandas.DataFrame
        Index ``strategy``; columns ``batch_rule``, ``exact``, ``batches``, ``useful_tokens``,
        ``efficiency`` (useful tokens over padded ones; a packed row's are its capacity),
        ``seconds`` (per epoch, all ranks in parallel), ``tokens_per_s``, ``tokens_per_s_se``
        (0 when exact), ``rows_per_step`` (per rank: the batch size of a padded strategy, 1
        for a packed one), ``samples_per_step`` (all ranks) and ``samples_per_step_cv`` (their
        spread over steps), ``padded_tokens_per_s``.

    Examples
    --------
    >>> model = StepTimeModel(per_step=0.05, per_token=1e-5, attention=1e-8)
    >>> lengths = np.random.default_rng(0).integers(10, 500, size=300)
    >>> table = predict_strategy_throughput(lengths, model, edges=[0, 100, 250, 499],
    ...     batch_size=8, strategies=["sorted", "random", "bucketed"], rng=np.random.default_rng(1))
    >>> table[["exact", "tokens_per_s", "padded_tokens_per_s"]].round(-1)
              exact  tokens_per_s  padded_tokens_per_s
    strategy
    sorted     True       26680.0              26680.0
    random     True       20660.0              16060.0
    bucketed   True       24010.0              21420.0
    """
    model = check_model(model)
    hist = as_histogram(lengths)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    edges = check_edges(edges, hist)
    world_size = positive_int(world_size, "world_size")
    names = list(strategies)
    for name in names:
        known_name(name, ALL_STRATEGIES, "strategy")
    if reference not in names:
        raise ValueError(f"reference {reference!r} is not among the strategies")
    rows: list[dict[str, Any]] = []
    for name in names:
        label = strategy_rule(name, rule, hist.max).text
        if world_size == 1 and name in EXACT_STRATEGIES:
            seconds = expected_epoch_time(hist, model, name, rule, edges=edges)
            est = exact_padding(hist, name, rule, edges)
            rows.append(
                {
                    "strategy": name,
                    "batch_rule": label,
                    "exact": True,
                    "batches": float(est.n_batches),
                    "useful_tokens": float(hist.total_tokens),
                    "efficiency": float(est.efficiency),
                    "seconds": seconds,
                    "tokens_per_s": hist.total_tokens / seconds,
                    "tokens_per_s_se": 0.0,
                    **_exact_step_sizes(hist, name, rule, edges),
                }
            )
            continue
        sim = simulated_epoch_times(
            lengths,
            model,
            name,
            rule,
            rng=rng,
            epochs=epochs,
            world_size=world_size,
            edges=edges if name == "bucketed" else None,
        )
        se = float(sim["tokens_per_s"].std(ddof=1) / math.sqrt(len(sim))) if len(sim) > 1 else float("nan")
        spp = sim["samples_per_step"].mean()
        rows.append(
            {
                "strategy": name,
                "batch_rule": label,
                "exact": False,
                "batches": float(sim["steps"].mean() * world_size),
                "useful_tokens": float(sim["useful_tokens"].mean()),
                "efficiency": float(sim["useful_tokens"].sum() / sim["padded_tokens"].sum()),
                "seconds": float(sim["seconds"].mean()),
                "tokens_per_s": float(sim["useful_tokens"].sum() / sim["seconds"].sum()),
                "tokens_per_s_se": se,
                "rows_per_step": 1.0 if name in PACKED_STRATEGIES else float(spp) / world_size,
                "samples_per_step": float(spp),
                "samples_per_step_cv": float(sim["samples_per_step_cv"].mean()),
            }
        )
    table = pd.DataFrame(rows).set_index("strategy")
    ref = rows[names.index(reference)]
    table["padded_tokens_per_s"] = predict_from_reference(
        names,
        table["efficiency"].to_numpy(dtype=float),
        reference=reference,
        reference_tokens_per_s=float(
            ref["tokens_per_s"] if reference_tokens_per_s is None else reference_tokens_per_s
        ),
    )
    return table


def sweep_throughput(
    hist: LengthHistogram,
    model: StepTimeModel,
    n_buckets: Iterable[int] = range(1, 9),
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    candidates: int | str | None = "auto",
) -> pd.DataFrame:
    """Predicted tokens/s against the number of buckets, for optimal edges of two objectives.

    For each ``K`` in ``n_buckets``: the edges minimising padding and the edges minimising
    expected time under ``model`` (:func:`~analysis.sweep_bucket_counts` with ``step_time``;
    one DP pass each), both priced exactly by :func:`expected_epoch_time`.

    Returns
    -------
    pandas.DataFrame
        Columns ``n_buckets``, ``objective`` (``"padding"`` or ``"time"``), ``edges``,
        ``efficiency``, ``seconds``, ``tokens_per_s``.

    Examples
    --------
    >>> hist = LengthHistogram.from_counts([10, 20, 200, 400], [30, 30, 20, 20])
    >>> model = StepTimeModel(per_step=0.5, per_token=1e-3, attention=1e-5)
    >>> sweep_throughput(hist, model, [1, 2], batch_size=4)[["n_buckets", "objective", "edges"]]
       n_buckets objective          edges
    0          1   padding       [0, 400]
    1          1      time       [0, 400]
    2          2   padding   [0, 20, 400]
    3          2      time  [0, 200, 400]
    """
    model = check_model(model)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    ks = list(n_buckets)
    sweeps = {
        objective: sweep_bucket_counts(  # "padding" as named, under a token budget too
            hist,
            ks,
            ["optimal"],
            rule,
            candidates=candidates,
            step_time=step_time,
            objective=None if step_time else "padding",
        )
        for objective, step_time in (("padding", None), ("time", model))
    }
    rows = []
    for k in ks:
        for objective, sweep in sweeps.items():
            row = sweep[sweep["n_buckets"] == k].iloc[0]
            seconds = expected_epoch_time(hist, model, "bucketed", rule, edges=row["edges"])
            rows.append(
                {
                    "n_buckets": k,
                    "objective": objective,
                    "edges": row["edges"],
                    "efficiency": float(row["efficiency"]),
                    "seconds": seconds,
                    "tokens_per_s": hist.total_tokens / seconds,
                }
            )
    return pd.DataFrame(rows)
