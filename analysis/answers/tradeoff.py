"""The trade-off a design review reads off the frontier, computed once for every face: at an
efficiency (a floor, or the Hugging Face Trainer's own), the bucketed plan that keeps the most
mixing, and where the Trainer's length grouping stands.

:func:`tradeoff` runs :func:`analysis.answers.frontier.frontier` with its defaults (one set of
settings: the summary page, notebook 02, the CLI's ``frontier`` and ``recommendation.json`` all
read this), then :func:`read_tradeoff` reads the answer off it, completed by the exact floor
search of :func:`analysis.optimize_edges` at the frontier's largest K (the sweep's few lambdas
can miss the hull vertex next to a floor).  The sentence is
:func:`analysis.narrative.frontier.frontier_sentence`, which computes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.answers.frontier import Frontier, frontier
from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.optimize import BucketPlan, Floor, optimize_edges

__all__ = ["TRAINER_LABEL", "BucketedPoint", "TrainerPoint", "TradeOff", "read_tradeoff", "tradeoff"]

#: The row of the Trainer's default (``group_by_length`` without gradient accumulation).
TRAINER_LABEL = "length_grouped G=1"


@dataclass(frozen=True, kw_only=True)
class BucketedPoint:
    """A bucketed plan on the frontier: its K, its ``reached`` efficiency (budget fill under a
    token budget), the ``mixing`` it keeps, and, when the floor search could not prove it the
    best, the ``bound`` it proves on the mixing any plan meeting the floor keeps (else None)."""

    n_buckets: int
    reached: float
    mixing: float
    bound: float | None = None


@dataclass(frozen=True, kw_only=True)
class TrainerPoint:
    """The Trainer's length grouping on the frontier (simulated): its ``reached`` efficiency
    (budget fill under a token budget), its ``mixing`` with the standard error ``mixing_se``
    (NaN when undefined), and the lag-1 autocorrelation of its batches' lengths."""

    reached: float
    mixing: float
    mixing_se: float
    lag1_autocorr: float


@dataclass(frozen=True, kw_only=True)
class TradeOff:
    """What the frontier answers at one efficiency.

    ``measure`` is the frontier's axis read (``"efficiency"``, or ``"budget_fill"`` under a
    token budget); ``target`` the efficiency asked (``min_efficiency``, or else the Trainer's
    own, so both plans pad alike); ``best`` the bucketed plan with the most mixing at ``target``
    or more (None: no bucketed plan reaches it); ``most_efficient`` the bucketed plan with the
    most ``measure``; ``trainer`` the Trainer's point (None without simulated strategies);
    ``frontier`` the whole frontier.
    """

    frontier: Frontier
    measure: str
    target: float
    best: BucketedPoint | None
    most_efficient: BucketedPoint
    trainer: TrainerPoint | None
    floor: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the answer's numbers (the frontier's rows are :meth:`Frontier.to_dict`)."""

        def point(p: BucketedPoint | TrainerPoint | None) -> dict[str, Any] | None:
            if p is None:
                return None
            return {
                k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in vars(p).items()
            }

        return {
            "measure": self.measure,
            "floor": self.floor,
            "target": self.target,
            "best": point(self.best),
            "most_efficient": point(self.most_efficient),
            "trainer": point(self.trainer),
            "lambdas": list(self.frontier.lambdas),
            "simulated_samples": self.frontier.simulated_samples,
        }


def _bucketed(frame: pd.DataFrame) -> pd.DataFrame:
    """The optimiser's bucketed rows (optimal and frontier edges; not edge sets given to mark)."""
    return frame[(frame["strategy"] == "bucketed") & (frame["knob"] == "n_buckets")]


def _point(row: pd.Series, measure: str) -> BucketedPoint:
    return BucketedPoint(
        n_buckets=int(row["n_buckets"]), reached=float(row[measure]), mixing=float(row["mixing"])
    )


