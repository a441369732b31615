"""Predict training throughput of one batching strategy from a measurement of another.

The model: a batch of ``size`` samples padded to ``longest`` tokens costs time proportional to

    cost = size * (longest + attention_weight * longest**2)

(``attention_weight = 0``: time is proportional to padded tokens; a positive weight adds the
quadratic attention term, roughly ``1 / (6 * d_model)`` for a transformer whose linear layers
dominate).  A *calibration* is one measured run: its useful tokens per second and the
useful tokens and cost of the epoch it ran.  That fixes the cost processed per second, and any
other strategy on the same hardware is predicted at

    tokens/s = cost_per_s * useful_tokens / cost.

With ``attention_weight = 0`` this is ``reference_tokens_per_s * efficiency /
reference_efficiency`` (:func:`predict_throughput`).  Throughout, *tokens/s means useful
(non-padding) tokens per second*.

The model is an upper bound: it ignores per-step overheads (optimizer step, data loading,
communication, kernel launch), which weigh more when batches get cheaper.

Pure functions; nothing here reads a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.waste import WasteEstimate

__all__ = ["batch_cost", "Calibration", "predict_throughput"]

# Efficiencies are <= 1; a float expectation may land a few ulps above, which is accepted.
_EFFICIENCY_MAX = 1.0 + 1e-9


def _finite(value: Any, name: str, *, positive: bool = False) -> float:
    """``value`` as a finite float (``> 0`` if ``positive``, else ``>= 0``), or ValueError."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return value


def batch_cost(size: Any, longest: Any, attention_weight: float = 0.0) -> float | np.ndarray:
    """Cost of batches: ``size * (longest + attention_weight * longest**2)``.

    ``size`` and ``longest`` are scalars or arrays (broadcast), one entry per batch; the
    result is float64 (sum it for an epoch).  With ``attention_weight = 0`` this is the
    batch's padded tokens.  ``longest`` is what the batch is padded to (already rounded up to
    ``pad_to_multiple_of`` if the trainer does that).

    Examples
    --------
    >>> batch_cost(8, 1000)
    8000.0
    >>> batch_cost([8, 8, 3], [1000, 2000, 500], attention_weight=1e-3).tolist()
    [16000.0, 48000.0, 2250.0]
    """
    a = _finite(attention_weight, "attention_weight")
    size_arr = np.asarray(size, dtype=float)
    longest_arr = np.asarray(longest, dtype=float)
    if (size_arr < 0).any() or (longest_arr < 0).any():
        raise ValueError("batch size and longest must be >= 0")
    out = size_arr * (longest_arr + a * longest_arr * longest_arr)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class Calibration:
    """One measured run: ``tokens_per_s`` useful tokens per second while processing an epoch
    of ``useful_tokens`` useful tokens at model cost ``cost`` (see :func:`batch_cost`).

    Build it from a :class:`~analysis.waste.WasteEstimate` (:meth:`from_estimate`), from an
    efficiency alone (:meth:`from_efficiency`, tokens-only model), or from a simulated epoch's
    exact totals (the constructor).  ``attention_weight`` records the cost model used, so a
    prediction cannot mix two.

    Examples
    --------
    The case: sorted batching (efficiency ~1) ran at 32 Ktok/s; a 6-bucket shuffle with an
    expected efficiency of 0.868 is then predicted at 32,000 * 0.868 = 27,776 tok/s.  The case
    measured 25.1 Ktok/s: the model is an upper bound that ignores per-step overheads.

    >>> sorted_run = Calibration.from_efficiency(32_000, 1.0)
    >>> sorted_run.predict(useful_tokens=0.868, cost=1.0)
    27776.0
    """

    tokens_per_s: float
    useful_tokens: float
    cost: float
    attention_weight: float = 0.0

    def __post_init__(self) -> None:
        for name in ("tokens_per_s", "useful_tokens", "cost"):
            object.__setattr__(self, name, _finite(getattr(self, name), name, positive=True))
        object.__setattr__(self, "attention_weight",
                           _finite(self.attention_weight, "attention_weight"))

    @classmethod
    def from_efficiency(cls, tokens_per_s: float, efficiency: float) -> Calibration:
        """Tokens-only calibration (``attention_weight = 0``) from a run's efficiency."""
        efficiency = _finite(efficiency, "efficiency", positive=True)
        if efficiency > _EFFICIENCY_MAX:
            raise ValueError(f"efficiency must be in (0, 1], got {efficiency!r}")
        return cls(tokens_per_s, efficiency, 1.0)

    @classmethod
    def from_estimate(cls, tokens_per_s: float, estimate: WasteEstimate) -> Calibration:
        """Calibration from the expected padding of the measured strategy (its
        ``useful_tokens`` and ``expected_cost``, with its ``attention_weight``)."""
        return cls(tokens_per_s, estimate.useful_tokens, estimate.expected_cost,
                   estimate.attention_weight)

    @property
    def cost_per_s(self) -> float:
        """Model cost processed per second: ``tokens_per_s * cost / useful_tokens``."""
        return self.tokens_per_s * self.cost / self.useful_tokens

    def predict(self, useful_tokens: Any, cost: Any) -> float | np.ndarray:
        """Predicted useful tokens/s of a run of ``useful_tokens`` at ``cost`` (same cost model;
        scalars or arrays).  Depends only on the ratio ``useful_tokens / cost``."""
        useful = np.asarray(useful_tokens, dtype=float)
        cost_arr = np.asarray(cost, dtype=float)
        if (cost_arr <= 0).any() or (useful < 0).any():
            raise ValueError("cost must be > 0 and useful_tokens >= 0")
        out = self.cost_per_s * useful / cost_arr
        return float(out) if out.ndim == 0 else out

    def predict_estimate(self, estimate: WasteEstimate) -> float:
        """Predicted useful tokens/s of a strategy from its :class:`WasteEstimate`.

        Examples
        --------
        >>> from analysis.waste import expected_padding
        >>> lengths = [100, 200, 200, 800, 900, 1000, 1000, 3000]
        >>> measured = expected_padding(lengths, [0, 3000], batch_size=2)  # one bucket
        >>> bucketed = expected_padding(lengths, [0, 200, 1000, 3000], batch_size=2)
        >>> calibration = Calibration.from_estimate(10_000, measured)
        >>> round(calibration.predict_estimate(bucketed) / 10_000, 3)  # speed-up
        1.47
        >>> round(bucketed.efficiency / measured.efficiency, 3)  # the same, tokens-only
        1.47

        With an attention term, long padded batches cost more and buckets gain more:

        >>> def with_attention(edges):
        ...     return expected_padding(lengths, edges, batch_size=2, attention_weight=1e-3)
        >>> calibration = Calibration.from_estimate(10_000, with_attention([0, 3000]))
        >>> round(calibration.predict_estimate(with_attention([0, 200, 1000, 3000])) / 10_000, 3)
        1.644
        """
        if estimate.attention_weight != self.attention_weight:
            raise ValueError(
                f"the estimate uses attention_weight = {estimate.attention_weight!r} but the "
                f"calibration {self.attention_weight!r}: recompute one of them"
            )
        return float(self.predict(estimate.useful_tokens, estimate.expected_cost))


