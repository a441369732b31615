"""Files and arrays in, :class:`~analysis.lengths.LengthHistogram` out (and step times in,
a validated frame out: :func:`load_step_times`; a gradient-noise model in and out:
:func:`load_gradient_noise`, :func:`save_gradient_noise`).

This package reads the length files (:mod:`analysis.measure` the raw text, through the
path expander and column picker here).  Files are read in chunks and counted into a running
histogram, so memory is one chunk plus the distinct lengths, never the number of rows; a
result is returned only when the whole input is valid.

Formats, chosen by extension (case-insensitive):

============================  ===============================================================
``.npy``                      a 1-D integer (or integral float) array, memory-mapped
``.txt``, ``.txt.gz``         one integer per line, no header
``.csv``, ``.tsv`` (``.gz``)  the ``length,count`` histogram (see :func:`save_histogram`), or
                              one column of per-sample lengths: ``column=``, or the only column
``.parquet``                  a column of integers, or of lists whose length is the sample's
``.jsonl``, ``.jsonl.gz``     one JSON object per line; ``field=`` holds an integer or a list
============================  ===============================================================

Where errors point: ``line N`` is the 1-based line of a text file as an editor shows it (in
a CSV/TSV the header is line 1, so the first value is on line 2); ``row N`` is the 0-based
index into an array, a ``.npy`` file or a Parquet file, as in ``arr[N]``.

A path is a file, a directory (every file below it, in sorted order, hidden ones skipped: a
folder of shards) or a glob (:func:`expand_paths`, the one expander of the package, which
:mod:`analysis.measure` uses too); the lengths column of a table is :func:`pick_column`'s.

Modules: ``_paths`` (which files, which column), ``_formats`` (one reader per format),
``_dask`` (the per-file map-reduce on a cluster), ``_noise`` (the gradient-noise model's
``.npz``); here, the public loaders.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from analysis.counting import LengthCounter
from analysis.lengths import LengthHistogram
from analysis.loaders._dask import DaskClient, load_lengths_distributed
from analysis.loaders._formats import SUPPORTED_EXTENSIONS, read_file
from analysis.loaders._noise import load_gradient_noise, save_gradient_noise
from analysis.loaders._paths import expand_paths, pick_column
from analysis.timing.step_time import check_step_times

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "DaskClient",
    "LengthSource",
    "expand_paths",
    "load_lengths",
    "load_lengths_distributed",
    "load_gradient_noise",
    "load_step_times",
    "pick_column",
    "save_gradient_noise",
    "save_histogram",
]

#: What :func:`load_lengths` takes: a histogram, a path (file, folder, glob), a frame, or lengths.
LengthSource: TypeAlias = (
    LengthHistogram | str | os.PathLike[str] | pd.DataFrame | pd.Series | np.ndarray | Iterable[int]
)


def save_histogram(hist: LengthHistogram, path: str | os.PathLike[str]) -> Path:
    """Write ``hist`` as a ``length,count`` CSV: that header, one row per distinct length.

    Rows are ascending by length; :func:`load_lengths` reads the file back exactly.

    Parameters
    ----------
    hist : LengthHistogram
        The histogram to write.
    path : str or os.PathLike
        Destination file (overwritten).

    Returns
    -------
    pathlib.Path
        ``path``.

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


