"""The optimiser's problem: the histogram as prefix arrays, and binomial coefficients.

Index ``t = 1..m`` is the t-th distinct length; a bucket is a range ``(i, j]`` of them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.batching import BatchRule, positive_int, round_up
from analysis.lengths import LengthHistogram

if TYPE_CHECKING:
    from analysis.step_time import StepTimeModel

# Largest log C(N, B) for which the kernel reads ratios from a table of C(x, B).
_LINEAR_LOG_LIMIT = 600.0
# Batch sizes up to this may use that table (the product formula is O(B) per value).
_PRODUCT_MAX = 64
# Samples up to which log x! is tabulated (two float64 per sample); Stirling's series above.
_TABLE_MAX = 1 << 22


@dataclass(frozen=True)
class _Problem:
    """Arrays the optimiser works on (index ``t = 1..m`` is the t-th distinct length)."""

    lengths: np.ndarray  # (m,) int64
    cum: np.ndarray  # (m+1,) int64: samples with length <= v_t; cum[0] = 0
    weight: np.ndarray  # (m+1,) float: g(v_t), the padded length (or its seconds); weight[0] unused
    step: np.ndarray  # (m+1,) float: weight[t+1] - weight[t] for 1 <= t < m, else 0
    upper: np.ndarray  # (m+1,) int64: upper edge of a bucket ending at t
    size: np.ndarray  # (m+1,) int64: batch size of a bucket ending at t
    ends: np.ndarray  # allowed bucket ends (ascending, last = m)
    # with a token budget and a step-time model with a working-set term, each sample also
    # costs size[j] * weight2 in a bucket ending at j (B follows the end); zeros otherwise
    weight2: np.ndarray  # (m+1,) float
    step2: np.ndarray  # (m+1,) float
    rule: BatchRule
    edge_multiple: int
    per_batch: float = 0.0  # added per batch: the step-time model's per_step (0 for padding)
    step_time: StepTimeModel | None = None

    @property
    def m(self) -> int:
        return int(self.lengths.size)


def _problem(
    hist: LengthHistogram, rule: BatchRule, edge_multiple: Any = 1, step_time: StepTimeModel | None = None
) -> _Problem:
    """The arrays of ``hist`` under ``rule`` (edges at multiples of ``edge_multiple``).

    The per-sample weight ``g`` is the padded length, or with ``step_time`` the seconds a
    sample adds to its batch of ``B`` (``per_token * T + (attention + working_set * B) *
    T**2``, ``T`` the padded length rounded to the model's tile: ``weight``, and with a token
    budget, whose ``B`` follows the bucket's end, ``weight + B * weight2``), plus
    ``per_step`` seconds per batch (``per_batch``)."""
    if step_time is not None:
        from analysis.step_time import StepTimeModel  # lazily: step_time imports the optimiser

        if not isinstance(step_time, StepTimeModel):
            raise ValueError(f"step_time must be a StepTimeModel, got {type(step_time).__name__}")
    if not isinstance(hist, LengthHistogram):
        raise ValueError(f"hist must be a LengthHistogram, got {type(hist).__name__}")
    em = positive_int(edge_multiple, "edge_multiple")
    if hist.min == 0:
        raise ValueError("zero-length samples cannot be bucketed (edges start at 0, below every length)")
    if hist.n_samples >= 2**53:
        raise ValueError("more than 2**53 samples: counts would not be exact in float64")
    lengths = hist.lengths
    m = lengths.size
    cum = np.zeros(m + 1, np.int64)
    np.cumsum(hist.counts, out=cum[1:])
    weight = np.zeros(m + 1)
    weight2 = np.zeros(m + 1)
    padded = round_up(lengths, rule.pad_to_multiple_of)
    if step_time is None:
        weight[1:] = padded.astype(float)
    elif rule.batch_size is not None:
        weight[1:] = step_time.sample_seconds(padded, rule.batch_size)
    else:
        weight[1:], weight2[1:] = step_time.sample_seconds_parts(padded)
    step = np.zeros(m + 1)
    step[1:m] = np.diff(weight[1:])
    step2 = np.zeros(m + 1)
    step2[1:m] = np.diff(weight2[1:])
    upper = np.zeros(m + 1, np.int64)
    upper[1:] = round_up(lengths, em)
    if rule.batch_size is not None:
        size = np.full(m + 1, rule.batch_size, np.int64)
    else:
        size = np.maximum(1, rule.max_tokens // np.maximum(upper, 1))
    # A bucket may end at t when its edge (upper[t]) separates v_t from v_{t+1}.
    ends = np.flatnonzero(np.r_[False, upper[1:m] < lengths[1:], True])
    per_batch = 0.0 if step_time is None else step_time.per_step
    return _Problem(
        lengths, cum, weight, step, upper, size, ends, weight2, step2, rule, em, per_batch, step_time
    )


# ------------------------------------------------------------------------- ratio tables
def _ratio_tables(prob: _Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(comb, log_fact_hi, log_fact_lo)`` for the kernel's ratios ``C(a, B) / C(b, B)``.

    A fixed ``B <= _PRODUCT_MAX`` whose ``C(N, B)`` fits float64 gets ``comb``, the table of
    ``C(x, B)`` for ``x = 0..N`` (product formula) up to ``N = _TABLE_MAX`` (above it the
    tabulated DP computes those values, :func:`_comb_computed`); otherwise ``comb`` is empty
    and the ratios come from ``log x!`` as a double-double table for ``x <= _TABLE_MAX``
    (Stirling above)."""
    n_max = int(prob.cum[-1])
    size = prob.rule.batch_size
    if _comb_applies(prob) and n_max <= _TABLE_MAX:
        return _comb_table(n_max, int(size or 0)), _EMPTY, _EMPTY
    hi, lo = _log_fact_table(min(n_max, _TABLE_MAX))
    return _EMPTY, hi, lo


def _comb_applies(prob: _Problem) -> bool:
    """One ``B <= _PRODUCT_MAX`` whose ``C(N, B)`` fits float64: ratios of ``C(x, B)``."""
    n_max = int(prob.cum[-1])
    size = prob.rule.batch_size
    if size is None or size > _PRODUCT_MAX:
        return False
    return n_max < size or _log_comb_top(n_max, size) <= _LINEAR_LOG_LIMIT


def _comb_computed(prob: _Problem) -> bool:
    """``C(x, B)`` applies but the table would pass ``_TABLE_MAX`` entries: the kernel computes
    each value where it reads it (the table's arithmetic, so the same floats), and its time
    and memory do not grow with the sample count."""
    return _comb_applies(prob) and int(prob.cum[-1]) > _TABLE_MAX


_EMPTY = np.zeros(0)
_EMPTY.flags.writeable = False


def _log_comb_top(n: int, size: int) -> float:
    return math.lgamma(n + 1.0) - math.lgamma(n - size + 1.0) - math.lgamma(size + 1.0)


# the last few tables are kept (at most ~100 MB at _TABLE_MAX samples): a session that
# alternates two batch rules does not rebuild them
@functools.lru_cache(maxsize=2)
def _comb_table(n_max: int, size: int) -> np.ndarray:
    """``C(x, size)`` for ``x = 0..n_max`` (exactly 0 below ``size``), by the product formula."""
    xf = np.arange(n_max + 1, dtype=float)
    out = xf.copy()
    for t in range(1, size):
        out *= (xf - t) / (t + 1)
    out[:size] = 0.0  # the product's factors cross zero below size
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=1)
def _log_fact_table(n_max: int) -> tuple[np.ndarray, np.ndarray]:
    """``log x!`` for ``x = 0..n_max`` as ``hi + lo`` (a running double-double sum of
    ``log y``), so that ``log(b!/a!) = (hi[b] - hi[a]) + (lo[b] - lo[a])`` keeps the
    precision of the ``b - a`` logarithms it sums, not of ``log b!``."""
    from analysis.optimize._kernel import _log_fact_compiled  # numba: imported on first use

    hi, lo = _log_fact_compiled(n_max)
    hi.flags.writeable = False
    lo.flags.writeable = False
    return hi, lo