def predict_throughput(efficiency: Any, *, reference_tokens_per_s: float,
                       reference_efficiency: float = 1.0) -> float | np.ndarray:
    """Useful tokens/s at ``efficiency``, given a run measured at ``reference_tokens_per_s``
    with ``reference_efficiency`` (tokens-only model: ``attention_weight = 0``).

    ``tokens/s = reference_tokens_per_s * efficiency / reference_efficiency``: time is
    proportional to padded tokens, so useful tokens/s scales with the useful share.  An upper
    bound: per-step overheads are ignored.  For the attention term use :class:`Calibration`.

    Examples
    --------
    The case: sorted batching at 32 Ktok/s (efficiency ~1), a bucketed efficiency of 0.868,
    a full shuffle near 0.37.  The case measured 25.1 Ktok/s for the buckets, below the
    predicted ~28 Ktok/s, because the model ignores per-step overheads.

    >>> predict_throughput(0.868, reference_tokens_per_s=32_000)
    27776.0
    >>> predict_throughput(0.868, reference_tokens_per_s=32_000, reference_efficiency=0.995)
    27915.577889447236
    >>> predict_throughput([0.868, 0.37], reference_tokens_per_s=32_000).round().tolist()
    [27776.0, 11840.0]
    """
    calibration = Calibration.from_efficiency(reference_tokens_per_s, reference_efficiency)
    eff = np.asarray(efficiency, dtype=float)
    if np.isnan(eff).any() or (eff <= 0).any() or (eff > _EFFICIENCY_MAX).any():
        raise ValueError(f"efficiency must be in (0, 1], got {efficiency!r}")
    return calibration.predict(eff, 1.0)
