"""Predict the throughput of one batching strategy from a measured run of another.

The model: step time is proportional to padded tokens, so useful tokens/s scale with the
useful share: ``tokens/s = reference_tokens_per_s * efficiency / reference_efficiency``.
It is an upper bound: per-step overheads (optimizer, launch, data, communication) are
ignored.  Throughout, *tokens/s* means useful (non-padding) tokens per second.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["predict_throughput"]

# Efficiencies are <= 1; a float expectation may land a few ulps above, which is accepted.
_EFFICIENCY_MAX = 1.0 + 1e-9


def _finite_positive(value: Any, name: str) -> float:
    """``value`` as a finite float ``> 0``, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ValueError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def predict_throughput(
    efficiency: Any, *, reference_tokens_per_s: float, reference_efficiency: float = 1.0
) -> float | np.ndarray:
    """Useful tokens/s at ``efficiency``, given a run measured at ``reference_tokens_per_s``
    with ``reference_efficiency``.

    Examples
    --------
    The case: sorted batching at 32 Ktok/s (efficiency ~1), a bucketed efficiency of 0.868,
    a full shuffle near 0.37.  The case measured 25.1 Ktok/s for the buckets, below the
    predicted ~28 Ktok/s: the model ignores per-step overheads.

    >>> predict_throughput(0.868, reference_tokens_per_s=32_000)
    27776.0
    >>> predict_throughput(0.868, reference_tokens_per_s=32_000, reference_efficiency=0.995)
    27915.577889447236
    >>> predict_throughput([0.868, 0.37], reference_tokens_per_s=32_000).round().tolist()
    [27776.0, 11840.0]
    """
    rate = _finite_positive(reference_tokens_per_s, "reference_tokens_per_s")
    ref = _finite_positive(reference_efficiency, "reference_efficiency")
    if ref > _EFFICIENCY_MAX:
        raise ValueError(f"reference_efficiency must be in (0, 1], got {reference_efficiency!r}")
    eff = np.asarray(efficiency, dtype=float)
    if np.isnan(eff).any() or (eff <= 0).any() or (eff > _EFFICIENCY_MAX).any():
        raise ValueError(f"efficiency must be in (0, 1], got {efficiency!r}")
    out = rate * eff / ref
    return float(out) if out.ndim == 0 else out
