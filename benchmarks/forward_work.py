"""Where the exact DP's forward pass spends its work on small files (not a timing): the rows it
follows against the rows an optimal plan needs, and which bound on the short batch would
tighten the backward pass (the power bound where it is not applied; chords through ``E_s`` at
more subset sizes).

Run it from the repository root (a minute; dense matrices, so files of at most 3,000 distinct
lengths)::

    PYTHONPATH=. .venv/bin/python benchmarks/forward_work.py
    PYTHONPATH=. .venv/bin/python benchmarks/forward_work.py --cost   # and the passes' CPU time
    PYTHONPATH=. .venv/bin/python benchmarks/forward_work.py --causes # exact tests, perfect upper

For each ``../shared/data/*.npy`` (unclipped) and batch sizes 8, 64 and 1,000, K = 6:

* ``gap``: ``optimum / back[K, 0] - 1`` (as ``bounds_gap.py``; ``back`` of the bounds without
  the chords, ``Short.chords`` false as ``exact_arrays`` gives it, where the DP now takes them
  if its bounds are loose: :func:`~analysis.optimize._pruned._loose`, ``chords_gate.py``);
* ``rows``: the starts the forward pass follows (:func:`~analysis.optimize._pruned.live_room`
  and :func:`~analysis.optimize._pruned.needed` over ``low_costs``' rows, as the pass tests
  them; left out: the product path's tighter bound on the last bucket and its near ends, and
  the other fixed ``B``'s residue test, all of which only drop more, so the pass follows at
  most these) and ``span``, the ends they cost along their rows
  (each row's exact costs carry every residue ``r < B`` it needs from its start up to its last
  needed end: the pass's work is about ``span`` times the residues carried);
* ``exact back``: the rows followed were ``back`` the exact optimum of the rest, the upper
  bounds and the bucket tests as they are (what a tighter backward pass could reach);
* ``ideal``: the same with every bound replaced by the exact cost and ``back`` by the exact
  optimum of the rest: the rows no pruning could drop;
* ``power``: the gap of a plain DP over the bounds (dense) with, at batch sizes up to
  ``POWER_ABOVE``, every bucket with a short batch also given the power bound of
  :mod:`analysis.optimize._exact` where higher (applied today only above ``POWER_ABOVE``);
* ``chords at 2**t``: the gap, and the rows followed with ``back`` from it, of a plain DP over
  bounds whose short batch of ``r`` reads ``E_r`` on the chord between the nearest subset sizes
  of ``1, 2, 4, ..., B`` around ``r`` (``E_s`` concave in ``s``: the module docstring of
  :mod:`analysis.optimize._exact`; each ``T_s`` a running sum of its own along the row, its
  ratios a product of quotients where a length holds at most 8 samples, else from ``lgamma``,
  so about ``1e-9`` of itself: ``excess`` is the most a bound lies above the exact cost,
  relative, which that rounding explains).  Padding objectives only.
  ``at B/4, B/2``: the same through ``E_1``, ``E_{B/4}``, ``E_{B/2}`` and ``E_B`` alone (two
  running sums more per row, not ``log2 B - 1``).

``--causes`` adds the rows followed were each bucket's test read its exact cost (``back`` as
it is), and were the upper bound the optimum: neither is what leaves the rows in.
``--cost`` (one core) adds each rule's CPU time for the forward pass as it runs and as it would
run given ``back`` raised to the chords' (what the tighter bound would save), and for the
tiled backward pass and a plain, untiled one over those chords (every row's ``T_s`` carried
along it, ``min`` over every end: what the tighter bound would cost without the tiled pass's
arithmetic).
"""

from __future__ import annotations

import math
import os
import sys
import time

