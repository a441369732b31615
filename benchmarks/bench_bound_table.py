"""A token budget's table of bounds on two threads against one (``THREADED_CELLS``).

    PYTHONPATH=. python benchmarks/bench_bound_table.py [--rounds N]

For the bundled data and every ``../shared/data/*.npy`` (unclipped), at ``max_tokens`` 4,096,
16,384 and 65,536: the table's size in cells (``_budget.filled_cells``), the table alone
filled on every thread and on this one (wall ms, medians, the two taking turns; the same
floats checked), and at 16,384 ``optimize_edges(K=6)`` with the table forced onto threads
and onto one thread: wall and CPU ms (CPU counts every thread, the spin after a parallel loop
included).  Run it on a quiet machine: the threads need the second core.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from _common import SHARED_DATA

from analysis import BatchRule, LengthHistogram, load_lengths, optimize_edges
from analysis.optimize import _budget as budget
from analysis.optimize._exact import exact_arrays
from analysis.optimize._problem import build_problem
from analysis.paths import BUNDLED_DATA

BUDGETS = (4_096, 16_384, 65_536)


def _times(fn: Callable[[], Any], runs: int) -> tuple[float, float]:
    """Median wall and CPU ms of ``runs`` calls."""
    wall, cpu = [], []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3


def _table(hist: LengthHistogram, max_tokens: int, rounds: int) -> str:
    prob = build_problem(hist, BatchRule(max_tokens=max_tokens))
    data, _ = exact_arrays(prob)
    stride = budget.budget_bounds(data, objective=prob.objective).stride
    starts = budget.table_starts(data, stride)
    rung, two = budget._rungs(data.size, budget.rung_factor(data, prob.objective)), bool(data.weight2.any())
    fill = {t: (lambda t=t: budget._bound_table(data, rung, starts, two, t)) for t in (True, False)}
    same = all(np.array_equal(a, b) for a, b in zip(fill[True](), fill[False]()))
    m = data.cum.size - 1
    runs = 50 if m < 3_000 else 10
    laps: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):  # taking turns
        for t in (True, False):
            laps[t].append(_times(fill[t], runs)[0])
    threads, one = (statistics.median(laps[t]) for t in (True, False))
    cells = budget.filled_cells(starts, m)
    ratio = threads / one
    return f"{cells:>10,} cells  threads {threads:8.3f}  one {one:8.3f} ms  {ratio:4.2f}x  same {same}"


def _plan(hist: LengthHistogram, rounds: int) -> str:
    rule = BatchRule(max_tokens=16_384)
    kept = budget.THREADED_CELLS
    runs = 100 if hist.n_distinct < 3_000 else 5
    laps: dict[int, list[tuple[float, float]]] = {0: [], 1 << 62: []}
    try:
        optimize_edges(hist, 6, rule)
        for _ in range(rounds):  # taking turns
            for cells, lap in laps.items():
                budget.THREADED_CELLS = cells
                lap.append(_times(lambda: optimize_edges(hist, 6, rule), runs))
    finally:
        budget.THREADED_CELLS = kept
    (tw, tc), (ow, oc) = (tuple(statistics.median(x) for x in zip(*lap)) for lap in laps.values())
    return f"K=6 at 16,384: threads {tw:7.2f} ms ({tc:7.2f} CPU)  one {ow:7.2f} ms ({oc:7.2f} CPU)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="turns of each (default 3)")
    rounds = parser.parse_args().rounds
    print(f"numba threads: {numba.get_num_threads()}; THREADED_CELLS = {budget.THREADED_CELLS:,}")
    files = [BUNDLED_DATA, *sorted(SHARED_DATA.glob("*.npy"))]
    for path in files:
        hist = load_lengths(path)
        print(f"== {path.name} ({hist.n_distinct:,} lengths)")
        for max_tokens in BUDGETS:
            print(f"  max_tokens {max_tokens:>6,}: {_table(hist, max_tokens, rounds)}")
        print(f"  {_plan(hist, rounds)}")


if __name__ == "__main__":
    main()
