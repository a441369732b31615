"""Sentences about the padding-mixing trade-off (notebook 02, the report's summary page and the
CLI say it the same way): what the best bucketed plan keeps at an efficiency, beside the Hugging
Face Trainer's length grouping, and what a floor chose.  They read results
(:class:`analysis.answers.tradeoff.TradeOff`, a plan's :class:`~analysis.optimize.FloorChoice`)
and compute nothing.

"Mixing" is the share of the data's length variance a batch keeps
(:mod:`analysis.padding.mixing`); the within-batch CV of the simulator is "spread".
"""

from __future__ import annotations

import math

from analysis.answers.tradeoff import TradeOff
from analysis.optimize import BucketPlan
from analysis.tables import format_percent

__all__ = ["frontier_sentence", "floor_sentence"]

#: What "mixing" means, said where no Trainer row carries the sentence.
MIXING = "mixing: the share of the data's length variance a batch keeps"


def frontier_sentence(trade: TradeOff) -> str:
    """ "At X % efficiency, the best plan keeps Y % of the mixing; the Trainer's length grouping
    keeps Z %": ``X`` is the trade-off's target (a floor, or the Trainer's own efficiency, so both
    plans pad alike); under a token budget every efficiency is the steps' budget fill.  When a
    full shuffle (K = 1) already reaches ``X``, the sentence says so, and what the most efficient
    bucketed plan gives instead (a sentence that a full shuffle "keeps 100%" would say nothing).

    Examples
    --------
    >>> import textwrap
    >>> import numpy as np
    >>> from analysis import LengthHistogram, frontier
    >>> from analysis.answers.tradeoff import read_tradeoff
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 300, 600))
    >>> res = frontier(hist, batch_size=4, rng=np.random.default_rng(0), n_buckets=4, n_lambdas=2,
    ...                simulate_strategies=False)
    >>> print(textwrap.fill(frontier_sentence(read_tradeoff(res, min_efficiency=0.8)), 90))
    At 80.0% efficiency or more, the best bucketed plan (K = 3, 83.8%) keeps 10.8% of the
    mixing (mixing: the share of the data's length variance a batch keeps).
    >>> print(textwrap.fill(frontier_sentence(read_tradeoff(res, min_efficiency=0.2)), 90))
    A full shuffle (K = 1, 63.3%) already reaches 20.0% efficiency and keeps all the mixing;
    the most efficient bucketed plan (K = 4, 87.4%) keeps 6.1% (mixing: the share of the
    data's length variance a batch keeps).
    """
    word = "budget fill" if trade.measure == "budget_fill" else "efficiency"
    x = format_percent(trade.target, "prose")
    best, top = trade.best, trade.most_efficient
    if best is None:
        text = f"No bucketed plan reaches {x} {word}"
    elif best.n_buckets == 1:
        text = (
            f"A full shuffle (K = 1, {format_percent(best.reached, 'prose')}) already reaches {x} {word} "
            f"and keeps all the mixing; the most efficient bucketed plan (K = {top.n_buckets}, "
            f"{format_percent(top.reached, 'prose')}) keeps {format_percent(top.mixing, 'prose')}"
        )
    else:
        bound = "" if best.bound is None else f", at most {format_percent(best.bound, 'prose')} possible"
        text = (
            f"At {x} {word} or more, the best bucketed plan (K = {best.n_buckets}, "
            f"{format_percent(best.reached, 'prose')}) keeps {format_percent(best.mixing, 'prose')} of the "
            f"mixing{bound}"
        )
    t = trade.trainer
    if t is None:
        return f"{text} ({MIXING})."
    err = "" if not math.isfinite(t.mixing_se) else f" ± {format_percent(t.mixing_se, 'error')}"
    return (
        f"{text}; the Trainer's length grouping keeps {format_percent(t.mixing, 'prose')}{err} at "
        f"{format_percent(t.reached, 'prose')} (lag-1 autocorrelation {t.lag1_autocorr:.2f})."
    )


def _same(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return all(math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15) for x, y in zip(a, b, strict=True))


def floor_sentence(plan: BucketPlan) -> str | None:
    """What a frontier floor chose, what it proves, and the next frontier point beyond it (what
    it would cost or gain), or that there is none (None for a plan placed without a floor).

    Examples
    --------
    >>> import textwrap
    >>> from analysis import LengthHistogram, optimize_edges
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> print(textwrap.fill(floor_sentence(optimize_edges(hist, 2, batch_size=4, min_efficiency=0.7)), 90))
    --min-efficiency 70%: mixing 42.88% (at most 55.93% is possible); the next frontier point
    keeps 72.18% at 64.39% efficiency.

    When the plan with the most mixing already meets the floor, there is no point beyond it:

    >>> print(textwrap.fill(floor_sentence(optimize_edges(hist, 2, batch_size=4, min_efficiency=0.1)), 90))
    --min-efficiency 10%: mixing 72.18% (the most any plan meeting it keeps); no frontier point
    keeps more mixing.
    """
    f = plan.floor
    if f is None:
        return None
    point = (plan.efficiency, plan.mixing)
    other = f.above if f.floor == "min_efficiency" else f.below
    eff, mix = format_percent(other[0]), format_percent(other[1])
    value = f"{100 * f.value:g}%"  # the floor as the user gave it
    if f.floor == "min_efficiency":
        proof = (
            "the most any plan meeting it keeps"
            if f.exact
            else f"at most {format_percent(f.bound)} is possible"
        )
        beyond = (
            "no frontier point keeps more mixing"
            if _same(other, point)
            else f"the next frontier point keeps {mix} at {eff} efficiency"
        )
        return f"--min-efficiency {value}: mixing {format_percent(plan.mixing)} ({proof}); {beyond}."
    proof = "proven best" if f.exact else f"the best plan pads at least {f.bound:,.0f}"
    beyond = (
        "no frontier point is more efficient"
        if _same(other, point)
        else f"the next frontier point reaches {eff} efficiency keeping {mix}"
    )
    return f"--min-mixing {value}: efficiency {format_percent(plan.efficiency)} ({proof}); {beyond}."
