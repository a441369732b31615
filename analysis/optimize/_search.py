"""Which bucket ends the DP may use: every distinct length (exact), or a candidate grid
refined at full resolution around the chosen edges (long context)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from analysis._validate import positive_int
from analysis.optimize._problem import Problem

#: With ``candidates="auto"``, the exact DP runs up to this many candidate edges; above it,
#: a grid of ``_AUTO_GRID`` candidates plus local refinement.
AUTO_CANDIDATES_ABOVE = 20_000
_AUTO_GRID = 1024
# The proof of a candidate search: passes of its DP over cells, the most cells (times the
# grid's), and the allowed ends on each side of a candidate edge that start as cells of their own.
_PROOF_ROUNDS = 3
_PROOF_CELLS = 3
_PROOF_CELLS_MIN = 4096
_PROOF_NEAR = 8
# The most memory the DP's tables may take (best, arg, the bounds' back and reach: 8 bytes
# each per bucket count and distinct length); a larger request is refused before allocating.
_DP_BYTES = 2 << 30
_CELL_BYTES = 32


def ends_to_edges(prob: Problem, ends: Sequence[int]) -> list[int]:
    return [0, *(int(prob.upper[j]) for j in ends)]


def edges_to_ends(prob: Problem, edges: Sequence[int]) -> list[int]:
    """Distinct-length index ending each bucket (``j`` with ``v_j <= edge < v_{j+1}``)."""
    idx = np.searchsorted(prob.lengths, np.asarray(edges[1:], dtype=np.int64), side="right")
    return [int(i) for i in idx]


def check_k(prob: Problem, n_buckets: Any) -> int:
    if isinstance(n_buckets, bool) or not isinstance(n_buckets, int | np.integer):
        raise ValueError(f"n_buckets must be a positive integer, got {n_buckets!r}")
    k = int(n_buckets)
    if k < 1:
        raise ValueError(f"n_buckets must be at least 1, got {k}")
    if k > prob.ends.size:
        what = (
            "distinct lengths"
            if prob.edge_multiple == 1
            else f"possible edges (multiples of edge_multiple = {prob.edge_multiple} between the lengths)"
        )
        raise ValueError(f"n_buckets = {k} exceeds the {prob.ends.size} {what}")
    return k


def _check_memory(prob: Problem, k_max: int) -> None:
    """Refuse, in one line, a bucket count whose DP tables would pass ``_DP_BYTES``."""
    per_k = (prob.m + 1) * _CELL_BYTES
    need = (k_max + 1) * per_k
    if need > _DP_BYTES:
        most = _DP_BYTES // per_k - 1
        raise ValueError(
            f"n_buckets = {k_max:,} on {prob.m:,} distinct lengths needs {need / 2**30:.1f} GiB for the "
            f"optimiser's tables, above its {_DP_BYTES / 2**30:.0f} GiB limit: at most {most:,} buckets here"
        )


def candidate_grid(prob: Problem, size: int) -> np.ndarray:
    """Candidate ends: sample quantiles and evenly spaced allowed ends (about ``size``)."""
    allowed = prob.ends
    n = int(prob.cum[-1])
    qs = np.linspace(0, 1, size // 2 + 2)[1:-1]
    by_count = np.searchsorted(prob.cum[1:], np.maximum(np.ceil(qs * n), 1), side="left") + 1
    by_count = allowed[np.minimum(np.searchsorted(allowed, by_count), allowed.size - 1)]
    even = allowed[np.linspace(0, allowed.size - 1, size // 2 + 1).round().astype(np.int64)]
    return np.unique(np.r_[by_count, even, prob.m])


def _refine(prob: Problem, k: int, ends: list[int], grid: np.ndarray, max_rounds: int = 20) -> list[int]:
    """Local full-resolution search: re-run the DP with every allowed end strictly between
    the grid neighbours of each current edge, until the solution stops moving."""
    from analysis.optimize._kernel import backtrack, solve_kernel  # numba: imported on first use

    allowed = prob.ends
    gridpos = np.searchsorted(allowed, grid)
    for _ in range(max_rounds):
        keep = [prob.m]
        for j in ends[:-1]:
            p = int(np.searchsorted(allowed, j))
            g = int(np.searchsorted(gridpos, p))
            lo = int(gridpos[g - 1]) if g > 0 else 0
            hi = int(gridpos[g + 1]) if g + 1 < gridpos.size else allowed.size - 1
            half = max(p - lo, hi - p, 1)
            keep.extend(allowed[max(0, p - half) : min(allowed.size, p + half + 1)].tolist())
        window = np.unique(np.array(keep, dtype=np.int64))
        best, arg = solve_kernel(prob, k, window, wanted=[k])
        new = backtrack(arg, k, prob.m)
        if new == ends:
            break
        ends = new
        # Every edge strictly inside the searched windows: re-centring would search (almost)
        # the same set again, so stop.
        pos = np.searchsorted(allowed, np.array(ends[:-1], dtype=np.int64))
        inside = np.searchsorted(allowed, window)
        if np.isin(pos - 1, inside).all() and np.isin(pos + 1, inside).all():
            break
    return ends


def use_grid(prob: Problem, candidates: Any) -> int | None:
    """Grid size to use, or None for the exact DP."""
    if candidates is None:
        return None
    if isinstance(candidates, str):
        if candidates != "auto":
            raise ValueError(f"candidates must be None, 'auto' or a positive int, got {candidates!r}")
        return _AUTO_GRID if prob.ends.size > AUTO_CANDIDATES_ABOVE else None
    size = positive_int(candidates, "candidates")
    return size if size < prob.ends.size else None


def optimal_ends(
    prob: Problem, ks: Sequence[int], grid_size: int | None
) -> tuple[dict[int, list[int]], dict[int, float]]:
    """Optimal bucket ends for each ``k`` in ``ks`` (one DP pass, following only plans that
    may be optimal for one of them), and for each a proven bound on how far its objective
    can be above the exact optimum (relative; 0: proven optimal)."""
    from analysis.optimize._kernel import backtrack, solve_kernel  # numba: imported on first use

    k_max = max(ks)
    _check_memory(prob, k_max)
    if grid_size is None:
        best, arg = solve_kernel(prob, k_max, prob.ends, wanted=ks)
        out = {}
        for k in ks:
            if not np.isfinite(best[k, prob.m]):
                raise ValueError(f"no {k} non-empty buckets: the bucket costs are not finite")
            out[k] = backtrack(arg, k, prob.m)
        return out, dict.fromkeys(ks, 0.0)
    grid = candidate_grid(prob, grid_size)
    best, arg = solve_kernel(prob, k_max, grid, wanted=ks)
    out = {}
    for k in ks:
        if not np.isfinite(best[k, prob.m]):
            raise ValueError(f"no {k} non-empty buckets on the candidate grid")
        out[k] = _refine(prob, k, backtrack(arg, k, prob.m), grid)
    return _prove(prob, out, grid)


def _near(prob: Problem, ends: list[int]) -> np.ndarray:
    """The allowed ends within ``_PROOF_NEAR`` places of each of ``ends``."""
    pos = np.searchsorted(prob.ends, np.asarray(ends, np.int64))
    at = (pos[:, None] + np.arange(-_PROOF_NEAR, _PROOF_NEAR + 1)).ravel()
    return np.asarray(prob.ends[np.clip(at, 0, prob.ends.size - 1)])


def _prove(
    prob: Problem, ends: dict[int, list[int]], grid: np.ndarray
) -> tuple[dict[int, list[int]], dict[int, float]]:
    """Bound how far the candidate search's ends are from the exact optimum, and tighten the
    bound until it proves them (or finds better ends) where it can.

    The DP over cells between ``points`` with each bucket's cost replaced by a lower bound
    from its cells (:func:`analysis.optimize._cells.cell_dp`) gives ``LB[k] <= OPT[k]``.
    ``points`` start as the grid and the allowed ends next to the candidate edges.  Where the
    bound's own optimum passes through a cell with more than one possible start, that cell
    is split into all of them, and the DP runs again (``_PROOF_ROUNDS`` passes, up to
    ``_PROOF_CELLS`` times the grid's cells or ``_PROOF_CELLS_MIN``); once every cell on it
    holds a single start, the bound's optimum is a real plan whose objective is the bound:
    it is optimal.
    The relative gap ``(UB - LB) / UB`` is reported for each ``k`` (``UB``: the objective of
    the ends returned)."""
    from analysis.optimize._cells import cell_dp  # numba: imported on first use
    from analysis.optimize._kernel import cost_matrix

    starts = np.r_[0, prob.ends[:-1]]
    ub = {}
    for k, e in ends.items():
        mat = cost_matrix(prob, np.array([0, *e], np.int64))
        ub[k] = float(sum(mat[t, t + 1] for t in range(k)))  # left to right, as the DPs add
    near = np.concatenate([_near(prob, e) for e in ends.values()])
    points = np.unique(np.r_[0, near, grid, prob.m])  # every point but m is a possible start
    most = max(_PROOF_CELLS * grid.size, _PROOF_CELLS_MIN)
    k_max = max(ends)
    lower = dict.fromkeys(ends, 0.0)
    out = dict(ends)
    for _ in range(_PROOF_ROUNDS):
        best, arg = cell_dp(prob, points, k_max)
        split: list[np.ndarray] = []
        for k in ends:
            lower[k] = float(best[k, -1])
            cells, b = [], points.size - 1
            for layer in range(k, 0, -1):
                b = int(arg[layer, b])
                cells.append(b)
            # the possible starts in each cell of the bound's optimum
            lo = np.searchsorted(starts, points[cells], side="left")
            hi = np.searchsorted(starts, np.r_[points[1:], prob.m + 1][cells], side="left")
            loose = [(int(a), int(z)) for a, z in zip(lo, hi, strict=True) if z - a > 1]
            if not loose:  # a real plan: its objective is the bound, at most the one found
                if lower[k] < ub[k]:
                    out[k] = sorted(int(points[c]) for c in cells if c > 0) + [prob.m]
                    ub[k] = lower[k]
                continue
            split.extend(starts[a:z] for a, z in loose)
        finer = np.unique(np.r_[points, *split]) if split else points
        if finer.size == points.size or finer.size > most:
            break
        points = finer
    gaps = {k: max(0.0, (ub[k] - lower[k]) / ub[k]) if ub[k] > 0 else 0.0 for k in ends}
    return out, gaps