def load_lengths(
    source: LengthSource,
    *,
    column: str | None = None,
    field: str | None = None,
    allow_zero: bool = False,
    progress: Callable[..., Iterable[Any]] | None = None,
    client: DaskClient | None = None,
) -> LengthHistogram:
    """Exact histogram of sample lengths from an array, a file, a folder or a glob of files.

    Parameters
    ----------
    source : array-like, LengthHistogram, str or os.PathLike
        Per-sample lengths (ndarray of any integer dtype, list, pandas Series, or a
        DataFrame with ``column``); a ``LengthHistogram`` (returned as is); a file path; a
        directory (every file below it, hidden ones skipped); or a glob pattern
        (``"shards/*.parquet"``, ``**`` recurses); the files, in sorted order, are all read
        and merged.  File formats are listed in the module docstring
        and in :data:`SUPPORTED_EXTENSIONS`.
    column : str, optional
        The lengths column of a CSV/TSV, Parquet file or DataFrame.  Needed only when the
        table has several columns (and, for CSV/TSV, is not the ``length,count`` format).
    field : str, optional
        The JSON field holding each sample's length (JSONL), needed only when the
        objects have several fields.  A list value counts its items.
    allow_zero : bool, default False
        Accept zero-length samples (usually a data bug, so rejected by default).
    progress : callable, optional
        Wraps the loop over files (e.g. ``tqdm``); the loader draws nothing itself.
    client : distributed.Client, optional
        Read the files on a Dask cluster's workers and merge their histograms exactly
        (:func:`load_lengths_distributed`), for length files too large for one
        machine; the result is identical.

    Returns
    -------
    LengthHistogram

    Raises
    ------
    ValueError
        One line naming the file, the ``line``/``row`` and the problem: missing or empty
        file, empty directory, unknown extension, glob matching nothing, missing column or
        field (the available ones are listed), unparsable value, blank line, bool, NaN,
        non-integral, negative or (unless ``allow_zero``) zero length.  Nothing is returned partially.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import numpy as np
    >>> from analysis import load_lengths
    >>> load_lengths(np.array([5, 2, 5], dtype=np.int32)).counts.tolist()
    [1, 2]
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a.txt").write_text("5\\n7\\n")
    >>> _ = (d / "b.csv").write_text("id,tokens\\n1,7\\n2,-3\\n")
    >>> load_lengths(d / "a.txt").total_tokens
    12
    >>> load_lengths(d / "b.csv", column="tokens")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: .../b.csv: line 3: negative length -3
    """
    if isinstance(source, LengthHistogram):
        return source
    if isinstance(source, str | os.PathLike):
        if client is not None:
            return load_lengths_distributed(source, client, column=column, field=field, allow_zero=allow_zero)
        return _load_paths(source, column=column, field=field, allow_zero=allow_zero, progress=progress)
    if client is not None:
        raise ValueError(
            f"client= reads files: pass a path, a folder or a glob, not a {type(source).__name__}"
        )
    if isinstance(source, bytes):
        raise ValueError("expected lengths or a path, got bytes")
    if field is not None or (column is not None and not isinstance(source, pd.DataFrame)):
        raise ValueError("column= and field= apply to files and DataFrames, not to arrays")
    if isinstance(source, pd.DataFrame):
        names = [str(c) for c in source.columns]
        name = pick_column(names, column, "the DataFrame")
        return LengthHistogram.from_lengths(source.iloc[:, names.index(name)], allow_zero=allow_zero)
    return LengthHistogram.from_lengths(source, allow_zero=allow_zero)


def load_step_times(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a CSV of step times (columns ``batch_size, length, seconds``: one row per timed
    step, as :func:`analysis.measure_step_times` returns), validated by
    :func:`analysis.timing.step_time.check_step_times` (errors name the file and the row).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     p = pathlib.Path(tmp) / "times.csv"
    ...     _ = p.write_text("batch_size,length,seconds\\n8,128,0.5\\n8,128,0.52\\n")
    ...     load_step_times(p)
       batch_size  length  seconds
    0           8     128     0.50
    1           8     128     0.52
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{path}: not a CSV of step times ({first})") from None
    return check_step_times(frame, str(path))


def _load_paths(
    source: str | os.PathLike[str],
    *,
    column: str | None,
    field: str | None,
    allow_zero: bool,
    progress: Callable[..., Iterable[Any]] | None,
) -> LengthHistogram:
    text, paths = expand_paths(source)
    counter = LengthCounter()
    for p in progress(paths, "loading") if progress is not None and len(paths) > 1 else paths:
        if read_file(p, counter, column=column, field=field, allow_zero=allow_zero) == 0:
            raise ValueError(f"{p}: empty file, no lengths")
    return counter.histogram(text)
