"""The computed sentence of the padding-mixing trade-off (notebook 02 and the report's summary
page say it the same way): what the best bucketed plan keeps at an efficiency, beside the
Hugging Face Trainer's length grouping."""

from __future__ import annotations

import math

import pandas as pd

from analysis.answers.frontier import Frontier
from analysis.lengths import LengthHistogram
from analysis.optimize import BucketPlan, Floor, optimize_edges
from analysis.tables import format_percent

__all__ = ["floor_sentence", "frontier_sentence", "TRAINER_LABEL"]

#: The row of the Trainer's default (``group_by_length`` without gradient accumulation).
TRAINER_LABEL = "length_grouped G=1"


def _best_bucketed(frame: pd.DataFrame, measure: str, floor: float) -> pd.Series | None:
    rows = frame[(frame["strategy"] == "bucketed") & (frame[measure] >= floor)]
    return None if rows.empty else rows.sort_values(["mixing", measure]).iloc[-1]


def frontier_sentence(
    result: Frontier, min_efficiency: float | None = None, hist: LengthHistogram | None = None
) -> str:
    """ "At X % efficiency, the best plan keeps Y % of the mixing; the Trainer's length grouping
    keeps Z %": ``X`` is ``min_efficiency``, or else the Trainer's own efficiency (so both
    plans pad alike); under a token budget every efficiency here is the steps' budget fill
    (the frontier's axis, what the edges are placed for, and what the floor reads); the best
    plan is the bucketed plan of the frontier with the most mixing at that efficiency or more,
    or, given the data ``hist``, the better of it and the floor search of
    :func:`analysis.optimize_edges` at the frontier's largest K (exact, with the bound it
    proves: the sweep's few lambdas can miss the hull vertex next to a floor).

    Examples
    --------
    >>> import textwrap
    >>> import numpy as np
    >>> from analysis import LengthHistogram, frontier
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 300, 600))
    >>> res = frontier(hist, batch_size=4, rng=np.random.default_rng(0), max_buckets=4, n_lambdas=2,
    ...                simulate_strategies=False)
    >>> print(textwrap.fill(frontier_sentence(res, 0.8), 90))
    At 80.0% efficiency or more, the best bucketed plan (K = 4, 83.8%) keeps 14.5% of the
    mixing (mixing: the share of the data's length variance a batch keeps).
    """
    frame = result.frame
    fill = result.axis == "budget_fill"
    measure, word = ("budget_fill", "budget fill") if fill else ("efficiency", "efficiency")
    trainer = frame[frame["label"] == TRAINER_LABEL]
    target = min_efficiency
    if target is None:
        if trainer.empty:
            raise ValueError("give min_efficiency: the frontier has no length_grouped row to compare with")
        target = float(trainer[measure].iloc[0])
    best = _best_bucketed(frame, measure, target)
    found = None if best is None else (int(best["n_buckets"]), float(best[measure]), float(best["mixing"]))
    bound = ""
    if hist is not None and best is not None:
        k_max = int(frame["n_buckets"].max())
        try:
            plan: BucketPlan | None = optimize_edges(hist, k_max, result.rule, floor=Floor(measure, target))
        except ValueError:  # the floor is out of reach at K = k_max (the sweep's plan stands)
            plan = None
        if plan is not None and plan.floor is not None and plan.mixing >= found[2]:  # type: ignore[index]
            reached = plan.budget_fill if fill and plan.budget_fill is not None else plan.efficiency
            found = (plan.n_buckets, reached, plan.mixing)
            if not plan.floor.exact:
                bound = f", at most {format_percent(plan.floor.bound, 1)} possible"
    x = format_percent(target, 1)
    if found is None:
        text = f"No bucketed plan reaches {x} {word}"
    else:
        k, eff, mix = found
        text = (
            f"At {x} {word} or more, the best bucketed plan (K = {k}, {format_percent(eff, 1)}) "
            f"keeps {format_percent(mix, 1)} of the mixing{bound}"
        )
    if not trainer.empty:
        t = trainer.iloc[0]
        se = float(t["mixing_se"])
        err = "" if not math.isfinite(se) else f" ± {format_percent(se, 1)}"
        text += (
            f"; the Trainer's length grouping keeps {format_percent(t['mixing'], 1)}{err} at "
            f"{format_percent(t[measure], 1)} (lag-1 autocorrelation {t['lag1_autocorr']:.2f})"
        )
    else:
        text += " (mixing: the share of the data's length variance a batch keeps)"
    return text + "."


def floor_sentence(plan: BucketPlan) -> str | None:
    """What a floor chose, whether it is proven best (or what bound is proven), and what the
    next frontier point would cost or gain, each measure named as the floor names it (None for
    a plan placed without a floor).

    Examples
    --------
    >>> import textwrap
    >>> from analysis import LengthHistogram, optimize_edges
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> print(textwrap.fill(floor_sentence(optimize_edges(hist, 2, batch_size=4, min_efficiency=0.7)), 90))
    --min-efficiency 70 %: mixing 42.88 % (proven the most any plan meeting it keeps); the next
    frontier point keeps 72.18 % at 64.39 % efficiency
    >>> print(textwrap.fill(floor_sentence(optimize_edges(hist, 3, max_tokens=24, min_mixing=0.3)), 90))
    --min-mixing 30 %: budget fill 52.08 % (proven best); the next frontier point reaches 57.87 %
    budget fill keeping 28.19 %
    >>> print(floor_sentence(optimize_edges(hist, 2, max_tokens=16, min_budget_fill=0.5)))
    --min-budget-fill 50 %: mixing 2.94 % (proven best: the plan with the most mixing meets it)
    """
    f = plan.floor
    if f is None:
        return None
    word = f.axis.replace("_", " ")
    grid = "" if f.grid is None else f" among the {f.grid:,} candidate edges searched"
    head = f"{f.floor.option} {100 * f.value:g} %"
    if f.searched == "hull":  # the end of the K-bucket frontier the floor asks for meets it
        what = "mixing" if f.measure != "mixing" else word
        value = plan.mixing if f.measure != "mixing" else f.below[0]
        end = "the most mixing" if f.measure != "mixing" else f"the best {word}"
        return f"{head}: {what} {100 * value:.2f} % (proven best: the plan with {end}{grid} meets it)"
    if f.measure != "mixing":
        other = f.above
        proof = (
            f"proven the most any plan meeting it keeps{grid}"
            if f.exact
            else f"at most {100 * f.reach:.2f} % is possible{grid}"
        )
        return (
            f"{head}: mixing {100 * plan.mixing:.2f} % ({proof}); the next frontier point keeps "
            f"{100 * other[1]:.2f} % at {100 * other[0]:.2f} % {word}"
        )
    other = f.below
    value = plan.budget_fill if f.axis == "budget_fill" and plan.budget_fill is not None else plan.efficiency
    if f.exact:
        proof = f"proven best{grid}"
    elif math.isfinite(f.reach):
        proof = f"at most {100 * f.reach:.2f} % is possible{grid}"
    else:
        proof = f"the best plan's objective is at least {f.bound:,.6g}{grid}"
    return (
        f"{head}: {word} {100 * value:.2f} % ({proof}); the next frontier point reaches "
        f"{100 * other[0]:.2f} % {word} keeping {100 * other[1]:.2f} %"
    )
