"""A token budget's lower bounds on bucket costs, restart-free: what the pruned DP
(:mod:`analysis.optimize._pruned`) rules buckets out with when ``B`` follows the end.

With a token budget ``B`` follows the end, so each start's running sum restarts where ``B``
changes (:func:`~analysis.optimize._costs._restart`): ``O(m)`` stretches of constant ``B`` for
each of ``m`` starts, too many to run for every bucket.  ``T`` only grows when the bucket's
start moves down (more short samples: every ``P(max <= v)`` grows) and when ``B`` falls (fewer
draws).  So the sums of the table's row at or below ``i`` (rows a stride of starts apart, at
least ``BOUND_STRIDE``; with a cost per batch about ``m / BOUND_ROWS``; closer near the top:
:func:`row_starts`), under batch sizes lowered to rungs a factor ``rung_factor`` apart
(``_bound_table``: a restart per rung, not per end), bound ``T`` from above and every
bucket's full batches' ``E_B`` from below (:func:`full_bound`), with a margin ``SLACK`` far
above the sums' rounding.  :func:`~analysis.optimize._lower.budget_bound` then turns them into bounds
on the exact cost.

Where ``B = 1`` (samples at least half the budget, and those longer than it, whose weights
are whole steps: under the steps objective the bounds that matter) a bucket's cost needs no
sum at all: a batch of one pads nothing, ``n E_1 = sum of the samples' weights``, a
difference of prefix sums (``mass``), less a margin ``mass_err`` above their rounding and
``SLACK`` of ``n`` longest samples' weight (as the sums: above the exact costs' rounding;
:func:`ones_bound`).  The
stride's bound there would count every sample of up to a stride of lengths below the
start (the cheapest ones) as the bucket's: about ``5e-3`` of the optimum too low at
``max_tokens=4096`` on the bundled data, which the forward pass then paid for.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.optimize._compile import THREADS_LOCK
from analysis.optimize._costs import Arrays, row_sums

# The bounds' running sums: a row per ``BOUND_STRIDE`` starts, or further where the table
# would pass ``BOUND_BYTES``, and with a cost per batch (the steps and time objectives) further
# still, to about ``BOUND_ROWS`` rows: there the batches dominate a bucket's cost and the
# sums move its bound little (on the bundled data rows 127 apart prune as 32 did, and a table
# 32 apart cost more than the backward pass it serves: 0.13 s at ``max_tokens=65536``), while
# the padding objective's bounds move with the sums one for one (rows 127 apart cost its
# forward pass 2.6 times as much there); batch sizes within a factor ``_RUNG`` share a
# restart (with a cost per batch ``_RUNG_COARSE``, where the padding objective's forward pass
# took twice as long at ``max_tokens=65536``; under the steps objective ``_RUNG_STEPS``), and
# a relative margin ``SLACK`` (far above the rounding of the sums) on each.  Under the steps
# objective a bucket's steps are exact and the sums only order plans of equal steps, so rungs
# a factor 2 apart prune as 1.1 did and restart a seventh as often: the table of
# alpaca_eval_outputs at ``max_tokens=65536`` (batch sizes 4,096 down to 7) took 9.5 ms at
# 1.1 and 2.2 ms at 2, and ``optimize_edges(K=6)`` 2.48 against 1.68 times batch size 8's
# (1.82 against 1.33 at 16,384); on the bundled data and the other shared files less, or more
# by at most 8 % (moss_sft_conversations at 65,536 with ``pad_to_multiple_of=64``, 1.53
# against 1.42: the runs' spread), where 3 and 4 cost tldr_pages 1.15 and 1.3 times 2's at
# 65,536 (``benchmarks/bench_optimize.py --shared``).
BOUND_STRIDE = 32
BOUND_ROWS = 64
BOUND_BYTES = 64 << 20
# The table runs on every thread from this many cells (rows times lengths) on.  Rows dealt
# in turn fill it in 0.45-0.64 the time on two threads, but threads spin for a while after a
# parallel loop: optimize_edges(K=6, max_tokens=16384) on two threads took 2.53 ms for 6.49 ms
# of CPU on gsm8k (3,597 cells) against 2.53 ms on one; 18.1 ms for 31.8 ms of CPU on
# alpaca_eval (138,864 cells) against 19.3 ms; 97 ms for 112 ms of CPU on the bundled data
# (2,064,766 cells) against 106 ms (benchmarks/bench_bound_table.py --rounds 7).
THREADED_CELLS = 1 << 18
_RUNG = 1.05
_RUNG_COARSE = 1.1  # (the time objective: 2 passes below 0.88 of a cost in the tightness test)
_RUNG_STEPS = 2.0
# Near the top the rows lie closer: a row reads the sums of up to a stride of lengths below a
# bucket's start as the bucket's, which loosens most the narrow buckets of few samples that a
# tail ends in (arena_hard_answers at ``max_tokens=65536``: its top bucket holds 25 lengths
# of one sample each, its bound 13.5 below its cost with rows 32 apart).  Where fewer than
# ``TOP_SHARE`` strides of lengths lie above, rows are at most a ``TOP_SHARE``-th of them
# apart (about ``TOP_SHARE`` rows per factor e of the lengths left above, then every start of
# the top ``TOP_SHARE``: short rows).  Measured, K = 6, one process, against every
# ``stride``-th start and rungs a factor 2 apart (``benchmarks/bench_bound_rows.py``, two
# runs): under the steps objective at 65,536 arena 3.17-3.21 -> 1.31-1.35 times batch size
# 8's (with ``_SPARSE`` below), gsm8k 2.43-2.48 -> 2.04-2.05, tldr_pages 2.24-2.31 -> 2.00-2.06;
# elsewhere the extra rows cost up to 17 % (tldr_pages and gsm8k at 4,096, 1.21 -> 1.35 and
# 1.30 -> 1.43; alpaca_eval_outputs 3-6 %), every ratio within 1.8 but gsm8k at 16,384 (2.2
# -> 2.1); under the padding objective and with a step time 0.29 to 1.03 times as long
# (arena at 65,536 116 -> 34 ms, moss_sft_conversations at 16,384 with a step time 14 -> 6
# ms; arena at 16,384 under padding 1.18, 5.8 -> 6.8 ms), the bundled data within 4 %.  A
# sixteenth left tldr_pages at 65,536 at 2.27 times batch size 8's.
TOP_SHARE = 32
# Under the steps objective, data of fewer than ``_SPARSE`` samples per distinct length take
# rungs ``_RUNG_COARSE`` apart: there a batch's longest sample falls far as its batch size
# halves, so rungs a factor 2 apart leave the padding's bounds loose (arena_hard_answers, 2,250
# samples over 1,131 lengths, at ``max_tokens=65536``: the bounds 10.3 below the optimum at 2,
# 3.3 at 1.1), where dense data pay the restarts for nothing (alpaca_eval_outputs, 87 a length,
# at 65,536: its table, backward and forward passes 14.5 ms at 2 against 23.1 at 1.1; gsm8k,
# tldr_pages and the bundled data, 27 to 111 a length, the same or slower at 1.1).  K = 6,
# against rungs 2 apart with the rows as now (``benchmarks/bench_bound_rows.py --rungs``): arena
# 2.39 -> 1.33 times batch size 8's at 65,536, 0.72 -> 0.91 at 16,384, 0.59 -> 0.64 at 4,096;
# moss_sft_conversations (1.4 a length) 0.75-1.27 -> 0.77-1.25.
_SPARSE = 4.0
SLACK = 1e-8


class BudgetBounds(NamedTuple):
    """The table of bounds' sums (``t_up``, ``t2_up``: :func:`_bound_table`, its rows
    ``stride`` starts apart, closer near the top: :func:`row_starts`; ``row_of[i]`` the row
    that start ``i`` reads) with ``cum`` and ``size`` as floats, and where ``B = 1`` the
    prefix sums of the samples' weights ``mass`` (:func:`_mass`) with a bound ``mass_err`` on
    the rounding of a difference of two."""

    cum_float: np.ndarray
    size_float: np.ndarray
    t_up: np.ndarray
    t2_up: np.ndarray
    stride: int
    mass: np.ndarray
    mass_err: float
    row_of: np.ndarray


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def full_bound(
    t: float, t2: float, w: float, w2: float, b: float, first: tuple[float, float]
) -> tuple[float, float]:  # pragma: no cover - compiled
    """``(eb, t_b)`` for a bucket with a full batch ending at ``j``: ``eb`` at most its full
    batches' ``E_B[g_B]`` and ``t_b`` at least their ``T_B[g_B]`` (``g_B = w + B w2``), from
    the table's sums ``t >= T(i, j)`` and ``t2`` (the row at or below ``i``; 0 without a
    second sum), each at most ``w_j - w_{i+1}`` (the longest sample drawn is at least the
    shortest; ``first``: ``w_{i+1}``, ``w2_{i+1}``), plus the margin ``SLACK``: the objective
    is decreasing in ``T``."""
    w_first, w2_first = first
    tu = min(t, w - w_first) + SLACK * w
    tu2 = min(t2, w2 - w2_first) + SLACK * w2
    return (w - tu) + b * (w2 - tu2), tu + b * tu2


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def ones_bound(mass_j: float, mass_i: float, err: float, n: float, g_top: float) -> float:  # pragma: no cover
    """A bucket of ``n`` samples in batches of one, its full cost less ``per_batch``: the
    sum of its samples' weights (``mass_j - mass_i``) less the prefix sums' rounding bound
    ``err`` and ``SLACK`` of ``n`` samples of its longest weight ``g_top`` (above the rounding
    of the exact costs' sums, as :func:`full_bound`'s)."""
    return ((mass_j - mass_i) - err) - SLACK * n * g_top


def _bound_table(
    data: Arrays, rung: np.ndarray, starts: np.ndarray, two: bool, threaded: bool | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``T(g, j)`` (and the second sum, if ``two``) for every start ``g`` of ``starts``
    (:func:`table_starts`) and every ``j > g``, for batches of ``rung[j]``: with ``rung <= size``,
    at least the sums of any start at or above ``g`` (the module docstring).  The rows run on
    every thread when ``threaded`` (by default: from ``THREADED_CELLS`` cells on,
    :func:`filled_cells`, with more than one thread), else on this one; each row is the same
    either way, bit for bit."""
    m = data.cum.size - 1
    n_rows = starts.size
    t_up = np.zeros((n_rows, m + 1))
    t2_up = np.zeros((n_rows if two else 0, m + 1))
    if threaded is None:
        threaded = filled_cells(starts, m) >= THREADED_CELLS and numba.get_num_threads() > 1
    if threaded:
        with THREADS_LOCK:
            lanes = max(1, min(numba.get_num_threads(), n_rows))
            _bound_rows_threaded(data, rung, starts, t_up, t2_up, lanes)
    else:
        _bound_rows(data, rung, starts, t_up, t2_up)
    return t_up, t2_up


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _bound_row(
    r: int,
    data: Arrays,
    rung: np.ndarray,
    starts: np.ndarray,
    every: np.ndarray,
    t_up: np.ndarray,
    t2_up: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Row ``r`` of the table (start ``starts[r]``) into ``t_up[r]`` and, where it has rows,
    ``t2_up[r]``."""
    second = t2_up[r] if t2_up.shape[0] > 0 else np.empty(t_up.shape[1])
    row_sums(starts[r], data, rung, every, False, t_up[r], second)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _bound_rows(
    data: Arrays, rung: np.ndarray, starts: np.ndarray, t_up: np.ndarray, t2_up: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Every row of the table, on this thread."""
    every = np.ones(t_up.shape[1], np.bool_)
    for r in range(t_up.shape[0]):
        _bound_row(r, data, rung, starts, every, t_up, t2_up)


@numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
def _bound_rows_threaded(
    data: Arrays, rung: np.ndarray, starts: np.ndarray, t_up: np.ndarray, t2_up: np.ndarray, lanes: int
) -> None:  # pragma: no cover - compiled
    """Every row of the table, dealt in turn to ``lanes`` lanes (one per thread): a row costs
    more the lower its start, so contiguous halves would leave one of two threads about three
    quarters of the work (numba splits a ``prange`` into contiguous chunks)."""
    every = np.ones(t_up.shape[1], np.bool_)
    n_rows = t_up.shape[0]
    for lane in numba.prange(lanes):
        for r in range(lane, n_rows, lanes):
            _bound_row(r, data, rung, starts, every, t_up, t2_up)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _rungs(size: np.ndarray, factor: float) -> np.ndarray:  # pragma: no cover - compiled
    """``size`` (non-increasing from index 1) lowered to the last of each run of ends whose
    batch sizes stay within ``factor`` of the run's first: at most ``size``, and changing
    ``log(B_max / B_min) / log(factor)`` times, not at every end."""
    out = size.copy()
    m = size.size - 1
    j = 1
    while j <= m:
        end = j
        while end < m and size[end + 1] * factor >= size[j]:
            end += 1
        for t in range(j, end + 1):
            out[t] = size[end]
        j = end + 1
    return out


def _mass(data: Arrays) -> tuple[np.ndarray, float]:
    """``mass[j]``: the sum of ``weight + weight2`` (a batch of one's weight) over the samples
    of lengths ``1..j``, and a bound on the rounding of ``mass[j] - mass[i]``: each of the
    ``m`` products and sums rounds by at most ``2**-53`` of a partial sum of magnitudes, so
    either prefix is off by at most ``2 (m + 1) 2**-53`` of the sum of them all, and their
    difference by twice that plus its own rounding (``4 (m + 2)``, doubled for safety)."""
    m = data.cum.size - 1
    counts = np.diff(data.cum).astype(np.float64)
    terms = counts * (data.weight[1:] + data.weight2[1:])
    mass = np.zeros(m + 1)
    mass[1:] = np.cumsum(terms)
    err = 8.0 * (m + 2) * 2.0**-53 * float(np.abs(terms).sum())
    return mass, err


def rung_factor(data: Arrays, objective: str) -> float:
    """The factor between the bounds' rungs under ``objective`` (the problem's, one of
    :data:`~analysis.optimize._problem.OBJECTIVES`): ``_RUNG_STEPS`` for the steps objective
    (``_RUNG_COARSE`` on data of fewer than ``_SPARSE`` samples per distinct length),
    ``_RUNG_COARSE`` with any other cost per batch, else ``_RUNG`` (the module's constants)."""
    if objective == "steps":
        return _RUNG_COARSE if data.cum[-1] < _SPARSE * (data.cum.size - 1) else _RUNG_STEPS
    return _RUNG_COARSE if data.per_batch > 0.0 else _RUNG


def budget_bounds(
    data: Arrays, stride: int | None = None, threaded: bool | None = None, *, objective: str
) -> BudgetBounds:
    """The bounds of a token budget's bucket costs under ``objective`` (the problem's: its
    rungs, :func:`rung_factor`), their rows ``stride`` starts apart (by
    default ``BOUND_STRIDE``, or further where the table would pass ``BOUND_BYTES`` or, with a
    cost per batch, where there would be more than ``BOUND_ROWS`` rows), filled on every
    thread or on this one (``threaded``; by default by the table's size: :func:`_bound_table`),
    closer near the top (:func:`row_starts`) unless those rows would pass ``BOUND_BYTES``."""
    m = data.cum.size - 1
    if stride is None:
        coarse = -(-m // BOUND_ROWS) if data.per_batch > 0.0 else 1
        stride = max(BOUND_STRIDE, coarse, -(-m * _row_bytes(data) // BOUND_BYTES))
    starts = table_starts(data, stride)
    rung = _rungs(data.size, rung_factor(data, objective))
    t_up, t2_up = _bound_table(data, rung, starts, bool(data.weight2.any()), threaded)
    mass, err = _mass(data)
    count, size = data.cum.astype(np.float64), data.size.astype(np.float64)
    return BudgetBounds(count, size, t_up, t2_up, stride, mass, err, row_index(starts, m))


def _row_bytes(data: Arrays) -> int:
    """The bytes of one row of the table (one or two sums per end)."""
    return data.cum.size * 8 * (2 if data.weight2.any() else 1)


def table_starts(data: Arrays, stride: int) -> np.ndarray:
    """The starts of the table's rows: :func:`row_starts`, or every ``stride``-th start alone
    where those would pass ``BOUND_BYTES`` (as the stride keeps within it)."""
    m = data.cum.size - 1
    starts = row_starts(m, stride)
    if starts.size * _row_bytes(data) > BOUND_BYTES:
        return np.arange(0, m, stride, dtype=np.int64)
    return starts


def filled_cells(starts: np.ndarray, m: int) -> int:
    """The cells a table of rows from ``starts`` over ``m`` lengths fills, counted as
    ``THREADED_CELLS`` was measured (rows times lengths, for rows a stride apart): twice the
    ends above each start, so that the short rows near the top count for what they cost."""
    return 2 * int((m - starts).sum())


def row_starts(m: int, stride: int) -> np.ndarray:
    """The starts of the table's rows over ``m`` lengths: ``stride`` apart, and where fewer
    than ``TOP_SHARE * stride`` lengths lie above, at most a ``TOP_SHARE``-th of them apart
    (every start in the top ``TOP_SHARE``; why: the comment at ``TOP_SHARE``)."""
    out: np.ndarray = _row_starts(m, stride, TOP_SHARE)
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _row_starts(m: int, stride: int, share: int) -> np.ndarray:  # pragma: no cover - compiled
    """:func:`row_starts` with ``TOP_SHARE`` as ``share`` (compiled: a loop of a few hundred
    steps took 0.1 ms in Python, 4 % of a call on gsm8k)."""
    out = np.empty(max(m, 1), np.int64)
    out[0], g, n = 0, 0, 1
    while True:
        g += max(1, min(stride, (m - g) // share))
        if g >= m:
            return out[:n].copy()
        out[n] = g
        n += 1


def row_index(starts: np.ndarray, m: int) -> np.ndarray:
    """``row_of[i]``: the row of ``starts`` at or below each start ``i`` of ``0..m``."""
    out: np.ndarray = np.searchsorted(starts, np.arange(m + 1), side="right") - 1
    return out.astype(np.int64)