def _floor_search(
    hist: LengthHistogram, rule: BatchRule, k_max: int, target: float, found: BucketedPoint, fill: bool
) -> BucketedPoint:
    """``found``, or the floor search's plan at ``k_max`` when it keeps at least as much mixing."""
    try:
        measure = "budget_fill" if fill else "efficiency"
        plan: BucketPlan | None = optimize_edges(hist, k_max, rule, floor=Floor(measure, target))
    except ValueError:  # the floor is out of reach at K = k_max (the sweep's plan stands)
        plan = None
    if plan is None or plan.floor is None or plan.mixing < found.mixing:
        return found
    reached = plan.budget_fill if fill and plan.budget_fill is not None else plan.efficiency
    bound = None if plan.floor.exact else float(plan.floor.reach)
    return BucketedPoint(n_buckets=plan.n_buckets, reached=reached, mixing=plan.mixing, bound=bound)


def read_tradeoff(
    result: Frontier, hist: LengthHistogram | None = None, min_efficiency: float | None = None
) -> TradeOff:
    """The trade-off on ``result`` at ``min_efficiency`` (else at the Trainer's own efficiency):
    the bucketed plan of the frontier with the most mixing at that efficiency or more, or, given
    the data ``hist``, the better of it and the floor search at the frontier's largest K (exact,
    with the bound it proves).  Under a token budget every efficiency is the steps' budget fill.

    Examples
    --------
    >>> import numpy as np
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 300, 600))
    >>> res = frontier(hist, batch_size=4, rng=np.random.default_rng(0), max_buckets=4, n_lambdas=2,
    ...                simulate_strategies=False)
    >>> t = read_tradeoff(res, min_efficiency=0.8)
    >>> t.best.n_buckets, round(t.best.reached, 3), round(t.best.mixing, 3), t.trainer
    (4, 0.838, 0.145, None)
    """
    frame = result.frame
    fill = result.axis == "budget_fill"
    measure = "budget_fill" if fill else "efficiency"
    rows = frame[frame["label"] == TRAINER_LABEL]
    trainer = None
    if not rows.empty:
        t = rows.iloc[0]
        trainer = TrainerPoint(
            reached=float(t[measure]),
            mixing=float(t["mixing"]),
            mixing_se=float(t["mixing_se"]),
            lag1_autocorr=float(t["lag1_autocorr"]),
        )
    if min_efficiency is None and trainer is None:
        raise ValueError("give min_efficiency: the frontier has no length_grouped row to compare with")
    target = float(min_efficiency) if min_efficiency is not None else trainer.reached  # type: ignore[union-attr]
    bucketed = _bucketed(frame)
    ok = bucketed[bucketed[measure] >= target]
    best = None if ok.empty else _point(ok.sort_values(["mixing", measure]).iloc[-1], measure)
    if hist is not None and best is not None:
        best = _floor_search(hist, result.rule, int(frame["n_buckets"].max()), target, best, fill)
    top = _point(bucketed.sort_values([measure, "mixing"]).iloc[-1], measure)
    return TradeOff(
        frontier=result, measure=measure, target=target, best=best, most_efficient=top, trainer=trainer
    )


def tradeoff(
    hist: LengthHistogram,
    rule: BatchRule,
    *,
    rng: np.random.Generator,
    min_efficiency: float | None = None,
    edge_sets: Mapping[str, Sequence[int]] | None = None,
) -> TradeOff:
    """The frontier of ``hist`` under ``rule`` with the one set of settings every face uses (the
    defaults of :func:`analysis.answers.frontier.frontier`; ``rng`` for its simulated
    strategies, a fresh ``np.random.default_rng(seed)`` so that every face draws the same), read
    at ``min_efficiency`` (else at the Trainer's efficiency: :func:`read_tradeoff`).
    ``edge_sets`` marks given plans on the plane; they never change the answer.

    Examples
    --------
    >>> import numpy as np
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 300, 600))
    >>> t = tradeoff(hist, BatchRule(4), rng=np.random.default_rng(0))
    >>> t.measure, t.target == t.trainer.reached, t.best.n_buckets >= 2
    ('efficiency', True, True)
    """
    result = frontier(hist, rule, rng=rng, edge_sets=edge_sets)
    return read_tradeoff(result, hist, min_efficiency)
