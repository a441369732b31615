"""One place that checks what callers pass: per-sample length arrays, positive integers, random
generators and names chosen from a list (a strategy, a method).

Every module that takes lengths or counts from a user validates them here, so the messages
(one line, naming the file and row) are the same whichever face the data came through; the
same for ``rng`` (a ``numpy.random.Generator``, never a seed or the legacy global state) and
for a name that must be one of a fixed list (the list itself lives with what it names).
Imports nothing from the project.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "check_bucket_count",
    "ZeroLengthError",
    "as_length_array",
    "check_rng",
    "known_name",
    "positive_int",
    "where_prefix",
]

_INT64_MAX = np.iinfo(np.int64).max


class ZeroLengthError(ValueError):
    """A sample of length zero where none is allowed (``where`` names the file and row), so
    a face can say how to drop them (the CLI: ``--drop-zero``)."""

    def __init__(self, message: str, where: str) -> None:
        super().__init__(message)
        self.where = where


def where_prefix(source: str | None, row: int | None, unit: str = "row") -> str:
    """Prefix for an error message: ``"file.csv: line 3: "``, ``"row 3: "`` or ``""``."""
    parts = [p for p in (source, None if row is None else f"{unit} {row}") if p]
    return ": ".join(parts) + ": " if parts else ""


def as_length_array(
    values: object,
    *,
    allow_zero: bool,
    source: str | None = None,
    first_row: int = 0,
    unit: str = "row",
    what: str = "length",
    zero_hint: str = "pass allow_zero=True if empty samples are intended",
) -> np.ndarray:
    """Validate per-sample lengths and return them as a 1-D ``int64`` array.

    Raises a one-line ``ValueError`` naming ``source`` and the offending position,
    ``"{unit} {first_row + i}"`` (e.g. ``"row 3"`` for the 0-based index of an array or
    ``"line 5"`` for a text file), for: bool, NaN/inf, non-integral float, negative (or
    zero unless ``allow_zero``), too large for int64, non-numeric values, or not 1-D.
    ``what`` names the quantity in the message (``"length"`` or ``"count"``); ``zero_hint``
    ends a zero length's message (the caller's own remedy: a loader's ``allow_zero``).
    """
    if isinstance(values, pd.Series | pd.Index):
        values = values.to_numpy()
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{where_prefix(source, None)}expected a sequence of lengths, got a string")
    arr = np.asarray(values)
    if (
        isinstance(values, list | tuple)
        and arr.ndim == 1
        and (arr.dtype.kind not in "iufb" or (arr.dtype.kind != "b" and _has_bool(values)))
    ):
        # NumPy turns [1, True] into [1, 1] and [1, "7"] into strings: check each item.
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
    if arr.ndim != 1:
        if arr.ndim == 0:
            raise ValueError(f"{where_prefix(source, None)}expected a sequence of lengths, got a scalar")
        raise ValueError(
            f"{where_prefix(source, None)}expected a 1-D sequence of lengths, got shape {arr.shape}"
        )
    kind = arr.dtype.kind
    if kind == "O":
        arr = _object_to_int64(arr, source=source, first_row=first_row, unit=unit, what=what)
    elif kind == "b":
        raise ValueError(f"{where_prefix(source, first_row, unit)}bool is not a {what} (dtype bool)")
    elif kind == "f":
        for bad, problem in (
            (~np.isfinite(arr), "is {!r}, not a number"),
            (arr != np.floor(arr), "{!r} is not an integer"),
            (arr >= 2.0**63, "{!r} is too large"),
        ):
            _raise_at_first(bad, arr, problem, source=source, first_row=first_row, unit=unit, what=what)
        arr = arr.astype(np.int64)
    elif kind == "u":
        if arr.dtype.itemsize == 8:
            bad = arr > np.uint64(_INT64_MAX)
            _raise_at_first(
                bad, arr, "{!r} is too large", source=source, first_row=first_row, unit=unit, what=what
            )
        arr = arr.astype(np.int64)
    elif kind == "i":
        arr = arr.astype(np.int64, copy=False)
    else:
        raise ValueError(f"{where_prefix(source, None)}{what}s must be integers, got dtype {arr.dtype}")
    bad = arr < 0 if allow_zero else arr <= 0
    if bad.any():
        i = int(np.argmax(bad))
        where = where_prefix(source, first_row + i, unit)
        if arr[i] < 0:
            raise ValueError(f"{where}negative {what} {int(arr[i])}")
        raise ZeroLengthError(f"{where}zero {what} 0 ({zero_hint})", where.rstrip(": "))
    return arr


def _raise_at_first(
    bad: np.ndarray,
    arr: np.ndarray,
    problem: str,
    *,
    source: str | None,
    first_row: int,
    unit: str,
    what: str,
) -> None:
    """A ``ValueError`` at the first ``bad`` row: ``"{where}{what} " + problem.format(value)``."""
    if bad.any():
        i = int(np.argmax(bad))
        value = arr[i].item()
        raise ValueError(f"{where_prefix(source, first_row + i, unit)}{what} {problem.format(value)}")


def _has_bool(values: list[Any] | tuple[Any, ...]) -> bool:
    """Whether a Python sequence holds a bool (which NumPy would silently read as 0 or 1)."""
    kinds = set(map(type, values))
    return bool in kinds or np.bool_ in kinds


def _object_to_int64(
    arr: np.ndarray, *, source: str | None, first_row: int, unit: str = "row", what: str = "length"
) -> np.ndarray:
    """Convert an object array (a Python list with big ints, None, mixed types) exactly."""
    out = np.empty(arr.shape, dtype=np.int64)
    for i, v in enumerate(arr.tolist()):
        where = where_prefix(source, first_row + i, unit)
        if isinstance(v, bool | np.bool_):
            raise ValueError(f"{where}bool {v!r} is not a {what}")
        if isinstance(v, int | np.integer):
            iv = int(v)
        elif isinstance(v, float | np.floating):
            if not math.isfinite(v):
                raise ValueError(f"{where}{what} is {v!r}, not a number")
            if not float(v).is_integer():
                raise ValueError(f"{where}{what} {v!r} is not an integer")
            iv = int(v)
        else:
            raise ValueError(f"{where}{v!r} is not a {what} (type {type(v).__name__})")
        if iv > _INT64_MAX:
            raise ValueError(f"{where}{what} {iv} is too large")
        if iv < -_INT64_MAX:
            raise ValueError(f"{where}negative {what} {iv}")
        out[i] = iv
    return out


def positive_int(value: object, name: str) -> int:
    """``value`` as a positive int, or a ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_bucket_count(n_buckets: int, distinct: int) -> None:
    """Refuse, in one line saying how to fix it, a K (``--buckets``) above the data's
    ``distinct`` lengths: the one message of the CLI's commands and the report.

    Examples
    --------
    >>> check_bucket_count(6, 1)
    Traceback (most recent call last):
    ...
    ValueError: --buckets 6 (n_buckets) exceeds the 1 distinct length of the data: give
    --buckets 1 or fewer, or --buckets auto for the K the gain rule suggests
    """
    if n_buckets > distinct:
        raise ValueError(
            f"--buckets {n_buckets} (n_buckets) exceeds the {distinct:,} distinct length"
            f"{'' if distinct == 1 else 's'} of the data: give --buckets {distinct} or fewer, or "
            "--buckets auto for the K the gain rule suggests"
        )


def check_rng(rng: object) -> np.random.Generator:
    """``rng`` itself when it is a ``numpy.random.Generator``, else a ``ValueError`` (a seed or
    ``np.random.RandomState`` would make runs irreproducible in a way nobody sees).

    Examples
    --------
    >>> check_rng(42)
    Traceback (most recent call last):
    ...
    ValueError: rng must be a numpy.random.Generator, got int
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def known_name(name: str, choices: Sequence[str], what: str) -> str:
    """``name`` when it is one of ``choices``, else a ``ValueError`` that lists them; ``what``
    says what is named (``"strategy"``, ``"method"``).

    Examples
    --------
    >>> known_name("shuffled", ("sorted", "random"), "strategy")
    Traceback (most recent call last):
    ...
    ValueError: unknown strategy 'shuffled'; choose one of sorted, random
    """
    if name not in choices:
        raise ValueError(f"unknown {what} {name!r}; choose one of {', '.join(choices)}")
    return name
