"""Where the exact DP's bounds should take the chords through ``E_s`` at two powers of two below
``B`` (:func:`analysis.optimize._lower.chord_sizes`: ``s_1`` near ``sqrt(B)``, ``s_2 = 4 s_1``):
the time of ``optimize_edges(K=6)`` with them and without, beside the looseness the DP decides by.

Run it from the repository root (under a minute per three batch sizes)::

    PYTHONPATH=. .venv/bin/python benchmarks/chords_gate.py            # batch sizes 16, 32, 64
    PYTHONPATH=. .venv/bin/python benchmarks/chords_gate.py 24,1000,3000   # others

For the bundled data and every ``../shared/data/*.npy`` (unclipped), each batch size: the
looseness of the bounds without the chords and the gap it must pass
(:func:`analysis.optimize._pruned.chord_gate`: an equal-count plan's exact cost over its
bounds, less 1), whether the gate is then open, and the median CPU seconds (one process) of
the call with the gate shut (``_CHORD_GAP`` inf: never) and open (-1: always, from
``_lower._CHORDS_FROM`` to ``_CHORDS_TO``; outside, the two are the same code), the best of two
rounds each, and their ratio: where the ratio is below 1 the chords pay for their sums.
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import SHARED_DATA

from analysis.batching import BatchRule
from analysis.loaders import load_lengths
from analysis.optimize import _pruned, optimize_edges
from analysis.optimize._exact import carried_rows, exact_arrays
from analysis.optimize._kernel import _rows
from analysis.optimize._problem import build_problem
from analysis.paths import BUNDLED_DATA


def _median(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    sizes = [int(x) for x in sys.argv[1].split(",")] if len(sys.argv) > 1 else [16, 32, 64]
    files = [BUNDLED_DATA, *sorted(SHARED_DATA.glob("*.npy"))]
    chord_gap = _pruned._CHORD_GAP
    head = f"{'B':>5} {'looseness':>10} {'gap':>8} {'gate':>5} {'without':>9} {'with':>9} {'ratio':>6}"
    print(f"{'file':<28} {head}")
    for path in files:
        hist = load_lengths(path)
        runs = 3 if hist.n_samples > 500_000 else 9
        for b in sizes:
            rule = BatchRule(batch_size=b)
            prob = build_problem(hist, rule)
            data, short = exact_arrays(prob)
            rows, is_end = _rows(prob, 6, prob.ends)
            loose, gap = _pruned.chord_gate(data, short, rows, is_end, 6, carried_rows(data))
            call = functools.partial(optimize_edges, hist, 6, rule, candidates=None)
            best: dict[float, float] = {}
            for forced in (np.inf, -1.0, np.inf, -1.0):
                _pruned._CHORD_GAP = forced
                call()
                best[forced] = min(best.get(forced, np.inf), _median(call, runs))
            _pruned._CHORD_GAP = chord_gap
            without, with_ = best[np.inf] * 1e3, best[-1.0] * 1e3
            gate = "open" if loose > gap else "shut"
            print(
                f"{path.name[:28]:<28} {b:>5} {loose:>10.1e} {gap:>8.1e} {gate:>5} "
                f"{without:>7.1f}ms {with_:>7.1f}ms {with_ / without:>6.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
