"""How far the pruned DP's lower bounds lie below the optimum (not a timing): what decides how
much the forward pass must cost exactly, hence how fast a batch rule is.

Run it from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bounds_gap.py            # every file, three rules
    PYTHONPATH=. .venv/bin/python benchmarks/bounds_gap.py --raised   # and the experiment below

For the bundled data and every ``../shared/data/*.npy`` (unclipped), batch sizes 8, 64 and
1,000, K = 1..6: ``optimum / back[K, 0] - 1``, the optimum's relative distance above the
backward pass's bound (batch size 8 on the bundled data: about 6e-6; the forward pass costs
exactly what lies within that distance), the bounds without the chords (``Short.chords``
false, as ``exact_arrays`` gives it; the DP takes them where its bounds are loose:
:func:`~analysis.optimize._pruned._loose`, ``benchmarks/chords_gate.py``).

``--raised`` (files of at most 3,000 distinct lengths; a dense matrix of bounds): the same
distance when every bucket's bound of a fixed ``B`` above ``POWER_ABOVE`` is raised to
:func:`~analysis.optimize._lower.residue_bound` where higher (the tighter bound the forward
pass already asks of the buckets it would cost), computed for every bucket by a plain DP over
the matrix.  It measures how much of the distance is the short batch's chord and power bound;
``residue_bound`` costs ``O(ends)`` per bucket, so it is an experiment, not a proposal.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from _common import SHARED_DATA, case_histogram

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.loaders import load_lengths
from analysis.optimize._backward import backward
from analysis.optimize._costs import Arrays
from analysis.optimize._exact import POWER_ABOVE, Short, exact_arrays
from analysis.optimize._kernel import _NO_BOUNDS, _rows, solve_kernel
from analysis.optimize._lower import chain, fixed_ratios, fixed_row, residue_bound
from analysis.optimize._problem import Problem, build_problem, resolve_objective
from analysis.optimize._pruned import _tau

K = 6
BATCH_SIZES = (8, 64, 1000)
_DENSE_MAX = 3_000


def _gaps(best: np.ndarray, back: np.ndarray, m: int) -> str:
    return " ".join(f"{best[k, m] / back[k, 0] - 1:8.1e}" for k in range(1, K + 1))


def _raised_back(prob: Problem, data: Arrays, short: Short) -> tuple[np.ndarray, int]:
    """``back`` by a plain DP over the bounds, each raised to ``residue_bound`` where higher
    (``n >= B``, ``r > 0``), and how many were raised."""
    m, b = prob.m, prob.rule.batch_size
    is_end = np.zeros(m + 1, np.bool_)
    is_end[prob.ends] = True
    count = short.cum_float
    low = np.full((m + 1, m + 1), np.inf)
    work, raised = np.empty(m + 1), 0
    for i in [0, *prob.ends[:-1]]:
        row, t = np.empty(m + 1), np.empty(m + 1)
        fixed_row(i, data, short, is_end, np.empty(m + 1), row)
        fixed_ratios(i, data, short, np.empty(m + 1), t)
        chain(i + 2, m + 1, 0.0, data.step, t)
        low[i, i + 1 :] = row[i + 1 :]
        n = count[i + 1 :] - count[i]
        for j in np.nonzero((n >= b) & (n % b > 0))[0] + i + 1:
            if is_end[j] and j > i + 1:
                v = residue_bound(i, int(j), t[j], data, short, work)
                raised += v > low[i, j]
                low[i, j] = max(low[i, j], v)
    back = np.full((K + 1, m + 1), np.inf)
    back[0, m] = 0.0
    for k in range(1, K + 1):
        back[k, :m] = (low[:m] + back[k - 1][None, :]).min(axis=1)
    return back, raised


def report(name: str, hist: LengthHistogram, raised: bool) -> None:
    """One line per batch size: the distances for K = 1..6 (and raised, where asked)."""
    for b in BATCH_SIZES:
        rule = BatchRule(batch_size=b)
        prob = build_problem(hist, rule, 1, None, resolve_objective(rule, None, None))
        rows, is_end = _rows(prob, K, prob.ends)
        data, short = exact_arrays(prob)
        if short.product:
            near = (
                _tau(data, short, rows, is_end),
                np.empty((K + 1, prob.m + 1), np.int64),
                np.empty(prob.m + 1),
            )
        else:
            near = (0.0, np.empty((0, 0), np.int64), np.empty(0))
        back = backward(data, short, _NO_BOUNDS, rows, is_end, K, near)
        best, _ = solve_kernel(prob, K, prob.ends)
        print(f"   {name:<24} batch {b:>5}: {_gaps(best, back, prob.m)}")
        if raised and b > POWER_ABOVE and short.power and prob.m <= _DENSE_MAX:
            start = time.perf_counter()
            back2, n_raised = _raised_back(prob, data, short)
            print(
                f"   {'':<24}   raised: {_gaps(best, back2, prob.m)}  "
                f"({n_raised:,} buckets raised; {time.perf_counter() - start:.0f} s in Python)"
            )


def main() -> None:
    raised = "--raised" in sys.argv[1:]
    print(f"optimum / back[K, 0] - 1 for K = 1..{K} (batch sizes {', '.join(map(str, BATCH_SIZES))}):")
    report("bundled (case_lengths)", case_histogram(), raised)
    for path in sorted(SHARED_DATA.glob("*.npy")):
        report(path.stem, load_lengths(path), raised)


if __name__ == "__main__":
    main()
