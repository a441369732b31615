"""Tables for people: counts with thousands separators, ratios as percentages.

A face (notebook, CLI) shows engine frames through :func:`tidy`, which returns a frame of
strings: integers and integral counts as ``1,234``, ratios (efficiencies, shares, repeats) as
``91.03%``, other floats with 3 decimals, never ``-0.000``, missing values as ``–``.  The engine
keeps its numbers numeric; only the display is formatted, in this one place.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["column_kind", "format_value", "tidy"]

#: Columns (or row labels) holding a ratio in [0, 1].
_RATIO_WORDS = ("efficiency", "share", "composition_repeat")
#: Columns holding counts of samples, tokens, batches or steps (floats when averaged).
_COUNT_WORDS = (
    "tokens",
    "steps",
    "batches",
    "samples",
    "size",
    "edge",
    "max_len",
    "length",
    "per_s",
    "n_buckets",
    "buckets",
    "min",
    "max",
    "p10",
    "p50",
    "p90",
    "p99",
    "mean",
)


def column_kind(label: str) -> str:
    """How a column (or row label) is shown: ``"ratio"``, ``"count"`` or ``"float"``.

    Examples
    --------
    >>> column_kind("expected_efficiency"), column_kind("padded_tokens"), column_kind("within_batch_cv")
    ('ratio', 'count', 'float')
    """
    name = str(label).lower()
    if any(w in name for w in _RATIO_WORDS):
        return "ratio"
    if any(w in name for w in _COUNT_WORDS) and "cv" not in name:
        return "count"
    return "float"


def format_value(value: Any, kind: str = "float") -> str:
    """One cell as text; ``kind`` is ``"ratio"``, ``"count"`` or ``"float"``.

    Examples
    --------
    >>> format_value(0.91034, "ratio"), format_value(14096.0, "count"), format_value(-1e-9)
    ('91.03%', '14,096', '0.000')
    >>> format_value(float("nan")), format_value([0, 7700]), format_value(3.3088e8, "count")
    ('–', '[0, 7700]', '330,880,000')
    """
    if isinstance(value, bool | np.bool_) or value is None or isinstance(value, str):
        return "–" if value is None else str(value)
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    if isinstance(value, float | np.floating):
        v = float(value)
        if math.isnan(v):
            return "–"
        if kind == "ratio":
            text = f"{100 * v:.2f}%"
            return "0.00%" if text == "-0.00%" else text
        if kind == "count" or (v.is_integer() and abs(v) >= 1000):
            return f"{v:,.0f}"
        text = f"{v:.3f}"
        return "0.000" if text == "-0.000" else text
    if isinstance(value, list | tuple | np.ndarray):  # edges, batch sizes: plain, unambiguous
        return "[" + ", ".join(str(v) for v in np.asarray(value).tolist()) + "]"
    return str(value)


def tidy(obj: pd.DataFrame | pd.Series) -> pd.DataFrame:
    """``obj`` with every cell formatted for reading (see the module docstring).

    A frame is formatted column by column (the column name says ratio or count); a Series
    (e.g. :meth:`analysis.LengthHistogram.summary`) row by row, as a one-column frame.

    Examples
    --------
    >>> frame = pd.DataFrame({"efficiency": [0.9099, 0.38], "steps": [14096.0, 3849.0],
    ...                       "lag1_autocorr": [-0.00001, 0.8]}, index=["bucketed", "random"])
    >>> tidy(frame)
             efficiency   steps lag1_autocorr
    bucketed     90.99%  14,096         0.000
    random       38.00%   3,849         0.800
    """
    if isinstance(obj, pd.Series):
        values = [format_value(v, column_kind(str(k))) for k, v in obj.items()]
        return pd.DataFrame({obj.name if obj.name is not None else "value": values}, index=obj.index)
    out = pd.DataFrame(index=obj.index)
    for col in obj.columns:
        kind = column_kind(str(col))
        out[col] = [format_value(v, kind) for v in obj[col].tolist()]
    return out
