"""The trade-off a design review reads off the frontier, computed once for every face: at an
efficiency (a floor, or the Hugging Face Trainer's own), the bucketed plan that keeps the most
mixing, and where the Trainer's length grouping stands.

:func:`tradeoff` runs :func:`analysis.answers.frontier.frontier` with its defaults (one set of
settings: the summary page, notebook 02, the CLI's ``frontier`` and ``recommendation.json`` all
read this), then :func:`read_tradeoff` reads the answer off it, completed by the exact floor
search of :func:`analysis.optimize_edges` at the frontier's largest K (the sweep's few lambdas
can miss the hull vertex next to a floor).  With a gradient-noise model (``noise=``) the
"mixing" read is the frontier's :attr:`~analysis.answers.frontier.Frontier.mixing_axis`, the
share of the effective batch a plan keeps (exact for bucketed plans, simulated for the
Trainer's), and with a step-time model too each point carries its predicted time to the same
loss over a shuffle's.  The sentence is :func:`analysis.narrative.frontier.frontier_sentence`,
which computes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.answers.frontier import FLOOR_CHECKS, Frontier, frontier
from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.optimize import BucketPlan, Floor, optimize_edges
from analysis.timing.noise import GradientNoise, time_to_quality
from analysis.timing.step_time import StepTimeModel

__all__ = ["TRAINER_LABEL", "BucketedPoint", "TrainerPoint", "TradeOff", "read_tradeoff", "tradeoff"]

#: The row of the Trainer's default (``group_by_length`` without gradient accumulation).
TRAINER_LABEL = "length_grouped G=1"


@dataclass(frozen=True, kw_only=True)
class BucketedPoint:
    """A bucketed plan on the frontier: its K, its ``reached`` efficiency (budget fill under a
    token budget), the ``mixing`` it keeps (on the frontier's ``mixing_axis``: the length
    mixing, or with a noise model the effective-batch share), and, when the floor search could
    not prove it the best, the ``bound`` it proves on the mixing any plan meeting the floor
    keeps (else None; on the gradient axis the search proves its bound on the design-effect
    share, another measure than the exact share read here, so none is given); ``quality_time``:
    its predicted time to the same loss over a shuffle's (NaN without noise and step-time
    models)."""

    n_buckets: int
    reached: float
    mixing: float
    bound: float | None = None
    quality_time: float = math.nan


@dataclass(frozen=True, kw_only=True)
class TrainerPoint:
    """The Trainer's length grouping on the frontier (simulated): its ``reached`` efficiency
    (budget fill under a token budget), its ``mixing`` (on the frontier's ``mixing_axis``) with
    the standard error ``mixing_se`` (NaN when undefined), the lag-1 autocorrelation of its
    batches' lengths and its ``quality_time`` (as :class:`BucketedPoint`'s)."""

    reached: float
    mixing: float
    mixing_se: float
    lag1_autocorr: float
    quality_time: float = math.nan


@dataclass(frozen=True, kw_only=True)
class TradeOff:
    """What the frontier answers at one efficiency.

    ``measure`` is the frontier's axis read (``"efficiency"``, or ``"budget_fill"`` under a
    token budget); ``target`` the efficiency asked (``min_efficiency``, or else the Trainer's
    own, so both plans pad alike); ``best`` the bucketed plan with the most mixing at ``target``
    or more (None: no bucketed plan reaches it); ``most_efficient`` the bucketed plan with the
    most ``measure``; ``trainer`` the Trainer's point (None without simulated strategies);
    ``frontier`` the whole frontier; ``floor`` the ``min_efficiency`` asked (None: read at the
    Trainer's), what notebook 02 is given to read the same.
    """

    frontier: Frontier
    measure: str
    target: float
    best: BucketedPoint | None
    most_efficient: BucketedPoint
    trainer: TrainerPoint | None
    floor: float | None = None

    @property
    def mixing_axis(self) -> str:
        """What the points' ``mixing`` is: the frontier's ``mixing_axis`` (``"mixing"``, or with
        a noise model ``"effective_batch_share"``)."""
        return self.frontier.mixing_axis

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
            "mixing_axis": self.mixing_axis,
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


def _point(row: pd.Series, measure: str, mixing_axis: str) -> BucketedPoint:
    return BucketedPoint(
        n_buckets=int(row["n_buckets"]),
        reached=float(row[measure]),
        mixing=float(row[mixing_axis]),
        quality_time=float(row["quality_time"]),
    )


def _floor_search(
    hist: LengthHistogram,
    result: Frontier,
    target: float,
    found: BucketedPoint,
    noise: GradientNoise | None,
    step_time: StepTimeModel | None,
) -> BucketedPoint:
    """``found``, or the floor search's plan at the frontier's largest K when it keeps at least
    as much mixing (on the gradient axis: ``optimize_edges`` with ``noise``, the least ``ρ``
    at the floor, read by its exact share as the frontier's rows are)."""
    rule, fill = result.rule, result.axis == "budget_fill"
    gradient = result.mixing_axis == "effective_batch_share"
    if gradient and (noise is None or rule.batch_size is None):
        return found  # the gradient floors need the model and one batch size: the sweep's plan stands
    k_max = int(_bucketed(result.frame)["n_buckets"].max())
    measure = "budget_fill" if fill else "efficiency"
    try:
        plan: BucketPlan | None = optimize_edges(
            hist, k_max, rule, floor=Floor(measure, target), noise=noise if gradient else None
        )
    except ValueError:  # the floor is out of reach at K = k_max (the sweep's plan stands)
        plan = None
    if plan is None or plan.floor is None:
        return found
    quality = math.nan
    if plan.gradient is not None:
        priced = plan.gradient.priced
        kept, bound = priced.effective_batch.value / priced.batch_size, None
        if step_time is not None and noise is not None:
            quality = time_to_quality(noise, step_time, hist, "bucketed", rule, edges=plan.edges)[0].value
    else:
        kept, bound = plan.mixing, None if plan.floor.exact else float(plan.floor.reach)
    if kept < found.mixing:
        return found
    reached = plan.budget_fill if fill and plan.budget_fill is not None else plan.efficiency
    return BucketedPoint(
        n_buckets=plan.n_buckets, reached=reached, mixing=kept, bound=bound, quality_time=quality
    )


def _trainer(frame: pd.DataFrame, measure: str, mixing_axis: str) -> TrainerPoint | None:
    """The Trainer's point (None without its row)."""
    rows = frame[frame["label"] == TRAINER_LABEL]
    if rows.empty:
        return None
    t = rows.iloc[0]
    return TrainerPoint(
        reached=float(t[measure]),
        mixing=float(t[mixing_axis]),
        mixing_se=float(t[f"{mixing_axis}_se"]),
        lag1_autocorr=float(t["lag1_autocorr"]),
        quality_time=float(t["quality_time"]),
    )


def read_tradeoff(
    result: Frontier,
    hist: LengthHistogram | None = None,
    min_efficiency: float | None = None,
    *,
    noise: GradientNoise | None = None,
    step_time: StepTimeModel | None = None,
) -> TradeOff:
    """The trade-off on ``result`` at ``min_efficiency`` (else at the Trainer's own efficiency):
    the bucketed plan of the frontier with the most mixing at that efficiency or more, or, given
    the data ``hist``, the better of it and the floor search at the frontier's largest K (exact,
    with the bound it proves).  Under a token budget every efficiency is the steps' budget fill.
    "Mixing" is read on ``result.mixing_axis``: on the gradient axis (a frontier made with a
    noise model) the floor search needs that ``noise`` model (without it the frontier's plan
    stands) and ``step_time`` prices the plan it finds in time to quality.

    Examples
    --------
    >>> import numpy as np
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 300, 600))
    >>> res = frontier(hist, batch_size=4, rng=np.random.default_rng(0), max_buckets=4, n_lambdas=2,
    ...                simulate_strategies=False, floor_checks=48)
    >>> t = read_tradeoff(res, min_efficiency=0.8)
    >>> t.best.n_buckets, round(t.best.reached, 3), round(t.best.mixing, 3), t.trainer, t.mixing_axis
    (4, 0.838, 0.145, None, 'mixing')
    """
    frame, axis = result.frame, result.mixing_axis
    measure = "budget_fill" if result.axis == "budget_fill" else "efficiency"
    trainer = _trainer(frame, measure, axis)
    if min_efficiency is None and trainer is None:
        raise ValueError("give min_efficiency: the frontier has no length_grouped row to compare with")
    target = float(min_efficiency) if min_efficiency is not None else trainer.reached  # type: ignore[union-attr]
    bucketed = _bucketed(frame)
    ok = bucketed[bucketed[measure] >= target]
    best = None if ok.empty else _point(ok.sort_values([axis, measure]).iloc[-1], measure, axis)
    if hist is not None and best is not None:
        best = _floor_search(hist, result, target, best, noise, step_time)
    top = _point(bucketed.sort_values([measure, axis]).iloc[-1], measure, axis)
    return TradeOff(
        frontier=result,
        measure=measure,
        target=target,
        best=best,
        most_efficient=top,
        trainer=trainer,
        floor=None if min_efficiency is None else target,
    )


def tradeoff(
    hist: LengthHistogram,
    rule: BatchRule,
    *,
    rng: np.random.Generator,
    min_efficiency: float | None = None,
    edge_sets: Mapping[str, Sequence[int]] | None = None,
    noise: GradientNoise | None = None,
    step_time: StepTimeModel | None = None,
) -> TradeOff:
    """The frontier of ``hist`` under ``rule`` with the one set of settings every face uses (the
    defaults of :func:`analysis.answers.frontier.frontier`, and the Pareto check's
    :data:`~analysis.answers.frontier.FLOOR_CHECKS` floor searches; ``rng`` for its simulated
    strategies, a fresh ``np.random.default_rng(seed)`` so that every face draws the same), read
    at ``min_efficiency`` (else at the Trainer's efficiency: :func:`read_tradeoff`).
    ``edge_sets`` marks given plans on the plane; they never change the answer.  ``noise`` (a
    :class:`~analysis.timing.noise.GradientNoise` model) puts the frontier on the gradient axis
    and reads the answer there; ``step_time`` prices every point in tokens/s and, with
    ``noise``, in time to the same loss (:func:`~analysis.answers.frontier.frontier`).

    Examples
    --------
    >>> import numpy as np
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 300, 600))
    >>> t = tradeoff(hist, BatchRule(4), rng=np.random.default_rng(0))
    >>> t.measure, t.target == t.trainer.reached, t.best.n_buckets >= 2
    ('efficiency', True, True)
    """
    result = frontier(
        hist, rule, rng=rng, edge_sets=edge_sets, noise=noise, step_time=step_time, floor_checks=FLOOR_CHECKS
    )
    return read_tradeoff(result, hist, min_efficiency, noise=noise, step_time=step_time)
