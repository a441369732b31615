"""Predict the throughput of one batching strategy from a measured run of another.

The model: step time is proportional to padded tokens, so useful tokens/s scale with the
useful share: ``tokens/s = reference_tokens_per_s * efficiency / reference_efficiency``.
It is an upper bound: per-step overheads (optimizer, launch, data, communication) are
ignored.  Throughout, *tokens/s* means useful (non-padding) tokens per second.

This is the one home of that rule: :func:`predict_throughput` applies it to efficiencies,
:func:`predict_from_reference` to a table of strategies with one of them measured (what
``compare_strategies(reference_tokens_per_s=...)``, ``Recommendation.predicted_tokens_per_s``,
the report and ``predict_strategy_throughput`` call), and :data:`THROUGHPUT_RULE` says it in
words for a record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["THROUGHPUT_RULE", "predict_throughput", "predict_from_reference"]

#: The rule in words (the report records it beside its predictions).
THROUGHPUT_RULE = (
    "analysis.predict_throughput: time proportional to padded tokens, "
    "rate = reference rate * efficiency / reference efficiency (an upper bound: "
    "per-step overheads ignored)"
)

# Efficiencies are <= 1; a float expectation may land a few ulps above, which is accepted.
_EFFICIENCY_MAX = 1.0 + 1e-9


def _finite_positive(value: object, name: str) -> float:
    """``value`` as a finite float ``> 0``, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ValueError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def predict_throughput(
    efficiency: npt.ArrayLike, *, reference_tokens_per_s: float, reference_efficiency: float = 1.0
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


def predict_from_reference(
    strategies: Sequence[str],
    efficiency: Sequence[float] | npt.NDArray[np.float64],
    *,
    reference: str,
    reference_tokens_per_s: float,
) -> npt.NDArray[np.float64]:
    """Useful tokens/s of each of ``strategies`` (``efficiency`` in the same order), given
    ``reference`` (one of them; the first if repeated) measured at ``reference_tokens_per_s``:
    :func:`predict_throughput` with the reference's efficiency.

    Examples
    --------
    >>> predict_from_reference(["sorted", "bucketed", "random"], [0.995, 0.868, 0.37],
    ...                        reference="sorted", reference_tokens_per_s=32_000).round().tolist()
    [32000.0, 27916.0, 11899.0]
    """
    names = list(strategies)
    if reference not in names:
        raise ValueError(f"reference strategy {reference!r} is not one of {', '.join(names)}")
    eff = np.asarray(efficiency, dtype=float)
    if eff.shape != (len(names),):
        raise ValueError(f"{len(names)} strategies need as many efficiencies, got shape {eff.shape}")
    rates = predict_throughput(
        eff,
        reference_tokens_per_s=reference_tokens_per_s,
        reference_efficiency=float(eff[names.index(reference)]),
    )
    return np.asarray(rates, dtype=float)
