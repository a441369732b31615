"""Pack or pad: every padded strategy and every packer priced on your hardware, the winner, and
the batch size (or token budget) at which the answer flips.

:func:`pack_or_pad` runs :func:`~analysis.predict_strategy_throughput` over padded and packed
strategies (one table: tokens/s, seconds per epoch) and sweeps the batch rule's size over
powers of two around yours: at each size, the best exact padded strategy (``sorted``,
``random``, ``bucketed`` on your edges, :func:`~analysis.expected_epoch_time`) against
first-fit-decreasing packing into rows of that size's token budget, priced exactly from its
row count (one rank: each row priced by :func:`analysis.timing.price.step_seconds`, so a packed
epoch costs ``per_step * rows + (per_sample + per_segment) * n + (per_token * T(C) +
working_set * T(C)**2) * rows + attention * sum(l**2)``, whatever packs the rows).
:mod:`analysis.narrative.packing` says it in a sentence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis._validate import check_rng
from analysis.answers.throughput import DEFAULT_STRATEGIES, predict_strategy_throughput
from analysis.batching import BatchRule, as_rule
from analysis.lengths import LengthHistogram, as_histogram
from analysis.padding.waste import EXACT_STRATEGIES
from analysis.simulation.strategies import PACKED_STRATEGIES, ffd_plan
from analysis.timing.epoch import expected_epoch_time
from analysis.timing.price import step_seconds
from analysis.timing.step_time import StepTimeModel

__all__ = ["PackOrPad", "pack_or_pad", "packed_epoch_seconds"]

#: Powers of two the sweep multiplies the rule's size by.
_FACTORS = tuple(2.0**k for k in range(-6, 7))


def packed_epoch_seconds(hist: LengthHistogram, model: StepTimeModel, max_tokens: int) -> tuple[float, int]:
    """Exact seconds of one epoch (one rank) of ``packing`` (first fit decreasing) into rows of
    ``max_tokens``, and its row count.

    Examples
    --------
    >>> hist = LengthHistogram.from_lengths([6, 5, 4, 3, 2])
    >>> packed_epoch_seconds(hist, StepTimeModel(per_step=1.0, attention=0.01), 10)  # 2 rows
    (2.9, 2)
    """
    bins, lengths, counts = ffd_plan(hist, max_tokens)
    rows = int(bins.max()) + 1
    samples = np.bincount(bins, weights=counts, minlength=rows)
    squares = np.bincount(bins, weights=counts * lengths.astype(float) ** 2, minlength=rows)
    rule = BatchRule(max_tokens=max_tokens)
    seconds = step_seconds(model, samples, 0, rule, square_sum=squares, row_tokens=max_tokens)
    return math.fsum(seconds.tolist()), rows


def _scaled(rule: BatchRule, factor: float) -> BatchRule | None:
    if rule.batch_size is not None:
        size = int(rule.batch_size * factor)
        return (
            BatchRule(size, None, rule.pad_to_multiple_of)
            if size >= 1 and size == rule.batch_size * factor
            else None
        )
    assert rule.max_tokens is not None
    budget = int(rule.max_tokens * factor)
    return BatchRule(None, budget, rule.pad_to_multiple_of) if budget >= 1 else None


def _sweep(hist: LengthHistogram, model: StepTimeModel, rule: BatchRule, edges: list[int]) -> pd.DataFrame:
    rows = []
    for factor in _FACTORS:
        scaled = _scaled(rule, factor)
        if scaled is None or scaled.token_budget(hist.max) < hist.max:
            continue
        padded = {
            name: expected_epoch_time(hist, model, name, scaled, edges=edges) for name in EXACT_STRATEGIES
        }
        best = min(padded, key=padded.__getitem__)
        packed, n_rows = packed_epoch_seconds(hist, model, scaled.token_budget(hist.max))
        rows.append(
            {
                "batch_size": scaled.batch_size,
                "max_tokens": scaled.max_tokens,
                "token_budget": scaled.token_budget(hist.max),
                "best_padded": best,
                "padded_tokens_per_s": hist.total_tokens / padded[best],
                "packed_tokens_per_s": hist.total_tokens / packed,
                "packed_rows": n_rows,
            }
        )
    out = pd.DataFrame(rows)
    out["packing_wins"] = out["packed_tokens_per_s"] > out["padded_tokens_per_s"]
    return out


@dataclass(frozen=True, eq=False)
class PackOrPad:
    """The answer: ``table`` (:func:`~analysis.predict_strategy_throughput`, padded and packed
    rows, with a ``packed`` column), ``sweep`` (one row per batch size or token budget:
    ``batch_size``, ``max_tokens``, ``token_budget``, ``best_padded``,
    ``padded_tokens_per_s``, ``packed_tokens_per_s``, ``packed_rows``, ``packing_wins``) and
    the ``rule`` priced."""

    table: pd.DataFrame
    sweep: pd.DataFrame
    rule: BatchRule

    def _best(self, packed: bool) -> str:
        part = self.table[self.table["packed"] == packed]
        return str(part["tokens_per_s"].idxmax())

    @property
    def best_padded(self) -> str:
        """The fastest padded strategy of the table."""
        return self._best(False)

    @property
    def best_packed(self) -> str:
        """The fastest packer of the table."""
        return self._best(True)

    @property
    def packing_wins(self) -> bool:
        """Whether the fastest packer beats the fastest padded strategy here."""
        t = self.table["tokens_per_s"]
        return bool(t[self.best_packed] > t[self.best_padded])

    @property
    def speedup(self) -> float:
        """The winner's tokens/s over the loser's (>= 1)."""
        t = self.table["tokens_per_s"]
        a, b = float(t[self.best_packed]), float(t[self.best_padded])
        return max(a, b) / min(a, b)

    @property
    def flip(self) -> pd.Series | None:
        """The sweep's row nearest to the rule where the sweep's winner differs from the
        winner at the rule's own size (None when it never does over the sweep)."""
        here = self.sweep["token_budget"] == self.rule_budget
        if not here.any():
            return None
        at = int(np.flatnonzero(here.to_numpy())[0])
        wins = self.sweep["packing_wins"].to_numpy()
        other = np.flatnonzero(wins != wins[at])
        if other.size == 0:
            return None
        return self.sweep.iloc[int(other[np.argmin(np.abs(other - at))])]

    @property
    def rule_budget(self) -> int:
        """The token budget of the rule priced (a packed row's capacity)."""
        return int(self.sweep.attrs["rule_budget"])


