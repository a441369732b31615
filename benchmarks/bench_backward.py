"""Benchmark: the product path's backward pass alone, by its number of layers.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_backward.py                  # this checkout
    PYTHONPATH=. .venv/bin/python benchmarks/bench_backward.py --against DIR    # and another one

Prints the median CPU seconds (one core) of ``product_backward`` on the bundled data at batch
size 8 for 6, 13 and 16 layers (``optimize_edges(K=6)``, and the sweep's K = 1..16), as its
``_SKIP_LAYERS`` was chosen.  With ``--against DIR`` (another checkout of the project, e.g.
``git worktree add DIR COMMIT``), each round times that checkout and this one in turn, in
subprocesses, so that both see the same machine (these are shared: compare the ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

LAYERS = (6, 13, 16)


def measure(runs: int) -> dict[int, float]:
    """Median CPU seconds of the pass for each of ``LAYERS`` (in this process, one core)."""
    import numpy as np

    from analysis.batching import BatchRule
    from analysis.loaders import load_lengths
    from analysis.optimize import _pruned
    from analysis.optimize._backward import product_backward
    from analysis.optimize._exact import exact_arrays
    from analysis.optimize._kernel import _rows
    from analysis.optimize._problem import build_problem
    from analysis.paths import BUNDLED_DATA

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    prob = build_problem(load_lengths(BUNDLED_DATA), BatchRule(batch_size=8))
    data, short = exact_arrays(prob)
    out = {}
    for k in LAYERS:
        rows, is_end = _rows(prob, k, prob.ends)
        near = (
            _pruned._tau(data, short, rows, is_end),
            np.empty((k + 1, prob.m + 1), np.int64),
            np.empty(prob.m + 1),
        )
        times = []
        for _ in range(runs + 1):  # (the first call loads or compiles the kernels)
            start = time.process_time()
            product_backward(data, short, rows, is_end, k, near)
            times.append(time.process_time() - start)
        out[k] = statistics.median(times[1:])
    return out


def _child(cwd: Path, runs: int) -> dict[int, float]:
    """:func:`measure` in a subprocess on the package of checkout ``cwd`` (this script's own
    code: an older checkout need not have it)."""
    here = str(Path(__file__).resolve().parent)
    code = (
        f"import json, sys; sys.path.insert(1, {here!r}); import bench_backward as b; "
        f"print(json.dumps(b.measure({runs})))"
    )
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return {int(k): v for k, v in json.loads(res.stdout.splitlines()[-1]).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout to time beside this one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    sides = [("this", here)] + ([("against", args.against.resolve())] if args.against else [])
    for r in range(args.rounds):
        for name, cwd in reversed(sides):
            got = _child(cwd, args.runs)
            cells = "  ".join(f"{k} layers {got[k]:.4f} s" for k in LAYERS)
            print(f"round {r + 1} {name:8s} {cells}", flush=True)


if __name__ == "__main__":
    main()
