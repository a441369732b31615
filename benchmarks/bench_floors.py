"""How often a floor's plan is proven best, and how long the search takes (issue 32).

For ``data/case_lengths.csv`` and every ``../shared/data/*.npy`` (alpaca clipped at 8,192),
batch size 8, K in ``--ks`` and a spread of floors (efficiency at 99, 95, 90, 80 and 60 % of
the K-bucket optimum's; mixing 2, 5, 10, 30 and 60 %), each floor searched by
:func:`analysis.optimize.floor_plans` on one set of matrices per file: how many plans are
proven best by a hull vertex (``hull``), by the exact search of the gap (``labels``), or
stopped at the work limit with a proven bound (``bounded``), how many floors are out of reach,
and the median and largest seconds of one search (the matrices' build, once per file, apart;
the first file's also compiles the kernels).
``exact`` is over the candidate grid where a file has more than 2,048 distinct lengths
(``grid`` in the table). Then ``optimize_edges(K=6, min_efficiency=0.9)`` end to end on the
case data (the time goal: about a second).

    PYTHONPATH=. python benchmarks/bench_floors.py            # K = 2, 4, 6, 8, 12, 16, 24, 32
    PYTHONPATH=. python benchmarks/bench_floors.py --ks 2-32  # every K
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from pathlib import Path

import analysis
from analysis import BatchRule, optimize_edges
from analysis.optimize import Floor

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
EFFICIENCY_SHARES = (0.99, 0.95, 0.9, 0.8, 0.6)
MIXING = (0.02, 0.05, 0.1, 0.3, 0.6)


def _ks(text: str) -> list[int]:
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",")]


def _files() -> dict[str, Path]:
    return {"case": Path("data/case_lengths.csv"), **{p.stem: p for p in sorted(SHARED.glob("*.npy"))}}


def _one_file(name: str, path: Path, ks: list[int], rule: BatchRule) -> list[str]:
    hist = analysis.load_lengths(path)
    hist = hist.clip(8192) if name == "alpaca_eval_outputs" else hist
    frontier_dp = importlib.import_module("analysis.optimize._frontier")
    prob = frontier_dp.build_problem(hist, rule)
    start = time.perf_counter()
    lag = frontier_dp.lagrangian(hist, prob)
    build = time.perf_counter() - start
    grid = "" if prob.ends.size <= frontier_dp._EXACT_UP_TO else f" (grid of {frontier_dp._GRID})"
    lines = [f"{name}: {hist.n_distinct:,} distinct lengths{grid}, matrices built in {build:.2f} s"]
    for k in [k for k in ks if k <= hist.n_distinct]:
        top = optimize_edges(hist, k, rule).efficiency
        asks = [(k, Floor("efficiency", top * s)) for s in EFFICIENCY_SHARES]
        asks += [(k, Floor("mixing", y)) for y in MIXING]
        counts = {"hull": 0, "labels": 0, "bounded": 0, "unreachable": 0}
        seconds = []
        for _, floor in asks:
            t = time.perf_counter()
            try:
                plan = frontier_dp.floor_plan(hist, prob, k, floor, lag)
            except ValueError:  # out of reach
                counts["unreachable"] += 1
                continue
            seconds.append(time.perf_counter() - t)
            assert plan.floor is not None
            counts[plan.floor.searched] += 1
        lines.append(
            f"  K = {k:2d}: hull {counts['hull']:2d}, labels {counts['labels']:2d}, bounded "
            f"{counts['bounded']:2d}, unreachable {counts['unreachable']:2d}; one search median "
            f"{statistics.median(seconds or [0.0]):.2f} s, largest {max(seconds or [0.0]):.2f} s"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ks", type=_ks, default=[2, 4, 6, 8, 12, 16, 24, 32], help="e.g. 2-32 or 2,6,32")
    parser.add_argument("--files", nargs="*", default=None, help="names to run (default: all)")
    args = parser.parse_args()
    rule = BatchRule(batch_size=8)
    print(
        f"batch size 8; per K: {len(EFFICIENCY_SHARES)} efficiency floors (shares of the K optimum's) "
        f"and {len(MIXING)} mixing floors"
    )
    for name, path in _files().items():
        if args.files and name not in args.files:
            continue
        for line in _one_file(name, path, args.ks, rule):
            print(line, flush=True)
    hist = analysis.load_lengths("data/case_lengths.csv")
    start = time.perf_counter()
    plan = optimize_edges(hist, 6, batch_size=8, min_efficiency=0.9)
    wall = time.perf_counter() - start
    assert plan.floor is not None
    print(
        f"optimize_edges(case, K=6, min_efficiency=0.9) end to end: {wall:.2f} s, {plan.floor.searched}, "
        f"mixing {plan.mixing:.4f}, efficiency {plan.efficiency:.4f}"
    )


if __name__ == "__main__":
    main()
