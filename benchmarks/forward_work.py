"""Where the exact DP's forward pass spends its work on small files (not a timing): the rows it
follows against the rows an optimal plan needs, and whether the power bound would tighten
the backward pass's bounds at batch sizes where it is not applied.

Run it from the repository root (a minute; dense matrices, so files of at most 3,000 distinct
lengths)::

    PYTHONPATH=. .venv/bin/python benchmarks/forward_work.py

For each ``../shared/data/*.npy`` (unclipped) and batch sizes 8, 64 and 1,000, K = 6:

* ``gap``: ``optimum / back[K, 0] - 1`` (as ``bounds_gap.py``);
* ``rows``: the starts the forward pass follows (:func:`~analysis.optimize._pruned.live_room`
  and :func:`~analysis.optimize._pruned.needed` over ``low_costs``' rows, as the pass tests
  them; left out: the product path's tighter bound on the last bucket and its near ends, and
  the other fixed ``B``'s residue test, all of which only drop more, so the pass follows at
  most these) and ``span``, the ends they cost along their rows
  (each row's exact costs carry every residue ``r < B`` it needs from its start up to its last
  needed end: the pass's work is about ``span`` times the residues carried);
* ``ideal``: the same with every bound replaced by the exact cost and ``back`` by the exact
  optimum of the rest: the rows no pruning could drop;
* ``power``: the gap of a plain DP over the bounds (dense) with, at batch sizes up to
  ``POWER_ABOVE``, every bucket with a short batch also given the power bound of
  :mod:`analysis.optimize._exact` where higher (applied today only above ``POWER_ABOVE``).
"""

from __future__ import annotations

import numba
import numpy as np
from _common import SHARED_DATA

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.loaders import load_lengths
from analysis.optimize._backward import backward
from analysis.optimize._costs import Arrays
from analysis.optimize._exact import POWER_ABOVE, Short, carried_rows, exact_arrays, power_bound
from analysis.optimize._kernel import _NO_BOUNDS, _rows, cost_matrix
from analysis.optimize._lower import chain, fixed_chords, fixed_first, fixed_ratios, low_costs
from analysis.optimize._problem import Problem, build_problem, resolve_objective
from analysis.optimize._pruned import _tau, _uppers, live_room, needed, reach_table
from analysis.optimize._reference import reference_dp

K = 6
BATCH_SIZES = (8, 64, 1000)
_DENSE_MAX = 3_000


@numba.njit(cache=False)
def _bound_matrix(
    data: Arrays, short: Short, is_end: np.ndarray, pts: np.ndarray, power: bool
) -> np.ndarray:  # pragma: no cover - compiled
    """``out[a, c]``: the chord bounds on bucket ``(pts[a], pts[c]]`` (the rows' bounds below
    the power bound), raised where ``power`` to the power bound of every bucket with a short
    batch."""
    m = is_end.size - 1
    out = np.full((pts.size, pts.size), np.inf)
    ratio, work, row = np.empty(m + 1), np.empty(m + 1), np.empty(m + 1)
    for a in range(pts.size - 1):
        i = pts[a]
        fixed_ratios(i, data, short, work, ratio)
        chain(i + 2, m + 1, 0.0, data.step, ratio)  # ratio[j] = T_B(i, j)
        fixed_chords(i, data, short, is_end, ratio, row)
        row[i + 1] = fixed_first(i, data, short, is_end)
        bf = float(data.size[i + 1])
        for j in range(i + 2, m + 1):
            n = short.cum_float[j] - short.cum_float[i]
            if power and is_end[j] and n >= bf and n % bf > 0.0:
                t, top, top_q = ratio[j], short.base[j], short.q[j]
                low = power_bound(
                    n,
                    data.weight[j] - t,
                    t,
                    bf,
                    top,
                    top_q,
                    short.base[i + 1],
                    short.q[i + 1],
                    data.per_batch,
                )
                row[j] = max(row[j], low)
        for c in range(a + 1, pts.size):
            out[a, c] = row[pts[c]]
    return out


