"""What a team would otherwise run under a token budget: dynamic batching (``token_budget``) and
packing, each with its steps per epoch and the mixing it keeps; the honest baselines of a
bucketed plan under ``max_tokens`` (a full shuffle's one batch size must fit the longest sample,
which nobody runs under a token budget)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.simulation.epochs import compare_strategies

__all__ = ["BUDGET_BASELINES", "budget_baselines"]

#: The strategies a bucketed plan under a token budget is compared with.
BUDGET_BASELINES = ("token_budget", "packing")


def budget_baselines(
    hist: LengthHistogram,
    rule: BatchRule,
    *,
    rng: np.random.Generator,
    edges: Sequence[int],
    epochs: int,
    world_size: int = 1,
) -> pd.DataFrame | None:
    """Dynamic batching and packing under ``rule``'s token budget: their rows of notebook 02's
    table, the same simulation (:func:`analysis.compare_strategies` of every strategy in order
    from ``rng``, the bucketed one on ``edges``, for ``epochs`` epochs on ``world_size`` ranks:
    given a generator seeded alike, the same floats), with their ``batches`` per epoch (each
    batch one step of one rank, the unit of a plan's ``n_batches``; the table's ``steps`` with
    one rank, ``world_size`` times them with more), ``efficiency`` and ``mixing``; None without
    a token budget.

    Examples
    --------
    >>> h = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 100, 300))
    >>> rule, edges = BatchRule(max_tokens=400), [0, 50, 99]
    >>> base = budget_baselines(h, rule, rng=np.random.default_rng(0), edges=edges, epochs=2)
    >>> list(base.index), list(base.columns)
    (['token_budget', 'packing'], ['batches', 'efficiency', 'mixing'])
    >>> bool(base.loc["packing", "batches"] <= base.loc["token_budget", "batches"])
    True
    >>> table = compare_strategies(h, rule, rng=np.random.default_rng(0), edges=edges, epochs=2)
    >>> bool((table.loc[list(base.index), list(base.columns)] == base).all(axis=None))
    True
    >>> budget_baselines(h, BatchRule(8), rng=np.random.default_rng(0), edges=edges, epochs=2) is None
    True
    """
    if rule.max_tokens is None:
        return None
    table = compare_strategies(hist, rule, rng=rng, edges=edges, epochs=epochs, world_size=world_size)
    return table.loc[list(BUDGET_BASELINES), ["batches", "efficiency", "mixing"]]
