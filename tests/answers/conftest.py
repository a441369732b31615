"""What the answers' tests on the gradient axis share: a gradient-noise model measured on
synthetic gradients that grow with the length (a known, length-driven between-bin share)."""

from __future__ import annotations

import numpy as np

from analysis.timing.noise import GradientNoise, measure_gradient_noise


def length_noise(rng: np.random.Generator, high: int) -> GradientNoise:
    """A model from 600 samples of lengths ``4..high - 1`` whose 6-dimensional gradients are
    unit noise plus a direction scaled by the length (6 bins of 6 groups, 3 folds), drawn
    from ``rng`` (which the caller goes on drawing from)."""
    lengths = rng.integers(4, high, 600)
    grads = rng.normal(size=(600, 6)) + np.outer(lengths / 60.0, rng.normal(size=6))
    return measure_gradient_noise(
        lambda idx: grads[idx].mean(0), lengths, n_bins=6, groups_per_bin=6, folds=3, rng=rng
    )
