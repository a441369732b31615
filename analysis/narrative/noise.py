"""Sentences about gradient noise: what a plan keeps of a shuffle's effective batch and how much
sooner (or later) it reaches the same loss (the summary page's answer, the explorer's status,
``recommendation.json``), and what the noise model measured and cost.  They read results
(:class:`analysis.answers.gradient_noise.PlanQuality`, a
:class:`~analysis.timing.noise.GradientNoise` model's figures) and compute nothing; the
estimates are written with their standard errors by :func:`analysis.tables.format_estimate`.
"""

from __future__ import annotations

from collections.abc import Mapping

from analysis.answers.gradient_noise import PlanQuality
from analysis.batching import BatchRule
from analysis.optimize import BucketPlan, PlanGradient
from analysis.tables import format_estimate, format_percent
from analysis.timing.noise import GradientNoise, NoiseFigure

__all__ = [
    "describe_edges_for_quality",
    "describe_plan_gradient",
    "describe_plan_noise",
    "describe_noise_model",
]


def _plan_name(quality: PlanQuality) -> str:
    return f"K = {quality.n_buckets}" if quality.n_buckets is not None else quality.strategy


def _estimate(figure: NoiseFigure, errors: bool, unit: str = "", digits: int = 2) -> str:
    """``figure`` with its standard error, or alone (``digits`` decimals; a share in prose)."""
    if errors:
        return format_estimate(figure.value, figure.se, unit=unit)
    if unit == "%":
        return format_percent(figure.value, "prose")
    return f"{figure.value:.{digits}f}{unit}"


def describe_plan_noise(quality: PlanQuality, *, errors: bool = True) -> str:
    """What the plan keeps of a shuffle's effective batch, and its predicted time (with a
    step-time model) or steps (without) to the same loss against a shuffle's; ``errors``: each
    figure with its standard error (the noise model's jackknife).  "Sooner" is said only with a
    step-time model: without one the sentence gives the steps ratio alone.  Steps and time are
    predictions (the ``1 + B_noise / B_eff`` law of steady-state SGD), and the sentence says so.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram
    >>> from analysis.answers.gradient_noise import plan_quality
    >>> from analysis.timing.noise import toy_model
    >>> from analysis.timing.step_time import StepTimeModel
    >>> hist = LengthHistogram.from_counts([5, 50], [40, 40])
    >>> q = plan_quality(toy_model(), hist, edges=[0, 10, 50], batch_size=4)
    >>> import textwrap
    >>> print(textwrap.fill(describe_plan_noise(q), 90, break_on_hyphens=False))
    K = 2 keeps 97.8% ± 0.066% of the effective batch (B_eff 3.912 ± 0.0026 of a shuffle's
    4.00) and is predicted to need 1.004 ± 0.000082 times a shuffle's steps to reach the same
    loss.
    >>> clock = StepTimeModel(per_step=0.01, per_token=1e-3)
    >>> q = plan_quality(toy_model(), hist, edges=[0, 10, 50], batch_size=4, step_time=clock)
    >>> print(textwrap.fill(describe_plan_noise(q, errors=False), 90))
    K = 2 keeps 97.8% of the effective batch (B_eff 3.91 of a shuffle's 4.00) and is predicted
    to reach the same loss 1.66× sooner than a shuffle (1.004 times the steps, each epoch in
    0.60 of a shuffle's time).
    """
    b_eff, steps = quality.effective_batch, quality.steps_ratio
    head = (
        f"{_plan_name(quality)} keeps {_estimate(quality.effective_batch_share, errors, '%')} of the "
        f"effective batch (B_eff {_estimate(b_eff, errors)} of a shuffle's "
        f"{quality.shuffle_effective_batch:.2f})"
    )
    if quality.time_ratio is None or quality.epoch_ratio is None:
        return (
            f"{head} and is predicted to need {_estimate(steps, errors, digits=3)} times a shuffle's "
            "steps to reach the same loss."
        )
    faster = quality.time_speedup
    if faster.value >= 1:
        when = f"is predicted to reach the same loss {_estimate(faster, errors, '×')} sooner than a shuffle"
    else:
        when = (
            f"is predicted to take {_estimate(quality.time_ratio, errors, '×')} a shuffle's time to reach "
            "the same loss"
        )
    return (
        f"{head} and {when} ({_estimate(steps, errors, digits=3)} times the steps, each epoch in "
        f"{quality.epoch_ratio:.2f} of a shuffle's time)."
    )


