"""The one number formatter: how every face writes a number for people.

Notebook tables, the CLI, the report's prose (:mod:`analysis.narrative`) and the figures'
labels and ticks (:mod:`analysis.plots`) all format through these functions, so one number
reads the same wherever it is shown.  The engine keeps its numbers numeric; only the display
is formatted, here.  The conventions:

* **Tables** (:func:`tidy`, :func:`format_value`; the notebooks and the CLI): a column's kind
  comes from its name (:func:`column_kind`).  Ratios (efficiencies, shares, repeats) are
  percentages with 2 decimals (``90.99%``); counts of samples, tokens, batches, steps and
  lengths, their means and expectations included, are whole numbers with thousands separators
  (``14,096``); Python ints are exact with separators whatever the column; other floats have
  3 decimals (``0.702``, ``12,345.678``); a list reads ``[0, 7700]``; a missing value (None,
  NaN) is ``–``.
* **Prose** (every sentence of :mod:`analysis.narrative`): :func:`format_percent` in the
  ``"prose"`` style, 1 decimal (``36.1%``); a standard error in the ``"error"`` style; counts as
  :func:`format_count`.
* **Bounds** ("within", "at most", "up to"; :func:`format_bound`): rounded outward, so the
  bound written still holds (a gap of 0.0726 points is "within 0.08 points").
* **Figures** (bar and bucket labels, ticks): :func:`format_percent` in the ``"figure"`` style,
  the digits a small share needs (``81%``, ``5.1%``, ``0.04%``), ``n/a`` when missing;
  :func:`format_count` for counts and :func:`format_length` for length ticks.

Nothing reads ``-0``: a value that rounds to zero is written without its sign.  Imports
nothing from the project.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

__all__ = [
    "DISPLAY_NAMES",
    "MISSING",
    "CellValue",
    "ColumnKind",
    "column_kind",
    "format_bound",
    "format_count",
    "format_estimate",
    "format_length",
    "format_percent",
    "format_value",
    "k_range",
    "PercentStyle",
    "tidy",
]

#: How a missing value (None, NaN) reads in a table.
MISSING = "–"

#: How a column is shown: a ratio as a percentage, a count as a whole number, else a float.
ColumnKind = Literal["ratio", "count", "float"]

#: What a table cell may hold (anything else is shown with ``str``).
CellValue = int | float | str | np.generic | Sequence[int] | Sequence[float] | np.ndarray | None

#: Columns (or row labels) holding a ratio in [0, 1] (``efficiency_se`` too: a share's error).
_RATIO_WORDS = ("efficiency", "share", "composition_repeat", "mixing", "budget_fill")
#: Columns holding counts of samples, tokens, batches, steps or lengths (floats when averaged or
#: expected): every name the CLI prints as a count (``samples_clipped``, ``lower_edge``,
#: ``distinct_lengths``, ``predicted_tokens_per_s``, ``expected_padded_tokens``...) holds one.
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
#: How a column is named where people read it: the simulator's within-batch length CV is
#: "spread" on every face ("mixing" is only the variance share of :mod:`analysis.padding.mixing`).
DISPLAY_NAMES = {"within_batch_cv": "spread"}
#: A quantile's row label (``p10``, ``p95``, ``p999``): a length.
_QUANTILE = re.compile(r"p\d+")


def column_kind(label: str) -> ColumnKind:
    """How a column (or row label) is shown: ``"ratio"``, ``"count"`` or ``"float"``.

    Examples
    --------
    >>> column_kind("expected_efficiency"), column_kind("padded_tokens"), column_kind("within_batch_cv")
    ('ratio', 'count', 'float')
    >>> column_kind("share_samples_clipped"), column_kind("p95"), column_kind("straggler_factor")
    ('ratio', 'count', 'float')
    """
    name = str(label).lower()
    if any(w in name for w in _RATIO_WORDS):
        return "ratio"
    if (any(w in name for w in _COUNT_WORDS) and "cv" not in name) or _QUANTILE.fullmatch(name):
        return "count"
    return "float"


def _unsigned_zero(text: str) -> str:
    """``text`` without its minus sign when every digit in it is zero (``-0.00%`` -> ``0.00%``)."""
    return text[1:] if text.startswith("-") and not text.strip("-0.,%") else text


#: The named styles of :func:`format_percent`: how many decimals each kind of text shows.
PercentStyle = Literal["table", "prose", "figure", "error"]
#: Decimals by style (``None``: the digits a small share needs).
PERCENT_DIGITS: dict[str, int | None] = {"table": 2, "prose": 1, "figure": None, "error": None}


def format_percent(share: float, style: PercentStyle | int = "table", *, missing: str | None = None) -> str:
    """A share (``0.3612``) as a percentage, in one of the named styles:

    * ``"table"`` (the default): 2 decimals (``90.99%``), as every table shows a ratio;
    * ``"prose"``: 1 decimal (``36.1%``), as every sentence writes a share;
    * ``"figure"``: the digits a small share needs (whole percents from 10%, one decimal from
      1%, two significant digits below: ``81%``, ``5.1%``, ``0.04%``), ``n/a`` when missing;
    * ``"error"``: a standard error after ``±``, with the digits it needs (``0.04%``), so a
      small error is written as its value, never as ``<0.1%``;
    * an int: that many decimals (a sentence quoting a proven bound, say).

    A non-finite share reads ``missing`` (``–``; ``n/a`` in figures).  A share that is not 0
    never reads ``0.0%`` and one below 1 never reads ``100.0%``: they read ``<0.1%`` and
    ``>99.9%`` (at the decimals shown).

    Examples
    --------
    >>> format_percent(0.90994), format_percent(0.3612, "prose"), format_percent(-1e-12, "prose")
    ('90.99%', '36.1%', '0.0%')
    >>> format_percent(0.0004, "prose"), format_percent(0.99996, "prose"), format_percent(1.0, 1)
    ('<0.1%', '>99.9%', '100.0%')
    >>> [format_percent(x, "figure") for x in (0.8123, 0.0512, 0.000404, 0.0, -1e-12, 1.0)]
    ['81%', '5.1%', '0.04%', '0%', '0%', '100%']
    >>> [format_percent(x, "figure") for x in (0.00001, 0.996, 0.99996)]
    ['<0.01%', '99.6%', '>99.9%']
    >>> format_percent(0.00042, "error"), format_percent(0.0123, "error")
    ('0.042%', '1.2%')
    >>> format_percent(float("nan")), format_percent(float("nan"), "figure")
    ('–', 'n/a')
    """
    if isinstance(style, str):
        if style not in PERCENT_DIGITS:
            raise ValueError(
                f"style must be one of {sorted(PERCENT_DIGITS)} or a number of decimals, got {style!r}"
            )
        digits = PERCENT_DIGITS[style]
    else:
        digits = style
    if not np.isfinite(share):
        return missing if missing is not None else ("n/a" if style == "figure" else MISSING)
    pct = 100 * share
    if digits is None:
        if style == "error" and 0 < abs(pct) < 1:
            return _unsigned_zero(f"{pct:.2g}%")
        if 0 < pct < 0.005:
            return "<0.01%"
        if abs(pct) < 0.005:
            return "0%"
        if 99.5 <= pct < 100:
            digits = 1
        elif abs(pct) >= 9.95:
            return f"{pct:.0f}%"
        elif abs(pct) >= 0.995:
            return f"{pct:.1f}%"
        else:
            return f"{pct:.2g}%"
    unit = 10.0**-digits
    if 0 < pct < unit / 2:
        return f"<{unit:.{digits}f}%"
    if 100 - unit / 2 <= pct < 100:
        return f">{100 - unit:.{digits}f}%"
    return _unsigned_zero(f"{pct:.{digits}f}%")


def format_bound(value: float, digits: int = 2, *, upper: bool = True) -> str:
    """A bound, rounded outward so that it still holds: an upper bound ("within", "at most",
    "up to") rounded up, a lower bound (``upper=False``: "at least", a gain "less than" a
    threshold) rounded down; ``digits`` decimals, thousands separators.

    Examples
    --------
    >>> format_bound(0.0726), format_bound(0.07), format_bound(0.0726, upper=False)
    ('0.08', '0.07', '0.07')
    >>> format_bound(0.0), format_bound(1234.5, 0), format_bound(0.996, 2, upper=False)
    ('0.00', '1,235', '0.99')
    """
    scale = 10**digits
    scaled = round(float(value) * scale, 6)  # 0.07 * 100 is 7.000000000000001: still 7
    whole = math.ceil(scaled) if upper else math.floor(scaled)
    return _unsigned_zero(f"{whole / scale:,.{digits}f}")


def format_count(value: int | float | np.integer | np.floating) -> str:
    """A count or a token total: a whole number with thousands separators (an int exactly, a
    float such as an expectation rounded to the nearest whole); a non-finite float reads ``–``.

    Examples
    --------
    >>> format_count(58_079_769_825_652_108), format_count(1234.6), format_count(-0.0)
    ('58,079,769,825,652,108', '1,235', '0')
    """
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    if not math.isfinite(value):
        return MISSING
    return f"{round(value) + 0:,}"


def format_estimate(value: float, se: float, *, unit: str = "") -> str:
    """An estimate with its standard error: the error to two significant digits, the value to
    the same decimals but never more than it needs (four significant digits, so that a ratio
    near 1 still shows its departure; one decimal for a percentage; three significant digits
    when the error is 0 or not finite), ``unit`` after each (``"×"``; ``"%"`` for a share given
    as a fraction).

    Examples
    --------
    >>> format_estimate(89.7487, 7.0402), format_estimate(4.31617, 0.25544)
    ('89.7 ± 7.0', '4.32 ± 0.26')
    >>> format_estimate(0.0478179, 0.00341486), format_estimate(7.19934, 0.0)
    ('0.0478 ± 0.0034', '7.20')
    >>> format_estimate(0.89992, 0.0063617, unit="%"), format_estimate(1.1021, 0.0068, unit="×")
    ('90.0% ± 0.64%', '1.102× ± 0.0068×')
    >>> format_estimate(1.00387, 0.000082), format_estimate(0.97789, 0.00066, unit="%")
    ('1.004 ± 0.000082', '97.8% ± 0.066%')
    """
    scale = 100.0 if unit == "%" else 1.0
    v, s = scale * float(value), scale * float(se)
    if not math.isfinite(v):
        return MISSING
    magnitude = math.floor(math.log10(abs(v))) if v else 0
    if not math.isfinite(s) or s <= 0:
        return f"{v:,.{1 if unit == '%' else max(0, 2 - magnitude)}f}{unit}"
    needs = 1 if unit == "%" else max(0, 3 - magnitude)
    digits = max(0, 1 - math.floor(math.log10(s)))
    return f"{v:,.{min(digits, needs)}f}{unit} ± {s:,.{digits}f}{unit}"


def format_length(value: float) -> str:
    """A length tick: thousands separators, no trailing ``.0`` (``1,024``, ``2.5``).

    Examples
    --------
    >>> format_length(1024.0), format_length(2.5)
    ('1,024', '2.5')
    """
    if float(value).is_integer():
        return f"{int(value):,}"
    return _unsigned_zero(f"{value:,.1f}")


def k_range(ks: Sequence[int]) -> str:
    """Bucket counts as a label reads them: runs of consecutive K joined by an en dash.

    Examples
    --------
    >>> k_range([28, 29, 30, 31, 32]), k_range([5]), k_range([3, 5, 6, 7])
    ('28–32', '5', '3, 5–7')
    """
    ks = sorted(set(int(k) for k in ks))
    runs: list[list[int]] = []
    for k in ks:
        if runs and k == runs[-1][-1] + 1:
            runs[-1].append(k)
        else:
            runs.append([k])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)


def format_value(value: CellValue, kind: ColumnKind = "float") -> str:
    """One table cell as text; ``kind`` is ``"ratio"``, ``"count"`` or ``"float"``
    (see :func:`column_kind` and the module docstring).

    Examples
    --------
    >>> format_value(0.91034, "ratio"), format_value(14096.0, "count"), format_value(-1e-9)
    ('91.03%', '14,096', '0.000')
    >>> format_value(float("nan")), format_value([0, 7700]), format_value(3.3088e8, "count")
    ('–', '[0, 7700]', '330,880,000')
    >>> format_value(None), format_value(True), format_value(12345.6789)
    ('–', 'True', '12,345.679')
    """
    if isinstance(value, bool | np.bool_) or value is None or isinstance(value, str):
        return MISSING if value is None else str(value)
    if isinstance(value, int | np.integer):
        return format_count(value)
    if isinstance(value, float | np.floating):
        v = float(value)
        if math.isnan(v):
            return MISSING
        if kind == "ratio":
            return format_percent(v, "table")
        if kind == "count" or (v.is_integer() and abs(v) >= 1000):
            return format_count(v)
        return _unsigned_zero(f"{v:,.3f}")
    if isinstance(value, list | tuple | np.ndarray):  # edges, batch sizes: plain, unambiguous
        return "[" + ", ".join(str(v) for v in np.asarray(value).tolist()) + "]"
    return str(value)


def tidy(obj: pd.DataFrame | pd.Series) -> pd.DataFrame:
    """``obj`` with every cell formatted for reading (see the module docstring), its columns (a
    Series: its rows) named as people read them (:data:`DISPLAY_NAMES`: ``within_batch_cv`` is
    ``spread``).

    A frame is formatted column by column (the column name says ratio or count); a Series
    (e.g. :meth:`analysis.LengthHistogram.summary`) row by row, as a one-column frame.

    Examples
    --------
    >>> frame = pd.DataFrame({"efficiency": [0.9099, 0.38], "steps": [14096.0, 3849.0],
    ...                       "within_batch_cv": [-0.00001, 0.8]}, index=["bucketed", "random"])
    >>> tidy(frame)
             efficiency   steps spread
    bucketed     90.99%  14,096  0.000
    random       38.00%   3,849  0.800
    """
    if isinstance(obj, pd.Series):
        values = [format_value(v, column_kind(str(k))) for k, v in obj.items()]
        index = obj.index.map(lambda k: DISPLAY_NAMES.get(str(k), k))
        return pd.DataFrame({obj.name if obj.name is not None else "value": values}, index=index)
    out = pd.DataFrame(index=obj.index)
    for col in obj.columns:
        kind = column_kind(str(col))
        out[DISPLAY_NAMES.get(str(col), col)] = [format_value(v, kind) for v in obj[col].tolist()]
    return out
