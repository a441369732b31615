"""The optimiser's problem: the histogram as prefix arrays, and binomial coefficients.

Index ``t = 1..m`` is the t-th distinct length; a bucket is a range ``(i, j]`` of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import gammaln

from analysis._order_stats import _STIRLING_MIN, _stirlerr
from analysis.batching import BatchRule, positive_int, round_up
from analysis.lengths import LengthHistogram

if TYPE_CHECKING:
    from analysis.step_time import StepTimeModel

# Largest log C(N, B) (plus headroom for the sums) for which C(x, B) is used directly.
_LINEAR_LOG_LIMIT = 600.0
_TABLE_MAX = 1 << 22
# Batch sizes up to this use product formulas for C(x, B) (O(B) per value); larger ones
# log-gamma values (O(1) per value).
_PRODUCT_MAX = 64


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
    sample adds to its batch (``per_token * T + attention * T**2``, ``T`` the padded length
    rounded to the model's tile), plus ``per_step`` seconds per batch (``per_batch``)."""
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
    padded = round_up(lengths, rule.pad_to_multiple_of)
    weight[1:] = padded.astype(float) if step_time is None else step_time.sample_seconds(padded)
    step = np.zeros(m + 1)
    step[1:m] = np.diff(weight[1:])
    upper = np.zeros(m + 1, np.int64)
    upper[1:] = round_up(lengths, em)
    if rule.batch_size is not None:
        size = np.full(m + 1, rule.batch_size, np.int64)
    else:
        size = np.maximum(1, rule.max_tokens // np.maximum(upper, 1))
    # A bucket may end at t when its edge (upper[t]) separates v_t from v_{t+1}.
    ends = np.flatnonzero(np.r_[False, upper[1:m] < lengths[1:], True])
    per_batch = 0.0 if step_time is None else step_time.per_step
    return _Problem(lengths, cum, weight, step, upper, size, ends, rule, em, per_batch, step_time)


# ------------------------------------------------------------------------- binomial helpers
class _Binom:
    """``C(x, B)`` for one batch size ``B``: float64 values, or logs when they would overflow.

    ``B <= _PRODUCT_MAX`` uses the product formula (linear) or a sum of logs; a larger ``B``
    takes ``log C`` from log-gamma values (O(1) per value, whatever ``B``) and exponentiates
    it when ``C(n_max, B)`` fits.  ``B > n_max`` (every bucket is one short batch) needs no
    value at all: ``C(x, B) = 0`` for every ``x <= n_max`` (``empty``).
    """

    def __init__(self, size: int, n_max: int, headroom: float) -> None:
        self.size = size
        self.empty = n_max < size
        top = _log_comb(np.array([float(n_max)]), size)[0] if not self.empty else 0.0
        self.log = bool(top + headroom > _LINEAR_LOG_LIMIT)
        self.table = None
        if self.empty:
            self.table = np.zeros(1)  # read with mode="clip": 0 for every x
        elif n_max <= _TABLE_MAX:
            x = np.arange(n_max + 1)
            self.table = self._log_direct(x) if self.log else self._comb_direct(x)

    def _comb_direct(self, x: np.ndarray) -> np.ndarray:
        """``C(x, B)`` (exactly 0 for ``0 <= x < B``): the product formula for a small ``B``,
        ``exp(log C)`` above (its partial products could overflow)."""
        if self.size > _PRODUCT_MAX:
            with np.errstate(under="ignore"):
                out: np.ndarray = np.exp(self._log_direct(x))
            return out
        xf = x.astype(float)
        out = xf.copy()
        for t in range(1, self.size):
            out *= (xf - t) / (t + 1)
        return out

    def _log_direct(self, x: np.ndarray) -> np.ndarray:
        return _log_comb(x.astype(float), self.size)

    def lookup(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``self(max(x, 0))`` written into ``out`` (``x`` may be clipped in place)."""
        if self.table is not None:  # x < 0 reads table[0] = C(0, B), as max(x, 0) would
            return self.table.take(x, mode="clip", out=out)
        np.maximum(x, 0, out=x)
        out[...] = self._log_direct(x) if self.log else self._comb_direct(x)
        return out

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``C(x, B)`` (or ``log C(x, B)``, ``-inf`` below ``B``) for ``x >= 0``."""
        if self.table is not None:
            return self.table.take(x, mode="clip")
        return self._log_direct(x) if self.log else self._comb_direct(x)


def _log_comb(x: np.ndarray, size: int) -> np.ndarray:
    """``log C(x, size)`` for float ``x >= 0`` (``-inf`` where ``x < size``)."""
    out = np.full(x.shape, -np.inf)
    ok = x >= size
    xs = x[ok]
    if size <= _PRODUCT_MAX:
        acc = np.zeros(xs.shape)
        for t in range(size):
            acc += np.log((xs - t) / (t + 1))
        out[ok] = acc
    else:
        # lgamma(x+1) - lgamma(x-B+1) from Stirling's form with the large terms paired
        # (B log x - (x-B) log1p(-B/x) - B - log1p(-B/x)/2 + the series remainders): a plain
        # difference of two lgamma values near x log x loses ~1e-7 absolute for x ~ 1e8, as
        # much as the differences of log C the kernel exponentiates.
        rest = xs - size
        far = rest >= _STIRLING_MIN
        diff = np.empty(xs.shape)
        xf, rf = xs[far], rest[far]
        shrink = np.log1p(-size / xf)
        diff[far] = size * np.log(xf) - rf * shrink - size - 0.5 * shrink + _stirlerr(xf) - _stirlerr(rf)
        diff[~far] = gammaln(xs[~far] + 1) - gammaln(rest[~far] + 1)
        out[ok] = diff - gammaln(size + 1.0)
    return out