def _ideal(exact: np.ndarray, pts: np.ndarray, opt: float) -> tuple[int, int]:
    """Rows and span when every test reads exact costs: start ``pts[a]`` costs up to its last
    end ``j`` on some optimal plan (``best[k - 1] + cost + rest <= opt``)."""
    best, _ = reference_dp(exact, K)
    rest, _ = reference_dp(exact.T[::-1, ::-1].copy(), K)  # rest[k, c]: k buckets after pts[-1 - c]
    rows = span = 0
    for a in range(pts.size - 1):
        last = a
        for k in range(1, K + 1):
            total = best[k - 1, a] + exact[a, a + 1 :] + rest[K - k, ::-1][a + 1 :]
            hit = np.flatnonzero(total <= opt * (1.0 + 1e-12))
            last = max(last, a + 1 + int(hit[-1])) if hit.size else last
        rows, span = rows + (last > a), span + int(pts[last] - pts[a])
    return rows, span


def _followed(prob: Problem, data: Arrays, short: Short, best: np.ndarray) -> tuple[int, int, float]:
    """Rows the forward pass follows (at most), their span, and ``back``'s gap below the optimum."""
    m = prob.m
    rows, is_end = _rows(prob, K, prob.ends)
    want = np.zeros(K + 1, np.bool_)
    want[K] = True
    near = (0.0, np.empty((0, 0), np.int64), np.empty(0))
    if short.product:
        near = (_tau(data, short, rows, is_end), np.empty((K + 1, m + 1), np.int64), np.empty(m + 1))
    back = backward(data, short, _NO_BOUNDS, rows, is_end, K, near)
    upper = _uppers(data, short, _NO_BOUNDS, rows, is_end, back, carried_rows(data), want)
    reach = reach_table(back, upper)
    live, room, need = np.zeros(K + 1, np.bool_), np.empty(m + 1), np.zeros(m + 1, np.bool_)
    low, ratio, no_last = np.empty(m + 1), np.empty(m + 1), np.empty((0, 0), np.int64)
    followed = span = 0
    for i in rows:
        stop = live_room(int(i), best, back, upper, reach, live, room, no_last)
        if stop >= 0:
            low_costs(int(i), data, short, _NO_BOUNDS, is_end, ratio, low)
            _, last = needed(int(i), low, room, need, stop)
            followed, span = followed + (last > i), span + max(0, last - int(i))
    return followed, span, float(best[K, m] / back[K, 0] - 1.0)


def report(name: str, hist: LengthHistogram) -> None:
    """One line per batch size."""
    for b in BATCH_SIZES:
        rule = BatchRule(batch_size=b)
        prob = build_problem(hist, rule, 1, None, resolve_objective(rule, None, None))
        data, short = exact_arrays(prob)
        pts = np.r_[0, prob.ends].astype(np.int64)
        exact = cost_matrix(prob, pts)
        best_pts, _ = reference_dp(exact, K)
        best = np.full((K + 1, prob.m + 1), np.inf)
        best[:, pts] = best_pts
        opt = float(best_pts[K, -1])
        rows, span, gap = _followed(prob, data, short, best)
        ideal_rows, ideal_span = _ideal(exact, pts, opt)
        line = f"   {name:<24} batch {b:>5}: gap {gap:7.1e}  rows {rows:>4} span {span:>7,}"
        line += f"  ideal rows {ideal_rows} span {ideal_span:,}"
        if short.product and b <= POWER_ABOVE and short.power:
            is_end = _rows(prob, K, prob.ends)[1]
            gaps = [
                1.0 - reference_dp(_bound_matrix(data, short, is_end, pts, p), K)[0][K, -1] / opt
                for p in (False, True)
            ]
            line += f"  power: chords {gaps[0]:7.1e} -> {gaps[1]:7.1e}"
        print(line)


def main() -> None:
    print(f"K = {K}; the forward pass's rows and span, the ideal ones, and the power bound's gap:")
    for path in sorted(SHARED_DATA.glob("*.npy")):
        hist = load_lengths(path)
        if hist.n_distinct <= _DENSE_MAX:
            report(path.stem, hist)


if __name__ == "__main__":
    main()