import numba
import numpy as np
from _common import SHARED_DATA, median_seconds

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.loaders import load_lengths
from analysis.optimize._backward import backward
from analysis.optimize._budget import SLACK
from analysis.optimize._costs import Arrays
from analysis.optimize._exact import POWER_ABOVE, Short, carried_rows, exact_arrays, power_bound
from analysis.optimize._kernel import _NO_BOUNDS, _rows, backtrack, cost_matrix
from analysis.optimize._layers import run_layers
from analysis.optimize._lower import chain, fixed_chords, fixed_first, fixed_ratios, low_costs
from analysis.optimize._problem import Problem, build_problem, resolve_objective
from analysis.optimize._pruned import _forwards, _tau, _uppers, live_room, needed, reach_table
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


@numba.njit(cache=False)
def _chord_sizes(b: float, few: bool) -> list[float]:  # pragma: no cover - compiled
    """The subset sizes the chords pass through: ``1, 2, 4, ...`` below ``B``, then ``B``; with
    ``few`` only ``1``, ``B / 4``, ``B / 2`` (whole, above 1) and ``B``."""
    sizes = [1.0]
    if few:
        for s in (math.floor(b / 4.0), math.floor(b / 2.0)):
            if s > sizes[-1] and s < b:
                sizes.append(s)
    else:
        while sizes[-1] * 2.0 < b:
            sizes.append(sizes[-1] * 2.0)
    sizes.append(b)
    return sizes


@numba.njit(cache=False, inline="always")
def _ratio(x0: float, x1: float, s: float) -> float:  # pragma: no cover - compiled
    """``C(x0, s) / C(x1, s)``: a product of ``x1 - x0`` quotients where at most 8, else from
    ``lgamma``."""
    if x0 < s:
        return 0.0
    if x1 - x0 <= 8.0:
        p = 1.0
        for t in range(int(x1 - x0)):
            p *= (x1 - s - t) / (x1 - t)
        return p
    return math.exp(
        math.lgamma(x0 + 1) - math.lgamma(x0 - s + 1) - math.lgamma(x1 + 1) + math.lgamma(x1 - s + 1)
    )


