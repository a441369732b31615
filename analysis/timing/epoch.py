"""The exact expected seconds of an epoch: a fitted step-time model applied to the
closed-form strategies (``sorted``, ``random``, ``bucketed``), from the histogram alone, each
batch priced as :func:`analysis.timing.price.step_seconds` prices it (a shuffle's expectation
from the same per-sample parts, :meth:`StepTimeModel.sample_seconds_parts`).

The simulated strategies' seconds (every batch of simulated epochs priced by the same model)
and the tokens/s tables built on both are :mod:`analysis.answers.throughput`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from analysis.batching import BatchRule, as_rule, bucket_bounds, check_edges, round_up
from analysis.lengths import LengthHistogram, as_histogram
from analysis.padding.order_stats import expected_batch_sum
from analysis.padding.waste import EXACT_STRATEGIES
from analysis.timing.price import step_seconds
from analysis.timing.step_time import StepTimeModel, check_model

__all__ = ["expected_epoch_time"]


def _sorted_batches(hist: LengthHistogram, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Sizes and longest samples of the ``sorted`` strategy's batches (deterministic)."""
    n = hist.n_samples
    n_batches = -(-n // size)
    last = np.minimum(np.arange(1, n_batches + 1, dtype=np.int64) * size, n) - 1
    longest = hist.lengths[np.searchsorted(hist.cumulative_counts(), last, side="right")]
    sizes = np.full(n_batches, size, dtype=np.int64)
    sizes[-1] = n - size * (n_batches - 1)
    return sizes, longest


def _bucketed_seconds(
    hist: LengthHistogram, model: StepTimeModel, edges: list[int], rule: BatchRule
) -> float:
    """Exact expected seconds of a bucketed shuffle on validated ``edges`` (one rank)."""
    alone, per_b = model.sample_seconds_parts(round_up(hist.lengths, rule.pad_to_multiple_of))
    total = []
    for lo, hi, size in zip(*bucket_bounds(hist.lengths, edges), rule.batch_sizes(edges), strict=True):
        if lo == hi:
            continue
        cum = np.cumsum(hist.counts[lo:hi])
        n = int(cum[-1])
        total.append(model.per_step * -(-n // size) + model.per_sample * n)
        total.append(expected_batch_sum(alone[lo:hi], cum, size, per_b[lo:hi]))
    return math.fsum(total)


def expected_epoch_time(
    hist: LengthHistogram | Sequence[int] | np.ndarray,
    model: StepTimeModel,
    strategy: str = "bucketed",
    rule: BatchRule | None = None,
    *,
    edges: Sequence[int] | None = None,
) -> float:
    """Exact expected seconds of one epoch of ``sorted``, ``random`` or ``bucketed`` (one rank).

    ``bucketed`` (needs ``edges``): per bucket of ``n`` samples and batch size ``B`` (from the
    rule), ``per_step * ceil(n/B) + per_sample * n`` plus the expected sum over its batches of
    ``B * g_B(longest)`` (:meth:`StepTimeModel.sample_seconds`; order statistics of a
    shuffle: full batches and the partial one, as in :func:`~analysis.padding.waste.expected_padding`; ``T``
    rounds the longest up to ``pad_to_multiple_of`` and then to the model's ``tile``).
    ``random`` is one bucket; ``sorted`` is deterministic.  Both use one batch size for the
    epoch (``rule.fixed_batch_size``).

    Examples
    --------
    >>> model = StepTimeModel(per_step=1.0, per_token=0.1)
    >>> rule = BatchRule(batch_size=2)
    >>> round(expected_epoch_time([1, 1, 3], model, "random", rule), 12)  # 2 + 0.1 * 19/3
    2.633333333333
    >>> round(expected_epoch_time([1, 1, 3], model, "sorted", rule), 12)  # {1,1} {3}: 2 + 0.1 * 5
    2.5
    """
    model = check_model(model)
    hist = as_histogram(hist)
    rule = as_rule(rule)
    if strategy not in EXACT_STRATEGIES:
        raise ValueError(
            f"no exact expected time for {strategy!r}; choose one of "
            f"{', '.join(EXACT_STRATEGIES)} (or use simulated_epoch_times)"
        )
    if strategy == "bucketed":
        if edges is None:
            raise ValueError("strategy 'bucketed' needs edges")
        return _bucketed_seconds(hist, model, check_edges(edges, hist), rule)
    fixed = BatchRule(rule.fixed_batch_size(hist.max), None, rule.pad_to_multiple_of)
    if strategy == "random":
        return _bucketed_seconds(hist, model, [hist.min - 1, hist.max], fixed)
    assert fixed.batch_size is not None
    sizes, longest = _sorted_batches(hist, fixed.batch_size)
    return math.fsum(step_seconds(model, sizes, longest, rule).tolist())
