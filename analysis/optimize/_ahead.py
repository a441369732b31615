"""The optimiser's kernels compiled ahead: ``python -m analysis.optimize._ahead [PART[,PART...]]``.

numba compiles a kernel on its first call and keeps the machine code in its cache on disk,
beside the module (``cache=True``); every later process loads it.  A first call pays the
compile (on these machines about 30 s for batch size 8's exact DP, about two minutes of CPU
for every kernel called here), and processes started at once (the test workers, the
notebooks' kernels) each pay it, since none finds the cache yet.  The installs run this module
at LLVM's -O1 (``NUMBA_OPT=1``): 12-13 % less CPU than numba's default -O3, for kernels as fast
and the same floats (``benchmarks/bench_ahead.py``; the Makefile says more).
The dev install (``make setup``, which ``make test`` runs) runs this module beside the install
of the extras, in two processes: parts 1, 0 and 2 in one, part 3 in the other, so the suite's
processes load the kernels instead; the report's install (``make report``) parts 0 and 1 in one
and part 2 in the other, batch size 8's, which the report's own process would otherwise compile,
on one core, before its first notebook (the Makefile says what each saves).  Two processes
share the cache on disk as it fills: a kernel one of them has written, the other loads.  The
order of the calls decides how many kernels both compile at once (:func:`_parts`).

It makes each top-level call production makes once, on a small histogram: the exact DP for
the three rules that take different passes (a fixed batch size by the product formula, one
above it, a token budget), the candidate grid with its proof, the frontier's matrices and
passes (batch size 8 and a token budget), a floor and the greedy rule's descent.  A kernel it
misses still compiles on its first call, as before.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import numpy as np

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.optimize import optimize_edges
from analysis.optimize._budget import budget_bounds
from analysis.optimize._exact import exact_arrays
from analysis.optimize._frontier import frontier_minima
from analysis.optimize._problem import build_problem

# Candidate ends of the grid the candidate search is called with (fewer than the histogram's).
_GRID = 50
# The rules whose exact DP takes different compiled passes: a fixed batch size whose C(N, B)
# fits float64 (the product formula), one whose C(N, B) does not (on :func:`histogram`'s
# 242,850 samples), a token budget (with lengths padded to a multiple: the same kernels).
RULES = (
    BatchRule(batch_size=8),
    BatchRule(batch_size=1_000),
    BatchRule(max_tokens=4_096, pad_to_multiple_of=8),
)


def histogram() -> LengthHistogram:
    """The small histogram the kernels are called on: 400 distinct lengths (more than the
    candidate grid's 50), 242,850 samples."""
    lengths = np.arange(1, 401) * 5
    counts = 1 + (np.arange(400) * 7919) % 1_250
    return LengthHistogram.from_counts(lengths, counts)


def _parts(hist: LengthHistogram) -> tuple[tuple[Callable[[], object], ...], ...]:
    """The calls in four parts, for processes side by side: batch size 8's exact DP (by the
    product formula); the greedy rule's descent; a floor, the candidate grid and the frontier, at
    batch size 8; the exact DP of the other two rules, a token budget's frontier and its table
    of bounds on threads.

    The dev install's two processes share many kernels (the bounds, the tiles), and each
    compiles those it reaches before the other has written them: the last part starts with the
    token budget's table of bounds and frontier, and the other process starts with the greedy
    rule's descent (its own kernels), so that one of the two has written most shared kernels by
    the time the other reaches them.  From an empty cache, taking turns three times
    (``benchmarks/bench_ahead.py --schedule --rounds 3``): 52.8, 59.8 and 57.0 s of wall until
    both end, against 57.6, 63.7 and 62.6 s with the calls in the order of their first use (the
    token budget's table last), and 3-6 s less CPU.  The report's install runs parts 0 and 1
    beside part 2, as before (39.6-42.9 s of wall)."""
    batch_8 = (lambda: optimize_edges(hist, 4, RULES[0], candidates=None),)
    greedy = (lambda: optimize_edges(hist, 4, RULES[0], method="greedy"),)
    searches = (
        lambda: optimize_edges(hist, 4, RULES[0], min_mixing=0.5),
        lambda: optimize_edges(hist, 4, RULES[0], candidates=_GRID),
        lambda: frontier_minima(hist, RULES[0], 4, [0.0, 1.0]),
    )
    others = (
        lambda: _both_tables(hist),
        lambda: frontier_minima(hist, RULES[2], 4, [0.0, 1.0]),
        lambda: optimize_edges(hist, 4, RULES[1], candidates=None),
        lambda: optimize_edges(hist, 4, RULES[2], candidates=None),
    )
    return batch_8, greedy, searches, others


def _both_tables(hist: LengthHistogram) -> None:
    """A token budget's table of bounds filled on every thread and on one: the histogram's
    table is too small for the optimiser to take threads for it."""
    prob = build_problem(hist, RULES[2])
    data, _ = exact_arrays(prob)
    for threaded in (True, False):
        budget_bounds(data, threaded=threaded, objective=prob.objective)


def compile_kernels(parts: Sequence[int] | None = None) -> None:
    """Call every kernel the optimiser's entry points reach, or those of ``parts`` (of 0 to 3,
    in the order given: :func:`_parts`; each compiles into the cache on disk unless it is there
    already).

    Examples
    --------
    >>> compile_kernels()  # a second call loads every kernel: a second or so
    """
    every = _parts(histogram())
    for part in range(len(every)) if parts is None else parts:
        for call in every[part]:
            call()


if __name__ == "__main__":  # python -m analysis.optimize._ahead [PART[,PART...]]
    compile_kernels([int(p) for p in sys.argv[1].split(",")] if len(sys.argv) > 1 else None)
