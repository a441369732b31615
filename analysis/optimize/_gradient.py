"""The gradient axis: each bucket's share of the gradient noise, additive over buckets.

Under a :class:`~analysis.timing.noise.GradientNoise` model (bins of exchangeable samples,
bin means ``μ_j`` with the unbiased Gram matrix ``Gram_jk = μ_j . μ_k``, within traces
``S_j**2``) a plan's between-bucket share is ``ρ = Σ_b q_b / (N tr Σ)`` with, for a bucket
holding ``c_j`` samples of bin ``j`` (``n_b`` in all; the hist's bins hold ``n_j``),

    ``q_b = [(c - n_b w)ᵀ Gram (c - n_b w) + Σ_j S_j**2 c_j (1 - c_j / n_j)] / n_b``

(``w = n / N``).  The first term is ``n_b |μ_b - G|**2``; the second is the noise of which
samples of a bin an edge leaves on each side (the model's random split: zero for a bin the
bucket holds whole or not at all, so only the bins of the bucket's first and last length
count).  This is :func:`analysis.timing.noise.plan_variance`'s between-bucket sum, so ``ρ``
is :func:`~analysis.timing.noise.plan_noise`'s ``between_share`` exactly.

To cost every bucket between two allowed ends in ``O(r)``: ``Gram = V diag(e) Vᵀ`` (its
eigendecomposition; ``r <= J`` modes, every mode with ``e != 0`` kept with its sign, since the
unbiased Gram matrix need not be positive semi-definite), and the prefix of ``(C_t - cum_t
w) V`` at each distinct length ``t`` (``C_t`` the per-bin counts of the lengths up to ``t``),
so that a bucket's quadratic form is ``Σ_k e_k (P_j - P_i)_k**2``: differences of prefix sums,
taken before squaring (centred, so they stay small where a bucket's mean is near ``G``).

The frontier reads the axis as ``1 - ρ`` (the within-bucket share, the twin of the length
``mixing``): bucket ``(i, j]`` contributes ``n_b tr Σ - q_b`` over the scale ``N tr Σ``.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.lengths import LengthHistogram
from analysis.optimize._problem import Problem
from analysis.timing.noise import GradientNoise, check_noise, dataset_figures


class GradientArrays(NamedTuple):
    """What the compiled matrix reads of a model on a problem (index ``t = 0..m``, as
    ``Problem.cum``)."""

    coords: np.ndarray  # (m+1, r): the centred prefix sums in the Gram's eigenbasis
    eig: np.ndarray  # (r,): the eigenvalues (signed)
    lo: np.ndarray  # (m+1,) int64: the first sample (in length order) of the bin of length t
    hi: np.ndarray  # (m+1,) int64: one past its last
    within: np.ndarray  # (m+1,): S**2 of the bin of length t
    trace: float  # tr Σ of the data under the model
    norm2: float  # |G|**2
    samples: int  # N


def gradient_arrays(hist: LengthHistogram, prob: Problem, model: GradientNoise) -> GradientArrays:
    """The arrays of ``model`` on ``prob`` (lengths outside the model's bins are priced with
    its first or last bin: :meth:`~analysis.timing.noise.GradientNoise.bin_of`)."""
    check_noise(model)
    gram = model.gram
    n_bins = model.n_bins
    bins = model.bin_of(prob.lengths)
    n = np.bincount(bins, weights=hist.counts, minlength=n_bins)
    total = int(hist.n_samples)
    if total < 2:
        raise ValueError("gradient noise needs at least 2 samples")
    trace, norm2, _ = dataset_figures(gram, model.within, n.astype(np.int64))
    if not trace > 0:
        raise ValueError("the noise model gives this data no gradient noise (tr Σ <= 0)")
    eig, vec = np.linalg.eigh((gram + gram.T) / 2)
    keep = eig != 0.0
    eig, vec = eig[keep], vec[:, keep]
    onehot = np.zeros((prob.m + 1, n_bins))
    onehot[np.arange(1, prob.m + 1), bins] = hist.counts
    centred = np.cumsum(onehot, axis=0) - prob.cum[:, None] * (n / total)[None, :]
    coords = np.ascontiguousarray(centred @ vec)
    first = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
    lo = np.zeros(prob.m + 1, np.int64)
    hi = np.zeros(prob.m + 1, np.int64)
    within = np.zeros(prob.m + 1)
    lo[1:], hi[1:] = first[bins], first[bins] + n[bins].astype(np.int64)
    within[1:] = model.within[bins]
    return GradientArrays(coords, np.ascontiguousarray(eig), lo, hi, within, trace, norm2, total)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _split(lo: int, hi: int, s2: float, start: int, stop: int) -> float:  # pragma: no cover - compiled
    """``S**2 c (1 - c / n)`` of a bin holding samples ``[lo, hi)`` in a bucket of ``[start,
    stop)``."""
    c = min(stop, hi) - max(start, lo)
    size = hi - lo
    if c <= 0 or c >= size:
        return 0.0
    return s2 * c * (1.0 - c / size)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def gradient_matrix(
    cum: np.ndarray,
    coords: np.ndarray,
    eig: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    within: np.ndarray,
    trace: float,
    points: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """``out[c, a]`` (transposed, as the mixing matrix) = ``n_b tr Σ - q_b`` of bucket
    ``(points[a], points[c]]`` (see the module docstring); 0 where ``a >= c``."""
    p = points.size
    r = eig.size
    out = np.zeros((p, p))
    for c in range(1, p):
        j = points[c]
        for a in range(c):
            i = points[a]
            n = cum[j] - cum[i]
            if n <= 0:
                continue
            quad = 0.0
            for k in range(r):
                d = coords[j, k] - coords[i, k]
                quad += eig[k] * d * d
            split = _split(lo[i + 1], hi[i + 1], within[i + 1], cum[i], cum[j])
            if lo[j] != lo[i + 1]:
                split += _split(lo[j], hi[j], within[j], cum[i], cum[j])
            out[c, a] = n * trace - (quad + split) / n
    return out


def axis_matrix(
    hist: LengthHistogram, prob: Problem, model: GradientNoise, points: np.ndarray
) -> tuple[np.ndarray, float, GradientArrays]:
    """The gradient axis between every two ``points`` (:func:`gradient_matrix`), its scale
    ``N tr Σ`` (a plan's ``1 - ρ`` is its sum over this) and the arrays."""
    arrays = gradient_arrays(hist, prob, model)
    out = gradient_matrix(
        prob.cum, arrays.coords, arrays.eig, arrays.lo, arrays.hi, arrays.within, arrays.trace, points
    )
    return out, arrays.samples * arrays.trace, arrays
