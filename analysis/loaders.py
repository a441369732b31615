"""Files and arrays in, :class:`~analysis.lengths.LengthHistogram` out.

Only this module touches file formats.  Work in progress: the full loader (npy, txt, csv,
tsv, parquet, jsonl, globs) is being written; the ``length,count`` CSV works now.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.lengths import LengthHistogram

__all__ = ["load_lengths", "save_histogram"]


def save_histogram(hist: LengthHistogram, path: str | os.PathLike[str]) -> Path:
    """Write ``hist`` as a ``length,count`` CSV (header, one row per distinct length, ascending).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from analysis import LengthHistogram, load_lengths, save_histogram
    >>> h = LengthHistogram.from_lengths([3, 1, 3])
    >>> p = save_histogram(h, pathlib.Path(tempfile.mkdtemp()) / "h.csv")
    >>> p.read_text()
    'length,count\\n1,1\\n3,2\\n'
    >>> load_lengths(p) == h
    True
    """
    if not isinstance(hist, LengthHistogram):
        raise ValueError(f"expected a LengthHistogram, got {type(hist).__name__}")
    path = Path(path)
    lines = ["length,count"]
    lines += [f"{n},{c}" for n, c in zip(hist.lengths.tolist(), hist.counts.tolist())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def load_lengths(source: Any, *, column: str | None = None, field: str | None = None,
                 allow_zero: bool = False) -> LengthHistogram:
    """Read lengths from an array or a ``length,count`` CSV (full loader in progress)."""
    if isinstance(source, LengthHistogram):
        return source
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"{path}: no such file")
        df = pd.read_csv(path)
        if list(df.columns) == ["length", "count"]:
            return LengthHistogram.from_counts(df["length"].to_numpy(), df["count"].to_numpy(),
                                               allow_zero=allow_zero)
        col = column if column is not None else df.columns[0]
        return LengthHistogram.from_lengths(df[col], allow_zero=allow_zero)
    return LengthHistogram.from_lengths(source, allow_zero=allow_zero)