# Deliberately the signature of predict_strategy_throughput (answers/throughput.py): both are
# public entry points, and a public entry point takes the batch rule as a BatchRule or as its
# keywords, the lengths, the model, the edges and an rng, in the same order and spelling.
def pack_or_pad(
    lengths: LengthHistogram | Sequence[int] | np.ndarray,
    model: StepTimeModel,
    rule: BatchRule | None = None,
    *,
    edges: Sequence[int],
    rng: np.random.Generator,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    epochs: int = 3,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    table: pd.DataFrame | None = None,
) -> PackOrPad:
    """Price padded and packed strategies on ``model`` and sweep the rule's size.

    ``table``: a :func:`~analysis.predict_strategy_throughput` frame already computed for
    these lengths, model, rule and edges (``TimeRecommendation.strategies``), used instead of
    pricing the strategies again (``strategies``, ``epochs`` and ``rng`` then unused).

    Examples
    --------
    >>> lengths = np.random.default_rng(0).integers(10, 500, size=400)
    >>> model = StepTimeModel(per_step=0.05, per_token=1e-5, attention=1e-8, per_segment=1e-4)
    >>> res = pack_or_pad(lengths, model, batch_size=8, edges=[0, 100, 250, 499],
    ...                   rng=np.random.default_rng(1), epochs=1)
    >>> res.best_padded, res.best_packed, res.packing_wins
    ('token_budget', 'packing', True)
    """
    check_rng(rng)
    hist = as_histogram(lengths)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    names = list(strategies) if table is None else [str(n) for n in table.index]
    if not any(n in PACKED_STRATEGIES for n in names) or all(n in PACKED_STRATEGIES for n in names):
        raise ValueError("pack_or_pad needs at least one padded and one packed strategy")
    if table is None:
        table = predict_strategy_throughput(
            lengths,
            model,
            rule,
            edges=edges,
            rng=rng,
            strategies=names,
            epochs=epochs,
            reference=next(n for n in names if n not in PACKED_STRATEGIES),
        )
    table = table.copy()
    table.insert(1, "packed", [name in PACKED_STRATEGIES for name in table.index])
    sweep = _sweep(hist, model, rule, [int(e) for e in edges])
    sweep.attrs["rule_budget"] = rule.token_budget(hist.max)
    return PackOrPad(table, sweep, rule)
