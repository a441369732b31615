"""Synthetic, case-like sample lengths: the bundled data set, made without any real data.

The case this project comes from published only statistics: 902,087 samples of 65..8,192
tokens, mean 2,068, 1.866 B tokens, and the efficiencies its padding model gave with batch
size 8 (0.774 for geometric bucket edges, 0.868 for the greedy-searched ones).  This module
makes a length histogram with those statistics from a fixed mixture:

- three log-normal modes (short, typical and long conversations, each of spread
  ``sigma = 0.15`` in log space), the shape of a seed SFT mix built from a few sources;
- a log-uniform floor over the whole range (3 %), so every length from 65 to 8,192 occurs;
- a spike at the context limit (about 8 %): documents longer than 8,192 tokens truncated to it.

Lengths below ``min_length`` are filtered out (the mass is renormalised) and any log-normal
mass above ``max_length`` joins the spike.  The mixture's parameters were tuned once offline
against the published figures and are fixed here; see ``data/README.md`` for the measured
statistics.

**Deterministic by default.** :func:`case_like_histogram` with ``seed=None`` computes the
expected count of every length and rounds with the largest-remainder rule, so the counts
sum exactly to ``n_samples`` and no random numbers are involved.  With an integer ``seed``
it instead draws ``n_samples`` lengths from the same probabilities with
``np.random.default_rng(seed)`` (a multinomial draw), for a noisy variant.

Pure functions: nothing here reads or writes a file (``make data`` writes
``data/case_lengths.csv`` from :func:`case_like_histogram`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtr

from analysis._validate import positive_int
from analysis.case import CASE_MAX_LENGTH, CASE_MIN_LENGTH, CASE_N_SAMPLES
from analysis.lengths import LengthHistogram

__all__ = [
    "LogNormalMode",
    "LengthMixture",
    "CASE_LIKE_MIXTURE",
    "largest_remainder",
    "mixture_histogram",
    "case_like_histogram",
]

# Quotas are rounded to this many decimals before the largest-remainder rule, so that
# last-bit differences between platforms' erf implementations cannot flip a count.
_QUOTA_DECIMALS = 6


@dataclass(frozen=True)
class LogNormalMode:
    """One log-normal component: ``weight`` of the mixture, ``median`` length in tokens,
    ``sigma`` the standard deviation of ``log(length)``."""

    weight: float
    median: float
    sigma: float

    def __post_init__(self) -> None:
        if not (self.weight >= 0 and self.median > 0 and self.sigma > 0):
            raise ValueError(f"bad log-normal mode {self!r}: need weight >= 0, median > 0, sigma > 0")


@dataclass(frozen=True)
class LengthMixture:
    """A distribution of integer lengths in ``min_length..max_length``.

    Weights are relative: they are normalised to sum to 1.

    Parameters
    ----------
    modes : tuple of LogNormalMode
        Log-normal components (continuous; length ``L`` gets the mass in ``(L-0.5, L+0.5]``).
    floor_weight : float
        Weight of a log-uniform component over the whole range.
    spike_weight : float
        Weight put directly on ``max_length`` (truncated long documents).
    min_length, max_length : int
        The range.  Mass below ``min_length`` is dropped (the rest renormalised); mass
        above ``max_length`` is moved onto ``max_length``, as truncation does.

    Examples
    --------
    >>> m = LengthMixture(modes=(LogNormalMode(1.0, 100, 0.5),), min_length=10, max_length=200)
    >>> lengths, p = m.probabilities()
    >>> int(lengths[0]), int(lengths[-1]), round(float(p.sum()), 12)
    (10, 200, 1.0)
    """

    modes: tuple[LogNormalMode, ...]
    floor_weight: float = 0.0
    spike_weight: float = 0.0
    min_length: int = 1
    max_length: int = CASE_MAX_LENGTH

    def __post_init__(self) -> None:
        lo = positive_int(self.min_length, "min_length")
        hi = positive_int(self.max_length, "max_length")
        if lo > hi:
            raise ValueError(f"min_length {lo} is above max_length {hi}")
        if self.floor_weight < 0 or self.spike_weight < 0:
            raise ValueError("floor_weight and spike_weight must be non-negative")
        total = self.floor_weight + self.spike_weight + sum(m.weight for m in self.modes)
        if not total > 0:
            raise ValueError("the mixture has no weight")

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """Every length ``min_length..max_length`` (int64) and its probability (sums to 1)."""
        lengths = np.arange(self.min_length, self.max_length + 1, dtype=np.int64)
        # Boundaries between integer lengths; the last bin takes everything above (truncation).
        cuts = np.append(lengths - 0.5, np.inf)
        log_cuts = np.log(cuts)
        p = np.zeros(lengths.size)
        for mode in self.modes:
            cdf = ndtr((log_cuts - np.log(mode.median)) / mode.sigma)
            p += mode.weight * np.diff(cdf) / (1.0 - cdf[0])
        if self.floor_weight:
            lo, hi = np.log(self.min_length - 0.5), np.log(self.max_length + 0.5)
            u = np.clip((log_cuts - lo) / (hi - lo), 0.0, 1.0)
            p += self.floor_weight * np.diff(u)
        p[-1] += self.spike_weight
        return lengths, p / p.sum()

    def to_frame(self) -> pd.DataFrame:
        """One row per component: kind, weight (normalised), median and sigma."""
        rows = [("log-normal", m.weight, m.median, m.sigma) for m in self.modes]
        rows.append(("log-uniform floor", self.floor_weight, np.nan, np.nan))
        rows.append((f"spike at {self.max_length}", self.spike_weight, np.nan, np.nan))
        frame = pd.DataFrame(rows, columns=["component", "weight", "median", "sigma"])
        frame["weight"] = frame["weight"] / frame["weight"].sum()
        return frame


#: The bundled data's mixture, tuned once against the case's published statistics.
CASE_LIKE_MIXTURE = LengthMixture(
    modes=(
        LogNormalMode(weight=0.37, median=843, sigma=0.15),
        LogNormalMode(weight=0.43, median=1_773, sigma=0.15),
        LogNormalMode(weight=0.09, median=3_066, sigma=0.15),
    ),
    floor_weight=0.03,
    spike_weight=0.0792,
    min_length=CASE_MIN_LENGTH,
    max_length=CASE_MAX_LENGTH,
)


def largest_remainder(weights: Sequence[float] | np.ndarray, total: int) -> np.ndarray:
    """Integers proportional to ``weights`` that sum exactly to ``total``.

    Each gets the floor of its quota ``total * w / sum(w)``; the units left over go to the
    largest fractional parts (ties to the earlier position).  Quotas are rounded to 6
    decimals first so the result does not depend on last-bit float differences.

    Examples
    --------
    >>> largest_remainder([1, 1, 1], 10).tolist()
    [4, 3, 3]
    >>> largest_remainder([0.5, 0.25, 0.25, 0.0], 7).tolist()
    [3, 2, 2, 0]
    """
    total = positive_int(total, "total")
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size == 0 or not np.isfinite(w).all() or (w < 0).any() or not w.sum() > 0:
        raise ValueError("weights must be a non-empty 1-D array of finite non-negative numbers")
    quotas = np.round(w / w.sum() * total, _QUOTA_DECIMALS)
    counts = np.floor(quotas).astype(np.int64)
    left = total - int(counts.sum())
    if left < 0:  # only possible through rounding at the 6th decimal
        order = np.argsort(quotas - counts, kind="stable")
        counts[order[:-left]] -= 1
    elif left:
        order = np.argsort(-(quotas - counts), kind="stable")
        counts[order[:left]] += 1
    result: np.ndarray = counts
    return result


def mixture_histogram(mixture: LengthMixture, n_samples: int, *, seed: int | None = None) -> LengthHistogram:
    """``n_samples`` lengths from ``mixture``: expected counts (``seed=None``) or a draw.

    With ``seed=None`` the counts are the expected ones rounded by
    :func:`largest_remainder` (deterministic, no randomness); with an integer ``seed`` they
    are one multinomial draw from ``np.random.default_rng(seed)``.  Lengths with count 0
    are left out.

    Examples
    --------
    >>> m = LengthMixture(modes=(LogNormalMode(1.0, 100, 0.5),), min_length=10, max_length=200)
    >>> h = mixture_histogram(m, 1000)
    >>> h.n_samples, h.quantile(0.5)
    (1000, 100)
    >>> mixture_histogram(m, 1000, seed=1) == mixture_histogram(m, 1000, seed=1)
    True
    """
    n_samples = positive_int(n_samples, "n_samples")
    lengths, p = mixture.probabilities()
    if seed is None:
        counts = largest_remainder(p, n_samples)
    else:
        counts = np.random.default_rng(seed).multinomial(n_samples, p).astype(np.int64)
    keep = counts > 0
    return LengthHistogram(lengths[keep], counts[keep])


def case_like_histogram(seed: int | None = None, n_samples: int = CASE_N_SAMPLES) -> LengthHistogram:
    """The bundled case-like histogram (synthetic: not real data).

    ``case_like_histogram()`` is exactly ``data/case_lengths.csv``: 902,087 samples of
    65..8,192 tokens, mean about 2,068 (1.866 B tokens), from :data:`CASE_LIKE_MIXTURE`
    with deterministic largest-remainder counts.  Pass an integer ``seed`` for a random
    draw of the same distribution instead.

    Examples
    --------
    >>> h = case_like_histogram()
    >>> h.n_samples, h.min, h.max, round(h.total_tokens / 1e9, 3)
    (902087, 65, 8192, 1.866)
    """
    return mixture_histogram(CASE_LIKE_MIXTURE, n_samples, seed=seed)
