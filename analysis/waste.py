"""Edges, the batch rule, and the exact expected padding of a bucketed shuffle.

Definitions used everywhere in the workbench:

- ``edges``: increasing integers ``[e0, e1, ..., eK]``; bucket ``i`` holds lengths ``L`` with
  ``e_i < L <= e_{i+1}``; ``e0`` is below the shortest length, ``eK`` at or above the longest.
- A batch costs ``padded = size * longest`` (the longest rounded up to ``pad_to_multiple_of``);
  ``useful`` is the sum of its lengths; ``efficiency = useful / padded``.
- Batch rule: ``batch_size`` samples per batch, or ``max_tokens``, where bucket ``i`` takes
  ``max(1, max_tokens // e_{i+1})`` samples.

Pure functions of a :class:`~analysis.lengths.LengthHistogram`; nothing here reads a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from analysis.lengths import LengthHistogram, _positive_int

__all__ = ["check_edges", "bucket_batch_sizes", "check_batch_rule", "bucket_index"]


def check_edges(edges: Sequence[int] | np.ndarray, hist: LengthHistogram | None = None) -> list[int]:
    """Validate bucket ``edges`` and return them as a list of Python ints.

    Raises ``ValueError`` naming the problem: fewer than 2 values, non-integers, not
    strictly increasing, or (given ``hist``) not covering the data (``e0`` must be below the
    shortest length and ``eK`` at or above the longest).

    Examples
    --------
    >>> check_edges([0, 770, 1216, 1728, 2432, 3296, 8192])
    [0, 770, 1216, 1728, 2432, 3296, 8192]
    >>> check_edges([0, 10, 10])
    Traceback (most recent call last):
    ...
    ValueError: edges must be strictly increasing: edges[1] = 10 >= edges[2] = 10
    """
    if isinstance(edges, str | bytes):
        raise ValueError("edges must be a sequence of integers, got a string")
    values = list(np.asarray(edges).ravel().tolist()) if isinstance(edges, np.ndarray) else list(edges)
    if len(values) < 2:
        raise ValueError(f"edges need at least 2 values (one bucket), got {len(values)}")
    out = []
    for i, e in enumerate(values):
        if isinstance(e, bool | np.bool_):
            raise ValueError(f"edges[{i}] = {e!r} is not an integer")
        if isinstance(e, float) and e.is_integer():
            e = int(e)
        if not isinstance(e, int | np.integer):
            raise ValueError(f"edges[{i}] = {e!r} is not an integer")
        out.append(int(e))
    for i in range(len(out) - 1):
        if out[i] >= out[i + 1]:
            raise ValueError(
                f"edges must be strictly increasing: edges[{i}] = {out[i]} >= edges[{i + 1}] = {out[i + 1]}"
            )
    if out[0] < 0:
        raise ValueError(f"edges[0] = {out[0]} is negative")
    if hist is not None:
        if out[0] >= hist.min:
            raise ValueError(
                f"edges do not cover the data: edges[0] = {out[0]} must be below the shortest length {hist.min}"
            )
        if out[-1] < hist.max:
            raise ValueError(
                f"edges do not cover the data: edges[-1] = {out[-1]} is below the longest length {hist.max}"
            )
    return out


def check_batch_rule(batch_size: Any = None, max_tokens: Any = None) -> tuple[int | None, int | None]:
    """Exactly one of ``batch_size`` and ``max_tokens``, as positive ints.

    Examples
    --------
    >>> check_batch_rule(batch_size=8)
    (8, None)
    >>> check_batch_rule()
    Traceback (most recent call last):
    ...
    ValueError: give exactly one of batch_size and max_tokens (got neither)
    """
    if (batch_size is None) == (max_tokens is None):
        which = "neither" if batch_size is None else "both"
        raise ValueError(f"give exactly one of batch_size and max_tokens (got {which})")
    if batch_size is not None:
        return _positive_int(batch_size, "batch_size"), None
    return None, _positive_int(max_tokens, "max_tokens")


def bucket_batch_sizes(edges: Sequence[int], *, batch_size: int | None = None,
                       max_tokens: int | None = None) -> list[int]:
    """Samples per batch in each bucket under the batch rule.

    With ``max_tokens`` a bucket takes ``max(1, max_tokens // upper_edge)`` samples, as
    token-budget trainers do.

    Examples
    --------
    >>> bucket_batch_sizes([0, 1000, 4000], max_tokens=16384)
    [16, 4]
    >>> bucket_batch_sizes([0, 1000, 4000], batch_size=8)
    [8, 8]
    """
    edges = check_edges(edges)
    batch_size, max_tokens = check_batch_rule(batch_size, max_tokens)
    if batch_size is not None:
        return [batch_size] * (len(edges) - 1)
    return [max(1, max_tokens // upper) for upper in edges[1:]]


def bucket_index(values: np.ndarray, edges: Sequence[int]) -> np.ndarray:
    """Bucket of each length: ``i`` such that ``edges[i] < L <= edges[i+1]``.

    Assumes ``edges`` already cover ``values`` (see :func:`check_edges`).

    Examples
    --------
    >>> bucket_index(np.array([1, 10, 11, 30]), [0, 10, 30]).tolist()
    [0, 0, 1, 1]
    """
    return np.searchsorted(np.asarray(edges[1:-1], dtype=np.int64), values, side="left")