@numba.njit(cache=False)
def _chord_row(
    i: int,
    cum: np.ndarray,
    w: np.ndarray,
    sizes: list[float],
    b: float,
    per_batch: float,
    t: np.ndarray,
    cost: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``cost[j]`` for ``j > i``: the bound on bucket ``(i, j]`` whose short batch of ``r``
    reads ``E_r`` on the chord between the nearest of ``sizes`` around ``r`` (``E_1`` the mean),
    each ``T_s`` carried along the row in ``t`` (padding: ``g`` is ``w``, the same for every
    batch size)."""
    ns = len(sizes) - 1
    total = 0.0
    t[:] = 0.0
    for j in range(i + 1, cum.size):
        x1 = cum[j] - cum[i]
        for k in range(1, ns + 1):  # (k = 0: the mean)
            t[k] = (t[k] + w[j] - w[j - 1]) * _ratio(cum[j - 1] - cum[i], x1, sizes[k]) if j > i + 1 else 0.0
        total += w[j] * (cum[j] - cum[j - 1])
        full = x1 // b
        r = x1 - full * b
        c = x1 * w[j] + per_batch if x1 < b else full * b * (w[j] - t[ns]) + per_batch * full
        if x1 >= b and r > 0:
            k = 1
            while sizes[k] < r:
                k += 1
            e_lo = total / x1 if k == 1 else w[j] - t[k - 1]
            c += (
                r * (e_lo + (r - sizes[k - 1]) / (sizes[k] - sizes[k - 1]) * (w[j] - t[k] - e_lo)) + per_batch
            )
        cost[j] = c


@numba.njit(cache=False)
def _chords_matrix(
    cum: np.ndarray, w: np.ndarray, is_end: np.ndarray, pts: np.ndarray, b: float, per_batch: float, few: bool
) -> np.ndarray:  # pragma: no cover - compiled
    """``out[a, c]``: :func:`_chord_row`'s bound on bucket ``(pts[a], pts[c]]`` through the
    sizes of :func:`_chord_sizes`."""
    sizes = _chord_sizes(b, few)
    out = np.full((pts.size, pts.size), np.inf)
    t, cost = np.zeros(len(sizes)), np.empty(is_end.size)
    for a in range(pts.size - 1):
        _chord_row(pts[a], cum, w, sizes, b, per_batch, t, cost)
        for c in range(a + 1, pts.size):
            out[a, c] = cost[pts[c]]
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


def _followed(
    prob: Problem,
    data: Arrays,
    short: Short,
    best: np.ndarray,
    exact_back: np.ndarray | None = None,
    exact_rows: np.ndarray | None = None,
    perfect_upper: bool = False,
) -> tuple[int, int, float]:
    """Rows the forward pass follows (at most), their span, and ``back``'s gap below the
    optimum; with ``exact_back`` (the exact optimum of ``k`` buckets after each end) the rows
    it would follow were ``back`` that, with the same upper bounds; with ``exact_rows``
    (``exact_rows[i]``: start ``i``'s exact costs) were each bucket's test read its exact
    cost; with ``perfect_upper`` were the upper bound the optimum (with the margin)."""
    m = prob.m
    rows, is_end = _rows(prob, K, prob.ends)
    want = np.zeros(K + 1, np.bool_)
    want[K] = True
    near = (0.0, np.empty((0, 0), np.int64), np.empty(0))
    if short.product:
        near = (_tau(data, short, rows, is_end), np.empty((K + 1, m + 1), np.int64), np.empty(m + 1))
    back = backward(data, short, _NO_BOUNDS, rows, is_end, K, near)
    upper = _uppers(data, short, _NO_BOUNDS, rows, is_end, back, carried_rows(data), want)
    back = back if exact_back is None else exact_back
    upper[K] = best[K, m] * (1.0 + SLACK) if perfect_upper else upper[K]
    reach = reach_table(back, upper)
    live, room, need = np.zeros(K + 1, np.bool_), np.empty(m + 1), np.zeros(m + 1, np.bool_)
    low, ratio, no_last = np.empty(m + 1), np.empty(m + 1), np.empty((0, 0), np.int64)
    followed = span = 0
    for i in rows:
        stop = live_room(int(i), best, back, upper, reach, live, room, no_last)
        if stop >= 0:
            low_costs(int(i), data, short, _NO_BOUNDS, is_end, ratio, low)
            low = low if exact_rows is None else exact_rows[i]
            _, last = needed(int(i), low, room, need, stop)
            followed, span = followed + (last > i), span + max(0, last - int(i))
    return followed, span, float(best[K, m] / back[K, 0] - 1.0)


@numba.njit(cache=False)
def _plain_chords_back(
    cum: np.ndarray, w: np.ndarray, is_end: np.ndarray, rows: np.ndarray, b: float, per_batch: float
) -> np.ndarray:  # pragma: no cover - compiled
    """``back`` by a plain (untiled) backward pass over :func:`_chord_row`'s bounds through
    every power of two (less ``1e-9`` of each), row by row: what those bounds would cost
    without the tiled pass's arithmetic."""
    m = is_end.size - 1
    sizes = _chord_sizes(b, False)
    back = np.full((K + 1, m + 1), np.inf)
    back[0, m] = 0.0
    t, cost = np.zeros(len(sizes)), np.empty(m + 1)
    for ri in range(rows.size - 1, -1, -1):
        i = rows[ri]
        _chord_row(i, cum, w, sizes, b, per_batch, t, cost)
        for j in range(i + 1, m + 1):
            cost[j] = cost[j] * (1.0 - 1e-9) if is_end[j] else np.inf
        for k in range(1, K + 1):
            least = np.inf
            for j in range(i + 1, m + 1):
                least = min(least, cost[j] + back[k - 1, j])
            back[k, i] = least
    return back


def _pass_seconds(prob: Problem, data: Arrays, short: Short) -> tuple[float, float]:
    """CPU seconds (median of 5, after a first call) of the tiled backward pass and of
    :func:`_plain_chords_back`."""
    m = prob.m
    rows, is_end = _rows(prob, K, prob.ends)
    near = (0.0, np.empty((0, 0), np.int64), np.empty(0))
    if short.product:
        near = (_tau(data, short, rows, is_end), np.empty((K + 1, m + 1), np.int64), np.empty(m + 1))
    cum, b = data.cum.astype(np.float64), float(prob.rule.batch_size)
    tiled = median_seconds(
        lambda: backward(data, short, _NO_BOUNDS, rows, is_end, K, near), 5, time.process_time
    )
    args = (cum, data.weight, is_end, rows, b, data.per_batch)
    return tiled, median_seconds(lambda: _plain_chords_back(*args), 5, time.process_time)


def _forward_seconds(
    prob: Problem, data: Arrays, short: Short, chord_back: np.ndarray
) -> tuple[float, float, bool]:
    """CPU seconds (median of 5, after a first call) of the forward pass as ``optimize_edges``
    runs it (K = 6 alone), and of the same pass given ``back`` raised to ``chord_back`` (less
    ``1e-8`` of it: above the ``lgamma`` rounding; the near ends dropped, which ``back``'s own
    minima decide), and whether both give the same optimum and plan."""
    m = prob.m
    rows, is_end = _rows(prob, K, prob.ends)
    want = np.zeros(K + 1, np.bool_)
    want[K] = True
    carried = carried_rows(data)
    near = (0.0, np.empty((0, 0), np.int64), np.empty(0))
    if short.product:
        near = (_tau(data, short, rows, is_end), np.empty((K + 1, m + 1), np.int64), np.empty(m + 1))
    back = backward(data, short, _NO_BOUNDS, rows, is_end, K, near)
    upper = _uppers(data, short, _NO_BOUNDS, rows, is_end, back, carried, want)
    raised = np.where(np.isfinite(chord_back), np.maximum(back, chord_back * (1.0 - 1e-8)), back)
    no_near = (near[0], np.empty((0, 0), np.int64), near[2])
    out = []

    def forward(b: np.ndarray, n: tuple[float, np.ndarray, np.ndarray]) -> None:
        best, arg = run_layers(K, m)
        _forwards(data, short, _NO_BOUNDS, rows, is_end, b, upper, best, arg, n, carried)
        out.append((best[K, m], backtrack(arg, K, m)))

    now = median_seconds(lambda: forward(back, near), 5, time.process_time)
    tight = median_seconds(lambda: forward(raised, no_near), 5, time.process_time)
    return now, tight, out[0] == out[-1]


def _exact_back(exact: np.ndarray, pts: np.ndarray, m: int) -> np.ndarray:
    """``back[k, j]``: the least of ``k`` buckets after end ``j`` over the costs ``exact``
    (between ``pts``), by the plain DP on the reversed matrix."""
    rest, _ = reference_dp(exact.T[::-1, ::-1].copy(), K)
    back = np.full((K + 1, m + 1), np.inf)
    back[:, pts[::-1]] = rest
    return back


def _causes(
    prob: Problem, data: Arrays, short: Short, best: np.ndarray, exact: np.ndarray, pts: np.ndarray
) -> str:
    """The rows followed with each bucket's test on its exact cost, and with a perfect upper
    bound."""
    rows_of = np.full((prob.m + 1, prob.m + 1), np.inf)
    for a in range(pts.size - 1):
        rows_of[pts[a], pts[a + 1 :]] = exact[a, a + 1 :]
    tested = _followed(prob, data, short, best, exact_rows=rows_of)[0]
    upper_rows = _followed(prob, data, short, best, perfect_upper=True)[0]
    return f"\n{' ' * 30}rows with exact bucket tests {tested}, with upper = optimum {upper_rows}"


def _tighter(
    prob: Problem, data: Arrays, short: Short, best: np.ndarray, exact: np.ndarray, pts: np.ndarray
) -> str:
    """The chords' columns (both sets of sizes; padding objectives) and the power bound's (at
    batch sizes up to ``POWER_ABOVE``, by the product formula)."""
    is_end = _rows(prob, K, prob.ends)[1]
    b, opt, line = prob.rule.batch_size, float(best[K, prob.m]), ""
    for few in (False, True) if not short.quad else ():
        args = (data.cum.astype(np.float64), data.weight, is_end, pts, float(b), data.per_batch, few)
        chords = _chords_matrix(*args)
        finite = np.isfinite(exact)
        excess = float(np.max((chords[finite] - exact[finite]) / exact[finite]))
        chord_back = _exact_back(chords, pts, prob.m)
        chord_rows = _followed(prob, data, short, best, chord_back)[0]
        line += f"  {'at B/4, B/2' if few else 'chords at 2**t'}: gap {opt / chord_back[K, 0] - 1:7.1e}"
        line += f" rows {chord_rows:>4}" + ("" if few else f" excess {excess:.0e}")
    if short.product and b <= POWER_ABOVE and short.power:
        gaps = [
            1.0 - _exact_back(_bound_matrix(data, short, is_end, pts, p), pts, prob.m)[K, 0] / opt
            for p in (False, True)
        ]
        line += f"  power: chords {gaps[0]:7.1e} -> {gaps[1]:7.1e}"
    return line


def report(name: str, hist: LengthHistogram, cost: bool, causes: bool) -> None:
    """One line per batch size (and, with ``cost``, the two passes' CPU seconds; with
    ``causes``, the rows followed with exact bucket tests and with a perfect upper bound)."""
    for b in BATCH_SIZES:
        rule = BatchRule(batch_size=b)
        prob = build_problem(hist, rule, 1, None, resolve_objective(rule, None, None))
        data, short = exact_arrays(prob)
        pts = np.r_[0, prob.ends].astype(np.int64)
        exact = cost_matrix(prob, pts)
        best = np.full((K + 1, prob.m + 1), np.inf)
        best[:, pts] = reference_dp(exact, K)[0]
        rows, span, gap = _followed(prob, data, short, best)
        back_rows = _followed(prob, data, short, best, _exact_back(exact, pts, prob.m))[0]
        ideal_rows, ideal_span = _ideal(exact, pts, float(best[K, prob.m]))
        line = f"   {name:<24} batch {b:>5}: gap {gap:7.1e}  rows {rows:>4} span {span:>7,}"
        line += f"  exact back: rows {back_rows:>4}  ideal rows {ideal_rows} span {ideal_span:,}"
        line += _tighter(prob, data, short, best, exact, pts)
        print(line + (_causes(prob, data, short, best, exact, pts) if causes else ""))
        if cost and not short.quad:
            args = (data.cum.astype(np.float64), data.weight, _rows(prob, K, prob.ends)[1], pts, float(b))
            chord_back = _exact_back(_chords_matrix(*args, data.per_batch, False), pts, prob.m)
            now, tight, same = _forward_seconds(prob, data, short, chord_back)
            times = f"{now * 1e3:.1f} ms, with back raised to the chords' {tight * 1e3:.1f} ms"
            print(f"{' ' * 30}forward pass: {times} (the same plan: {same})")
            tiled, plain = _pass_seconds(prob, data, short)
            times = f"tiled {tiled * 1e3:.1f} ms, plain over the chords {plain * 1e3:.1f} ms"
            print(f"{' ' * 30}backward pass: {times}")


def main() -> None:
    cost = "--cost" in sys.argv[1:]
    if cost:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    print(f"K = {K}; the forward pass's rows and span, with exact back, ideal; tighter bounds' gaps:")
    for path in sorted(SHARED_DATA.glob("*.npy")):
        hist = load_lengths(path)
        if hist.n_distinct <= _DENSE_MAX:
            report(path.stem, hist, cost, "--causes" in sys.argv[1:])


if __name__ == "__main__":
    main()
