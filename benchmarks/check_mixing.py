"""Check: the exact mixing (analysis.padding.mixing) against simulated epochs on real length files.

Run from the repository root::

    .venv/bin/python benchmarks/check_mixing.py

For the bundled data and each ``../shared/data/*.npy`` present (clipped at 8,192), batch size
8: the bucketed shuffle on the optimal 6-bucket edges and the full shuffle, exact mixing beside
the mean of ``EPOCHS`` simulated epochs, its standard error and the z-score (|z| <= 3 passes).
"""

from __future__ import annotations

import math

import numpy as np
from _common import SHARED_DATA, case_histogram, shared_histogram

from analysis import BatchRule, optimize_edges, simulate
from analysis.lengths import LengthHistogram
from analysis.padding.mixing import bucketed_mixing, random_mixing

EPOCHS = 4


def check(name: str, hist: LengthHistogram) -> bool:
    plan = optimize_edges(hist, min(6, hist.n_distinct), batch_size=8)
    ok = True
    for strategy, exact in (
        ("bucketed", bucketed_mixing(hist, plan.edges, rule=BatchRule(batch_size=8))),
        ("random", random_mixing(hist, rule=BatchRule(batch_size=8))),
    ):
        res = simulate(
            hist, strategy, batch_size=8, rng=np.random.default_rng(3), epochs=EPOCHS, edges=plan.edges
        )
        got = float(res.epochs["mixing"].mean())
        se = math.sqrt(float((res.epochs["mixing_se"] ** 2).mean()) / EPOCHS)
        z = (got - exact) / se if se > 0 else 0.0
        ok &= abs(z) <= 3
        print(
            f"{name:<26} {strategy:<9} exact {exact:.5f}  simulated {got:.5f} ± {se:.5f}  z {z:+5.2f}  "
            f"{'ok' if abs(z) <= 3 else 'FAIL'}"
        )
    return ok


def main() -> None:
    results = [check("case_lengths.csv", case_histogram())]
    for path in sorted(SHARED_DATA.glob("*.npy")):
        hist = shared_histogram(path.stem)
        if hist is not None:
            results.append(check(path.stem, hist))
    print(f"{sum(results)} of {len(results)} files within 3 standard errors on both strategies")


if __name__ == "__main__":
    main()
