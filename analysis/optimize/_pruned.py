"""The exact DP over the exact bucket costs (:mod:`analysis.optimize._exact`), pruned exactly.

An exact cost needs a running sum per residue ``r = n mod B``, which changes from end to end,
so the DP costs exactly only the buckets that lower bounds cannot rule out of every optimal
plan (the one pruned scheme, for every rule and objective):

1. *Backwards over lower bounds* (``O(1)`` per bucket from the full-batch cost ``n E_B``,
   :mod:`analysis.optimize._lower`; with a token budget from the restart-free bounds on
   ``E_B`` of :mod:`analysis.optimize._budget`): ``back[k, i]``, at most the least exact
   objective of ``k`` buckets covering ``(i, m]`` (:mod:`analysis.optimize._backward`, tiled).
   For a fixed ``B`` of 24 to 10**4 (padding, or a step time without a working-set term),
   where the bounds lie loose under an equal-count plan's exact cost (:func:`_loose`: a heavy
   tail of few samples per length), the bounds also read the chords through ``E_s`` at two
   powers of two below ``B``, near ``sqrt(B)`` and four times it (two running sums more per
   row: :func:`~analysis.optimize._lower.chord_sizes`), in every step that reads them.
2. *Upper bounds*: for every bucket count asked for, the plan the bounds chose, costed
   exactly (for a fixed ``B`` without the product formula, where that plan lies far above
   ``back``, its edges first moved by a local search while the exact cost falls: any plan's
   exact cost bounds the optimum from above, so the search changes only how much step 3
   prunes); ``-inf`` for a bucket count not asked for, so that step 3 follows no plan for it
   alone (where the bounds are loose for a few buckets, the counts below the one asked for
   would widen every row: ``optimize_edges(K=6)`` at batch size 1,000 on a real file costed
   ten times the buckets it needs).
3. *Forwards, exact*: start ``i`` is followed for its ``k``-th bucket only when the best
   ``k - 1`` buckets up to it plus ``back`` fit under an upper bound, and a bucket from it is
   costed exactly only when its own bound fits too (for one fixed ``B`` by the product
   formula the live starts' rows of bounds come a tile of starts at a time: they come in
   runs; where every upper bound lies within ``tau / 2`` of ``back``, only up to the last
   end the backward pass found within ``tau`` of a minimum, and at ``m`` a tighter bound
   on the last bucket, both from the backward pass: :func:`_near`; for one fixed ``B`` not by
   it, a bucket whose short batch is not carried along the row is tested once more with a
   tighter bound on its short batch before it is costed: :func:`_residues`).

Why this is the exact optimum (of each bucket count asked for): every bucket of an optimal
plan of such a count passes both tests (the
prefix of an optimal plan is an optimal prefix, computed exactly by induction; its bounds
are at most its exact costs), so ``D[k, m]`` and the path back from it are those of the DP
over every bucket's exact cost (``dense``), the same floats: the same smallest start on
every tie, since every tied start is on an optimal plan too.
"""

from __future__ import annotations

import numba
import numpy as np

