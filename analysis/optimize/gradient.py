"""A plan's figures on the gradient axis (:class:`PlanGradient`): what the optimiser placed it
by, the design-effect form, beside the exact price.

With a :class:`~analysis.timing.noise.GradientNoise` model the optimiser's second axis is the
gradient's between-bucket share ``ρ`` (exact given the model's bins:
:mod:`analysis.optimize._gradient`), read through Kish's design effect: a plan keeps
``B_eff / B = 1 / (1 + (B - 1) ρ)`` of its batch
(:func:`~analysis.timing.noise.effective_batch_share`), and its steps to the same loss scale
as :func:`steps_factor`, ``1 / B_noise + (1 + (B - 1) ρ) / B``.  That form counts every batch
as full; :func:`~analysis.timing.noise.plan_noise` is the exact price (each bucket's last short
batch, the finite-population terms), and every plan placed with a noise model carries both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from analysis.lengths import LengthHistogram
from analysis.timing.noise import (
    GradientNoise,
    NoiseFigure,
    PlanNoise,
    effective_batch_share,
    plan_noise,
    time_to_quality,
)

__all__ = ["PlanGradient", "plan_gradient", "steps_factor"]


def steps_factor(between_share: float, batch_size: int, inverse_scale: float) -> float:
    """Steps to a given loss, up to a constant, in the design-effect form: ``1 / B_noise + (1
    + (B - 1) ρ) / B`` (``inverse_scale`` is ``1 / B_noise``, 0 for an infinite noise scale).
    Over a shuffle's (``ρ = 0``) it is the plan's predicted ``steps_ratio``.

    Examples
    --------
    >>> round(steps_factor(0.0158, 8, 1 / 50) / steps_factor(0.0, 8, 1 / 50), 4)
    1.0953
    """
    return inverse_scale + (1.0 + (batch_size - 1) * between_share) / batch_size


@dataclass(frozen=True, kw_only=True)
class PlanGradient:
    """A plan's figures under a gradient-noise model.

    ``between_share``: ``ρ`` under the model's point estimate (what the optimiser reads; equal
    to ``priced.between_share.value``).  ``effective_batch_share``: ``1 / (1 + (B - 1) ρ)``, the
    design-effect form the optimiser and its floors use (NaN under a token budget).
    ``priced``: the exact price (:func:`~analysis.timing.noise.plan_noise`; its
    ``effective_batch`` over its ``batch_size`` is the exact share, every figure with its
    jackknife standard error).  With a step-time model: ``time_ratio``, the exact predicted time
    to the same loss over a shuffle's (:func:`~analysis.timing.noise.time_to_quality`), and
    ``predicted_time_ratio``, the optimiser's design-effect form of it (the plan's exact epoch
    seconds over a shuffle's times :func:`steps_factor` over a shuffle's).  How the edges were
    placed for time to quality (:func:`analysis.optimize_edges` with ``noise`` and
    ``step_time``): ``exact`` (the walk covered every allowed end; False on a candidate grid of
    ``grid`` ends), ``vertices`` (hull vertices found) and ``passes`` (DP passes); 0 for a plan
    placed otherwise.
    """

    between_share: float
    effective_batch_share: float
    priced: PlanNoise
    time_ratio: NoiseFigure | None = None
    predicted_time_ratio: float = math.nan
    exact: bool = True
    vertices: int = 0
    passes: int = 0
    grid: int | None = None

    @property
    def exact_share(self) -> NoiseFigure:
        """The exact share of the batch kept: ``priced.effective_batch`` over the plan's mean
        samples per step (``priced.batch_size``), with its standard error."""
        b_eff, size = self.priced.effective_batch, self.priced.batch_size
        return NoiseFigure(value=b_eff.value / size, se=b_eff.se / size)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the exact price as ``{"figure": {"value", "se"}}``)."""

        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {
            "between_share": num(self.between_share),
            "effective_batch_share": num(self.effective_batch_share),
            "priced": {
                str(name): {"value": num(float(r["value"])), "se": num(float(r["se"]))}
                for name, r in self.priced.to_frame().iterrows()
            },
            "time_ratio": None
            if self.time_ratio is None
            else {"value": num(self.time_ratio.value), "se": num(self.time_ratio.se)},
            "predicted_time_ratio": num(self.predicted_time_ratio),
            "exact": bool(self.exact),
            "vertices": int(self.vertices),
            "passes": int(self.passes),
            "grid": self.grid,
        }


def plan_gradient(
    hist: LengthHistogram,
    edges: list[int],
    rule: Any,
    model: GradientNoise,
    between_share: float,
    step_time: Any = None,
    **walk: Any,
) -> PlanGradient:
    """The :class:`PlanGradient` of ``edges`` at the optimiser's ``between_share``; ``walk``:
    ``exact``, ``vertices``, ``passes``, ``grid`` of a time-to-quality search."""
    priced = plan_noise(model, hist, "bucketed", rule, edges=edges)
    size = rule.batch_size
    share = effective_batch_share(between_share, size) if size is not None else math.nan
    time_ratio, predicted = None, math.nan
    if step_time is not None:
        time_ratio, _, epoch = time_to_quality(model, step_time, hist, "bucketed", rule, edges=edges)
        if size is not None:
            figures = model.figures(hist)
            scale = figures["noise_scale"].value
            inverse = 1.0 / scale if math.isfinite(scale) and scale > 0 else 0.0
            predicted = epoch * steps_factor(between_share, size, inverse) / steps_factor(0.0, size, inverse)
    return PlanGradient(
        between_share=float(between_share),
        effective_batch_share=float(share),
        priced=priced,
        time_ratio=time_ratio,
        predicted_time_ratio=float(predicted),
        **walk,
    )