def describe_noise_model(model: GradientNoise, figures: Mapping[str, NoiseFigure]) -> str:
    """The noise model's figures on the data (``figures``: :meth:`GradientNoise.figures`) with
    their standard errors, and what the probe cost.

    Examples
    --------
    >>> from analysis.timing.noise import toy_model
    >>> import textwrap
    >>> print(textwrap.fill(describe_noise_model(toy_model(), toy_model().figures()), 90))
    Gradient noise scale B_noise = tr Σ / |G|² = 0.8280 ± 0.0094 (tr Σ = 1.010 ± 0.023, the
    per-sample gradients' noise; |G|² = 1.220 ± 0.014, the full gradient's squared norm), from
    a probe of 20 backward passes of 1 sample over 2 length bins.
    """
    scale, trace, norm2 = figures["noise_scale"], figures["trace"], figures["gradient_norm2"]
    size = model.group_size
    return (
        f"Gradient noise scale B_noise = tr Σ / |G|² = {_estimate(scale, True)} (tr Σ = "
        f"{_estimate(trace, True)}, the per-sample gradients' noise; |G|² = {_estimate(norm2, True)}, "
        f"the full gradient's squared norm), from a probe of {model.backward_passes:,} backward passes "
        f"of {size} sample{'s' if size != 1 else ''} over {model.n_bins} length bins."
    )


def describe_plan_gradient(gradient: PlanGradient, n_buckets: int, batch_size: int) -> str:
    """What a plan placed with a noise model carries (:class:`~analysis.optimize.PlanGradient`,
    the CLI's ``optimize --noise``): the between-bucket share ``ρ`` and the share of the batch
    it keeps in the design-effect form the optimiser reads, beside the exact ``B_eff``; with a
    step-time model the predicted time to the same loss, exact and in the design-effect form;
    for edges placed for time to quality, the search that proves them.

    Examples
    --------
    >>> import textwrap
    >>> from analysis import LengthHistogram, StepTimeModel, optimize_edges
    >>> from analysis.timing.noise import toy_model
    >>> hist = LengthHistogram.from_counts([5, 8, 50, 60], [40, 40, 40, 40])
    >>> clock = StepTimeModel(per_step=0.01, per_token=1e-3)
    >>> plan = optimize_edges(hist, 2, batch_size=4, noise=toy_model(), step_time=clock)
    >>> print(textwrap.fill(describe_plan_gradient(plan.gradient, 2, 4), 90))
    Gradient noise (--noise): a share ρ = 0.0197 of it lies between the buckets, so a batch of
    4 keeps 94.4% of its samples' worth (the design effect 1 / (1 + (B - 1) ρ), every batch
    counted full); priced exactly, B_eff = 3.843 ± 0.0025 of 4.00 samples a step (96.1% ±
    0.063%). Predicted time to the same loss: 0.6400 ± 0.000032 of a shuffle's (0.6420 in the
    design-effect form). The edges minimise the design-effect form over every 2-bucket plan
    (proven: 2 hull vertices, 4 DP passes).
    """
    kept = format_percent(gradient.effective_batch_share, "prose")
    head = (
        f"Gradient noise (--noise): a share ρ = {gradient.between_share:.3g} of it lies between the "
        f"buckets, so a batch of {batch_size} keeps {kept} of its samples' worth (the design effect "
        "1 / (1 + (B - 1) ρ), every batch counted full); "
        f"priced exactly, B_eff = {_estimate(gradient.priced.effective_batch, True)} of "
        f"{gradient.priced.batch_size:.2f} samples a step ({_estimate(gradient.exact_share, True, '%')})."
    )
    t = gradient.time_ratio
    if t is not None:
        head += (
            f" Predicted time to the same loss: {_estimate(t, True)} of a shuffle's "
            f"({gradient.predicted_time_ratio:.4f} in the design-effect form)."
        )
    if gradient.vertices:
        where = (
            "every" if gradient.grid is None else f"the {gradient.grid:,} candidate ends searched for every"
        )
        proof = "proven" if gradient.exact else "on that grid"
        head += (
            f" The edges minimise the design-effect form over {where} {n_buckets}-bucket plan "
            f"({proof}: {gradient.vertices} hull vertices, {gradient.passes} DP passes)."
        )
    return head


def describe_edges_for_quality(plan: BucketPlan | None, rule: BatchRule) -> str:
    """Notebook 04's last section: the edges placed for the time to the same loss
    (``optimize_edges(..., noise=, step_time=)``: ``plan``, with its
    :attr:`~analysis.optimize.BucketPlan.gradient`), or why there are none: no noise model
    (``plan`` None), or a token budget.

    Examples
    --------
    >>> print(describe_edges_for_quality(None, BatchRule(8))[:72])
    No gradient-noise model was given (--noise FILE.npz): the edges above ar
    """
    if rule.batch_size is None:
        return (
            "Edges for the time to the same loss need a batch size: under a token budget each bucket "
            "has its own batch size, which makes a step's gradient noise a ratio of sums the exact "
            "search does not handle; the edges above are placed for the time of an epoch."
        )
    if plan is None or plan.gradient is None:
        return (
            "No gradient-noise model was given (--noise FILE.npz): the edges above are placed for the "
            "time of an epoch. With one, this section places them for the time to the same loss, "
            "where a plan that groups lengths pays in steps (they grow as 1 + B_noise / B_eff)."
        )
    return f"Edges {plan.edges}. " + describe_plan_gradient(plan.gradient, plan.n_buckets, rule.batch_size)