from analysis.optimize._backward import LANES, backward, product_work, tile_rows
from analysis.optimize._budget import SLACK, BudgetBounds
from analysis.optimize._costs import INF, Arrays, row_costs
from analysis.optimize._exact import POWER_ABOVE, Short, carried_rows, cut_cost, exact_cells, exact_row
from analysis.optimize._layers import push, run_layers
from analysis.optimize._lower import (
    chord_sizes,
    fixed_path_end,
    fixed_row,
    low_costs,
    low_costs_within,
    residue_bound,
)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def reach_table(back: np.ndarray, upper: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``reach[k, j]``: the most a path may spend on its first ``k`` buckets up to ``j`` and
    still be optimal for some bucket count (its rest costs at least ``back``; ``upper[K]`` an
    upper bound on the optimum of ``K`` buckets; ``-inf`` where not asked for: no path)."""
    n_buckets = back.shape[0] - 1
    m = back.shape[1] - 1
    reach = np.full((n_buckets + 1, m + 1), -INF)
    for k in range(1, n_buckets + 1):
        for total_k in range(k, n_buckets + 1):
            if upper[total_k] < INF:
                for j in range(m + 1):
                    reach[k, j] = max(reach[k, j], upper[total_k] - back[total_k - k, j])
    return reach


@numba.njit(cache=True, nogil=True, error_model="numpy")
def live_room(
    i: int,
    best: np.ndarray,
    back: np.ndarray,
    upper: np.ndarray,
    reach: np.ndarray,
    live: np.ndarray,
    room: np.ndarray,
    last: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """Whether start ``i`` is live for some layer (``live[k]``: its best ``k - 1`` buckets plus
    a bound on the rest stay within an upper bound; -1 where for none) and, if so, ``stop``
    (returned: ``m`` where ``last`` is empty, else the most of ``last[K - k + 1, i]`` over the
    live pairs of a layer ``k`` and a bucket count ``K``, below ``m``: :func:`_near`) and
    ``room[j]`` for ``i < j <= stop`` and ``j = m``: the most a bucket ``(i, j]`` may cost
    and still lie on an optimal plan."""
    n_buckets = back.shape[0] - 1
    m = back.shape[1] - 1
    stop = i
    for k in range(1, n_buckets + 1):
        a = best[k - 1, i]
        live[k] = False
        for total_k in range(k, n_buckets + 1):
            if a < INF and a + back[total_k - k + 1, i] <= upper[total_k]:
                live[k] = True
                stop = max(stop, last[total_k - k + 1, i]) if last.size and total_k > k else stop
    if not live[1:].any():
        return -1
    stop = min(stop, m - 1) if last.size else m
    for j in range(i + 1, stop + 1):
        room[j] = -INF
    room[m] = -INF
    for k in range(1, n_buckets + 1):
        if live[k]:
            a = best[k - 1, i]
            for j in range(i + 1, stop + 1):
                room[j] = max(room[j], reach[k, j] - a)
            room[m] = max(room[m], reach[k, m] - a)
    return int(stop)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def needed(
    i: int, low: np.ndarray, room: np.ndarray, need: np.ndarray, stop: int
) -> tuple[int, int]:  # pragma: no cover - compiled
    """``need[j]``: whether bucket ``(i, j]`` may lie on an optimal plan (its bound within the
    room), for ``i < j <= stop`` and ``j = m`` (false between: no such end can); returns the
    first and last such ``j`` (``last == i``: none)."""
    m = low.size - 1
    first, last = m + 1, i
    for j in range(i + 1, stop + 1):
        need[j] = low[j] <= room[j]
        first = j if need[j] and first > m else first
        last = j if need[j] else last
    need[stop + 1 : m] = False
    if stop < m:
        need[m] = low[m] <= room[m]
        first = m if need[m] and first > m else first
        last = m if need[m] else last
    return first, last


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _path_end(
    i: int, layer: int, back: np.ndarray, data: Arrays, short: Short, bounds: BudgetBounds, is_end: np.ndarray
) -> int:  # pragma: no cover - compiled
    """The end of the first bucket from ``i`` that gives ``back[layer, i]``: the first ``j``
    whose bound plus ``back[layer - 1, j]`` is it (the same sums; ``m`` if none before)."""
    if short.product and not data.token:  # the bounds one end at a time, up to it
        return fixed_path_end(i, back[layer, i], back[layer - 1], data, short, is_end)
    m = back.shape[1] - 1
    low = np.empty(m + 1)
    low_costs(i, data, short, bounds, is_end, np.empty(m + 1), low)
    j = i + 1
    while j < m and low[j] + back[layer - 1, j] != back[layer, i]:
        j += 1
    return j


# Relative gap between a bucket count's upper bound and ``back`` above which step 2 refines
# the bounds' plan (:func:`_refine`: it costs about as many exact buckets as a narrow forward
# pass; measured on the bundled data, batch sizes 100 and 1,000 lose by it below this gap, 10^4
# gains 0.08 s), and the pattern search's first step (ends).
_REFINE_GAP = 2e-4
_REFINE_STEP = 32
_REFINE_PASSES = 6
# Looseness of the bounds (:func:`_looseness`) above which they take the chords (:func:`_loose`),
# times ``B / _CHORD_GAP_B`` above that batch size.  Measured, K = 6, one process, with the
# chords against without: every file of ../shared/data at batch sizes 24 to 10**4 where looser
# (3.0e-5 to 9.4e-2; the gate as here) 0.09x to 0.98x the time (1.06x once); the bundled data
# (3.4e-6 to 2.2e-5 up to 1,000; 3.1e-5 to 2.1e-4 from 1,500 to 10**4, under the scaled gap)
# 1.00x to 1.55x.  Rerun: ``benchmarks/chords_gate.py 24,32,64,100,300,1000,1500,3000,10000``.
_CHORD_GAP = 3e-5
_CHORD_GAP_B = 1_000.0


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _bucket(
    i: int, j: int, data: Arrays, short: Short, is_end: np.ndarray, work: np.ndarray, carried: bool | None
) -> float:  # pragma: no cover - compiled
    """The exact cost of bucket ``(i, j]`` as the DP costs it (inf unless ``0 <= i < j <= m``,
    ``j`` an end and ``i`` a start); ``work``: rows (a mask, costs and two sums); ``carried``:
    :func:`~analysis.optimize._exact.carried_rows`."""
    m = is_end.size - 1
    if i < 0 or j > m or i >= j or not is_end[j] or (i > 0 and not is_end[i]):
        return INF
    work[0, j] = 1.0
    exact_row(i, data, short, work[0] > 0.0, work[1], work[2], work[3], carried)
    work[0, j] = 0.0
    return float(work[1, j])


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _estimate(i: int, j: int, data: Arrays, short: Short, is_end: np.ndarray) -> float:  # pragma: no cover
    """:func:`_bucket`'s cost to about ``1e-20`` of itself, from the last ends alone
    (:func:`~analysis.optimize._exact.cut_cost`; inf where :func:`_bucket` has it)."""
    m = is_end.size - 1
    if i < 0 or j > m or i >= j or not is_end[j] or (i > 0 and not is_end[i]):
        return INF
    return cut_cost(i, j, data, short)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _refine(
    edges: np.ndarray, data: Arrays, short: Short, is_end: np.ndarray
) -> float:  # pragma: no cover - compiled
    """A plan's inner edges moved one at a time by a pattern search (steps ``_REFINE_STEP``,
    halved where neither side costs less; an edge that no move to the next end lowers, a
    local minimum of the finest step, is left where it is: :func:`_moves`), over every edge until
    none moves (at most ``_REFINE_PASSES`` times), the moves compared by
    :func:`_estimate`; returns the objective of the plan reached by :func:`_estimate` too (the
    exact one to far within the margin ``SLACK`` that the upper bound adds: only an upper bound
    on the optimum is asked; the caller keeps the given plan's where lower)."""
    k = edges.size - 1
    for _ in range(_REFINE_PASSES):
        before = edges.copy()
        for t in range(1, k):
            a, x, c = edges[t - 1], edges[t], edges[t + 1]
            cur = _estimate(a, x, data, short, is_end) + _estimate(x, c, data, short, is_end)
            if not _moves(a, x, c, cur, data, short, is_end):
                continue
            step = _REFINE_STEP
            while step >= 1:
                moved = False
                for d in (-step, step):
                    y = edges[t] + d
                    v = _estimate(a, y, data, short, is_end) + _estimate(y, c, data, short, is_end)
                    if v < cur and not moved:
                        cur, edges[t], moved = v, y, True
                step = step if moved else step // 2
        if (edges == before).all():
            break
    total = 0.0
    for t in range(k):
        total += _estimate(edges[t], edges[t + 1], data, short, is_end)
    return total


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _moves(
    a: int, x: int, c: int, cur: float, data: Arrays, short: Short, is_end: np.ndarray
) -> bool:  # pragma: no cover - compiled
    """Whether moving the edge ``x`` between ``a`` and ``c`` to the next end on either side
    lowers the estimate ``cur`` of its two buckets: where it does not, the search's six steps
    down from ``_REFINE_STEP`` (24 estimates) are left out for these 4.  Where the bounds' plan
    is far from optimal it lies off those minima (the bundled data at batch size 10**4: the
    same upper bound, 4.2e-4 above ``back``); where the gap is the bounds' own, the search costs
    a sixth (tldr_pages at batch size 100: 0.72 -> 0.19 ms, K = 6 2.14 -> 2.03 times batch size
    8's; moss_sft_conversations at 100 its upper bound 9.9e-4 -> 1.1e-3 above ``back``, 1.45 ->
    1.51 times; the other shared files and batch sizes 64 to 10**8 within 4 %, but gsm8k at 64,
    8 %, on the product formula's path, which runs no search: the runs' spread; measured paired
    in one process; ``benchmarks/bench_optimize.py --shared`` here and in a worktree of the
    commit before gives the ratios)."""
    below, above = x - 1, x + 1
    while below > a and not is_end[below]:
        below -= 1
    while above < c and not is_end[above]:
        above += 1
    for y in (below, above):
        if _estimate(a, y, data, short, is_end) + _estimate(y, c, data, short, is_end) < cur:
            return True
    return False


def _uppers(
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    rows: np.ndarray,
    is_end: np.ndarray,
    back: np.ndarray,
    carried: bool | None,
    wanted: np.ndarray,
) -> np.ndarray:
    """``upper[K]``: for every bucket count with ``wanted[K]``, the exact objective of the plan
    the bounds chose (inf where ``back`` has none), with the margin ``SLACK``; ``-inf`` for the
    others (step 2 of the module docstring); for one fixed ``B`` without the
    product formula (where the bounds' plans lie far from optimal) refined by
    :func:`_refined` (a compiled call of its own, chosen here: the other rules' first call
    does not compile it); ``carried``: :func:`~analysis.optimize._exact.carried_rows`."""
    upper, plans = _bound_plans(data, short, bounds, rows, is_end, back, carried, wanted)
    if not short.product and not data.token:
        _refined(data, short, is_end, back, upper, plans)
    return upper


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _bound_plans(
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    rows: np.ndarray,
    is_end: np.ndarray,
    back: np.ndarray,
    carried: bool | None,
    wanted: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`_uppers` before the refinement, and the plans (``plans[K, :K + 1]``: edges);
    ``carried``: :func:`~analysis.optimize._exact.carried_rows`."""
    n_buckets = back.shape[0] - 1
    m = back.shape[1] - 1
    upper = np.full(n_buckets + 1, INF)
    plans = np.zeros((n_buckets + 1, n_buckets + 1), np.int64)
    work = np.zeros((4, m + 1))
    for k in range(1, n_buckets + 1):
        if not wanted[k]:
            upper[k] = -INF
            continue
        if back[k, 0] == INF:
            continue
        total = 0.0
        i = rows[0]  # (0, typed as the other starts: a literal 0 would compile every callee twice)
        for layer in range(k, 0, -1):
            j = _path_end(i, layer, back, data, short, bounds, is_end)
            total += _bucket(i, j, data, short, is_end, work, carried)
            i = plans[k, k - layer + 1] = j
        upper[k] = total * (1.0 + SLACK)
    return upper, plans


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _refined(
    data: Arrays, short: Short, is_end: np.ndarray, back: np.ndarray, upper: np.ndarray, plans: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``upper[K]`` lowered to the exact objective of the plan :func:`_refine` reaches from the
    bounds' plan (with the margin ``SLACK``) where that plan lies more than ``_REFINE_GAP``
    above ``back``."""
    for k in range(2, back.shape[0]):
        if upper[k] < INF and upper[k] > back[k, 0] * (1.0 + _REFINE_GAP) * (1.0 + SLACK):
            edges = plans[k, : k + 1].copy()
            upper[k] = min(upper[k], _refine(edges, data, short, is_end) * (1.0 + SLACK))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _near(
    back: np.ndarray, upper: np.ndarray, rows: np.ndarray, near: tuple[float, np.ndarray, np.ndarray]
) -> np.ndarray:  # pragma: no cover - compiled
    """``near``'s ``last`` where it bounds the ends that may be needed, else empty.  A bucket
    ``(i, j]``, ``j < m``, of an optimal plan of ``K`` buckets, the ``k``-th, has
    ``best[k - 1, i] + low(i, j) + back[K - k, j] <= upper[K]``, and ``best[k - 1, i] +
    back[K - k + 1, i] >= back[K, 0]`` (a plan's exact costs are at least its bounds), so
    ``low(i, j) + back[K - k, j]`` is within ``upper[K] - back[K, 0]`` of
    ``back[K - k + 1, i]``: where that is at most ``tau / 2`` for every ``K`` (half of ``tau``
    a margin for rounding; a ``K`` not asked for has ``upper[K] = -inf``), ``j <= last[K - k + 1, i]``
    (:func:`~analysis.optimize._backward.product_backward`)."""
    tau, last, _ = near
    for k in range(1, back.shape[0]):
        if upper[k] < INF and not upper[k] - back[k, rows[0]] <= 0.5 * tau:
            return last[:0]
    return last


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _tile(
    r: int,
    r0: int,
    rows: np.ndarray,
    data: Arrays,
    short: Short,
    is_end: np.ndarray,
    stop: int,
    done: int,
    work: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    tile: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """``tile[a]``: the row of bounds of ``rows[r0 + a]`` (the last repeated where fewer are
    left), computed up to ``done`` and now on to ``stop`` where ``rows[r]`` reads further
    (:func:`~analysis.optimize._backward.tile_rows`: the lanes carry on); returns the new
    ``done``."""
    if stop <= done:
        return done
    starts = np.empty(LANES, np.int64)
    for a in range(LANES):
        starts[a] = rows[min(r0 + a, rows.size - 1)]
    tile_rows(starts, data, short, is_end, work, tile, done, stop)
    return stop


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _residues(
    i: int,
    first: int,
    last: int,
    data: Arrays,
    short: Short,
    t_b: np.ndarray,
    room: np.ndarray,
    need: np.ndarray,
    work: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """``need[j]`` cleared where a bucket's short batch of more than ``POWER_ABOVE`` samples
    (not carried along the row: its exact cost sums its own terms) has a bound above the room
    (:func:`~analysis.optimize._lower.residue_bound`, from the row's ``t_b``; one fixed ``B``,
    steps ``>= 0``), for ``first <= j <= last``; returns the new first and last such ``j``
    (``last == i``: none)."""
    cum = data.cum
    b = data.size[i + 1]
    new_first, new_last = cum.size, i
    for j in range(first, last + 1):
        if need[j] and j > i + 1:
            n = cum[j] - cum[i]
            if n >= b and n % b > POWER_ABOVE:
                need[j] = residue_bound(i, j, t_b[j], data, short, work) <= room[j]
        new_first = j if need[j] and new_first == cum.size else new_first
        new_last = j if need[j] else new_last
    return new_first, new_last


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _forwards(
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    rows: np.ndarray,
    is_end: np.ndarray,
    back: np.ndarray,
    upper: np.ndarray,
    best: np.ndarray,
    arg: np.ndarray,
    near: tuple[float, np.ndarray, np.ndarray],
    carried: bool | None,
) -> None:  # pragma: no cover - compiled
    """Step 3 of the module docstring into ``best`` and ``arg``: exact costs where a bucket may
    be on an optimal plan (``carried``: :func:`~analysis.optimize._exact.carried_rows`).  A live
    start's row of bounds comes, for one fixed ``B`` by the product formula, from a tile of the
    next ``LANES`` starts computed at once (live starts come in runs) up to the last end where
    one may be needed (:func:`live_room`, from the backward pass's ``near``: :func:`_near`) and
    at ``m`` (the backward pass's tighter bound on the last bucket, ``near[2]``), else from
    :func:`~analysis.optimize._lower.low_costs`: the same floats."""
    m = data.cum.size - 1
    n_buckets = back.shape[0] - 1
    reach = reach_table(back, upper)
    tb, t2b, costs, low, ratio = (
        np.zeros(m + 1),
        np.zeros(m + 1),
        np.empty(m + 1),
        np.empty(m + 1),
        np.empty(m + 1),
    )
    need = np.zeros(m + 1, np.bool_)
    room = np.empty(m + 1)
    live = np.zeros(n_buckets + 1, np.bool_)
    tiled = short.product and not data.token
    residues = not tiled and not data.token and short.power
    last = _near(back, upper, rows, near) if tiled else near[1][:0]
    work = product_work(data.size[1] if tiled else 1, 0, 0)
    tile = np.empty((LANES, m + 1) if tiled else (0, 0))
    r0, done = -LANES, 0  # the tile's first start's index in rows, its last end computed
    for r in range(rows.size):
        i = rows[r]
        stop = live_room(i, best, back, upper, reach, live, room, last)
        if stop < 0:
            continue
        if tiled:
            if r >= r0 + LANES:
                r0, done = r, i
            done = _tile(r, r0, rows, data, short, is_end, stop, done, work, tile)
            low = tile[r - r0]
            low[m] = near[2][i]  # (at least the row's own bound)
        else:  # (the bounds where within the room; above it where not)
            low_costs_within(i, data, short, bounds, is_end, room, ratio, low)
        first, last_j = needed(i, low, room, need, stop)
        if residues and data.size[i + 1] > POWER_ABOVE:  # (T_B's bounds in ratio: chain)
            first, last_j = _residues(i, first, last_j, data, short, ratio, room, need, costs)
        if last_j == i:
            continue
        exact_cells(i, first, last_j, data, short, need, costs, tb, t2b, carried)
        cells = slice(first, last_j + 1)  # (the other cells' costs are inf: they win nothing)
        for k in range(1, n_buckets + 1):
            if live[k]:
                push(best[k, cells], arg[k, cells], costs[cells], best[k - 1, i], i)


# How far above its minimum ``low(i, j) + back[k - 1, j]`` may lie where the backward pass
# records the last end ``j`` (for :func:`_near`), relative to the bound on one bucket
# ``(0, m]``, at batch size 8 and below: the optimum lies above ``back`` by about 6e-6 of
# itself on the bundled data, and the optimum of 16 buckets is about 0.4 of the one bucket's.
# The bounds' gap grows with ``B`` (1.5e-5 at 17, 5e-5 at 48 there), so ``tau`` grows as
# ``B / 8`` (:func:`_tau`): at 40 and 48 a fixed one left the gap above ``tau / 2``, and the
# forward pass computed every live row up to ``m`` (0.213 and 0.234 s, now 0.19 and 0.21 s).
_TAU = 2e-5


def _tau(data: Arrays, short: Short, rows: np.ndarray, is_end: np.ndarray) -> float:
    """``tau`` of :func:`_near` for one fixed ``B`` by the product formula: ``_TAU`` times the
    bound on one bucket, times ``B / 8`` above 8."""
    return _TAU * max(1.0, float(data.size[1]) / 8.0) * float(_scale(data, short, rows, is_end))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _scale(data: Arrays, short: Short, rows: np.ndarray, is_end: np.ndarray) -> float:  # pragma: no cover
    """The bound on one bucket ``(rows[0], m]`` (the scale of the objective; one fixed ``B``)."""
    m = data.cum.size - 1
    low = np.empty(m + 1)
    fixed_row(rows[0], data, short, is_end, np.empty(m + 1), low)
    return float(low[m])


def _loose(
    data: Arrays, short: Short, rows: np.ndarray, is_end: np.ndarray, n_buckets: int, carried: bool | None
) -> bool:
    """Whether the bounds take the chords (:func:`~analysis.optimize._lower.chord_sizes`): where
    they may, and :func:`chord_gate`'s looseness passes its gap."""
    if data.token or chord_sizes(short._replace(chords=True), float(data.size[1]))[0] == 0.0:
        return False
    looseness, gap = chord_gate(data, short, rows, is_end, n_buckets, carried)
    return looseness > gap


def chord_gate(
    data: Arrays, short: Short, rows: np.ndarray, is_end: np.ndarray, n_buckets: int, carried: bool | None
) -> tuple[float, float]:
    """How far the bounds without the chords lie below the exact cost of an equal-count plan
    (:func:`_looseness`) of ``n_buckets`` buckets, or fewer where each would hold less than
    two batches (a bucket of one batch has an exact bound, which says nothing of the larger
    buckets the DP weighs; 0 where the data hold less than two batches: the DP is then small,
    and the chords cost it 1.3x to 1.4x on the shared files), and the gap above which the
    bounds take the chords (``_CHORD_GAP``, scaled above ``_CHORD_GAP_B``); ``carried``:
    :func:`~analysis.optimize._exact.carried_rows`."""
    bf = float(data.size[1])
    k = min(n_buckets, int(data.cum[-1] // (2.0 * bf)))
    looseness = float(_looseness(data, short, rows, is_end, k, carried)) if k > 0 else 0.0
    return looseness, _CHORD_GAP * max(1.0, bf / _CHORD_GAP_B)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _looseness(
    data: Arrays, short: Short, rows: np.ndarray, is_end: np.ndarray, n_buckets: int, carried: bool | None
) -> float:  # pragma: no cover - compiled
    """``exact / bound - 1`` over the buckets of an equal-count plan: ``n_buckets`` buckets, each
    ending at the start of ``rows`` nearest above its quantile of the samples (or at ``m``)."""
    m = data.cum.size - 1
    total = float(data.cum[m])
    work = np.zeros((4, m + 1))
    low, ratio = np.empty(m + 1), np.empty(m + 1)
    exact = bound = 0.0
    i = rows[0]
    for k in range(1, n_buckets + 1):
        r = np.searchsorted(data.cum[rows], total * k / n_buckets, side="left")
        j = m if k == n_buckets or r >= rows.size else int(rows[r])
        if j <= i:
            continue
        fixed_row(i, data, short, is_end, ratio, low)
        exact += _bucket(i, j, data, short, is_end, work, carried)
        bound += low[j]
        i = j
    return exact / bound - 1.0 if bound > 0.0 else 0.0


def solve_exact(
    data: Arrays,
    short: Short,
    bounds: BudgetBounds,
    rows: np.ndarray,
    is_end: np.ndarray,
    wanted: np.ndarray,
    dense: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """``D[k, j]`` and ``A[k, j]`` over the exact costs (the module docstring), ``k`` up to
    ``wanted.size - 1``: with ``dense`` every bucket costed, else pruned (``D[k, m]`` and its
    path the dense ones where ``wanted[k]``).  Each step is
    a compiled call of its own, the backward pass the one of the rule (so a first call
    compiles the passes of its rule, not every rule's; between the calls only the GIL's
    hand-over)."""
    m = data.cum.size - 1
    n_buckets = wanted.size - 1
    carried = carried_rows(data)
    if dense:
        return _dense(data, short, rows, is_end, n_buckets, carried)
    near = (0.0, np.empty((0, 0), np.int64), np.empty(0))
    if short.product and not data.token:  # the product path records the near ends
        last = np.empty((n_buckets + 1, m + 1), np.int64)
        near = (_tau(data, short, rows, is_end), last, np.empty(m + 1))
    short = short._replace(chords=_loose(data, short, rows, is_end, n_buckets, carried))
    back = backward(data, short, bounds, rows, is_end, n_buckets, near)  # 1. backwards over the bounds
    upper = _uppers(data, short, bounds, rows, is_end, back, carried, wanted)  # 2. an upper bound for each K
    best, arg = run_layers(n_buckets, m)
    _forwards(data, short, bounds, rows, is_end, back, upper, best, arg, near, carried)  # 3. forwards, exact
    return best, arg


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _dense(
    data: Arrays, short: Short, rows: np.ndarray, is_end: np.ndarray, n_buckets: int, carried: bool | None
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`solve_exact` with every bucket costed."""
    m = data.cum.size - 1
    tb = np.zeros(m + 1)
    t2b = np.zeros(m + 1)
    costs = np.empty(m + 1)
    best, arg = run_layers(n_buckets, m)
    for r in range(rows.size):
        i = rows[r]
        exact_row(i, data, short, is_end, costs, tb, t2b, carried)
        for k in range(1, n_buckets + 1):
            if best[k - 1, i] < INF:
                push(best[k, i + 1 :], arg[k, i + 1 :], costs[i + 1 :], best[k - 1, i], i)
    return best, arg


@numba.njit(cache=True, nogil=True, error_model="numpy")
def cost_matrix_of(
    data: Arrays, short: Short, points: np.ndarray, exact: bool, carried: bool | None
) -> np.ndarray:  # pragma: no cover - compiled
    """``out[a, c]`` = objective of bucket ``(points[a], points[c]]`` (inf when ``a >= c``):
    the exact one (:func:`~analysis.optimize._exact.exact_row`, ``carried`` as there), or with
    ``exact=False`` the full-batch one (:func:`~analysis.optimize._costs.row_costs`, ``short``
    unread)."""
    m = data.cum.size - 1
    p = points.size
    is_end = np.zeros(m + 1, np.bool_)
    for a in range(p):
        is_end[points[a]] = True
    costs = np.empty(m + 1)
    tb = np.zeros(m + 1)
    t2b = np.zeros(m + 1)
    out = np.full((p, p), INF)
    for a in range(p - 1):
        if exact:
            exact_row(points[a], data, short, is_end, costs, tb, t2b, carried)
        else:
            row_costs(points[a], data, is_end, costs)
        for c in range(a + 1, p):
            out[a, c] = costs[points[c]]
    return out


def exact_matrix(data: Arrays, short: Short, points: np.ndarray) -> np.ndarray:
    """``out[a, c]`` = exact objective of bucket ``(points[a], points[c]]`` (inf when ``a >= c``)."""
    out: np.ndarray = cost_matrix_of(data, short, points, True, carried_rows(data))
    return out
