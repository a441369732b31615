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
from analysis.tables import format_estimate, format_percent
from analysis.timing.noise import GradientNoise, NoiseFigure

__all__ = ["describe_plan_noise", "describe_noise_model"]


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
