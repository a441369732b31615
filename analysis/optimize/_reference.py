"""The plain DP over a dense matrix of bucket costs: the reference the compiled kernel is
tested against (``tests/optimize/test_optimize.py``) and timed beside (``benchmarks/bench_kernel.py``).

It decides nothing of its own: the costs come from the kernel's ``_cost_matrix`` and the DP is
the textbook one, end by end with NumPy's first-minimum ``argmin``.
"""

from __future__ import annotations

import numpy as np


def reference_dp(costs: np.ndarray, k_max: int) -> tuple[np.ndarray, np.ndarray]:
    """``D[k, j] = min_i D[k-1, i] + costs[i, j]`` for ``k = 1..k_max``, and its argmin.

    Parameters
    ----------
    costs : numpy.ndarray
        Square matrix: ``costs[i, j]`` is the objective of the bucket from point ``i``
        (exclusive) to point ``j`` (inclusive); ``inf`` where ``i >= j`` or the bucket is not
        allowed.
    k_max : int
        The most buckets.

    Returns
    -------
    best, arg : numpy.ndarray
        ``(k_max + 1, p)`` tables: the least objective of ``k`` buckets covering points
        ``0..j`` (``inf`` where none does) and the start of its last bucket (the smallest
        start on a tie).

    Examples
    --------
    >>> inf = np.inf
    >>> costs = np.array([[inf, 1.0, 5.0], [inf, inf, 1.0], [inf, inf, inf]])
    >>> best, arg = reference_dp(costs, 2)
    >>> best[1, 2], best[2, 2], int(arg[2, 2])
    (np.float64(5.0), np.float64(2.0), 1)
    """
    p = costs.shape[0]
    columns = np.asfortranarray(costs)  # costs[:j, j] contiguous
    best = np.full((k_max + 1, p), np.inf)
    arg = np.zeros((k_max + 1, p), np.int64)
    best[0, 0] = 0.0
    for k in range(1, k_max + 1):
        for j in range(1, p):
            vals = best[k - 1, :j] + columns[:j, j]
            i = int(np.argmin(vals))
            if vals[i] < np.inf:
                best[k, j], arg[k, j] = vals[i], i
    return best, arg
