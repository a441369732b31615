"""Benchmark: the exact expected padding on case-sized histograms.

Run from the repository root::

    .venv/bin/python benchmarks/bench_waste.py

Times ``expected_padding`` (6 buckets, ``CASE_EDGES``, batch size 8) on the bundled data
(``data/case_lengths.csv``; a synthetic stand-in of 902,087 samples of 65..8,192 tokens when
it is missing) and, if present, on ``../shared/data/alpaca_eval_outputs.npy`` clipped at
8,192.  Prints the median of 25 runs in milliseconds.  Target: <= 10 ms on the case data.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np

from analysis.case import CASE_BATCH_SIZE, CASE_EDGES, CASE_MAX_LENGTH, CASE_N_SAMPLES
from analysis.lengths import LengthHistogram
from analysis.paths import BUNDLED_DATA, PROJECT_ROOT
from analysis.waste import expected_padding

RUNS = 25
SHARED_ALPACA = PROJECT_ROOT.parent / "shared" / "data" / "alpaca_eval_outputs.npy"


def median_ms(fn, runs: int = RUNS) -> float:
    """Median wall time of ``fn()`` in ms (one warm-up call first)."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def case_histogram() -> tuple[str, LengthHistogram]:
    """The bundled case data, or a seeded log-normal stand-in of the same size and range."""
    if BUNDLED_DATA.exists():
        from analysis import load_lengths

        return str(BUNDLED_DATA.relative_to(PROJECT_ROOT)), load_lengths(BUNDLED_DATA)
    rng = np.random.default_rng(1701)
    samples = np.clip(rng.lognormal(np.log(1600), 0.75, CASE_N_SAMPLES).round(), 65, CASE_MAX_LENGTH)
    return "synthetic stand-in", LengthHistogram.from_lengths(samples.astype(np.int64))


def report(name: str, hist: LengthHistogram, edges, **rule) -> None:
    est = expected_padding(hist, edges, **rule)
    ms = median_ms(lambda: expected_padding(hist, edges, **rule))
    rule_text = ", ".join(f"{k}={v}" for k, v in rule.items())
    print(f"{name:<34} {hist.n_samples:>9,} samples {hist.n_distinct:>6,} distinct "
          f"{len(edges) - 1:>2} buckets {rule_text:<40} efficiency {est.efficiency:.4f}  "
          f"median {ms:7.3f} ms")


def main() -> None:
    name, hist = case_histogram()
    report(f"case ({name})", hist, CASE_EDGES, batch_size=CASE_BATCH_SIZE)
    report(f"case ({name}), one bucket", hist, [0, CASE_MAX_LENGTH], batch_size=CASE_BATCH_SIZE)
    report(f"case ({name}), attention", hist, CASE_EDGES, batch_size=CASE_BATCH_SIZE,
           attention_weight=1e-4)
    report(f"case ({name})", hist, CASE_EDGES, max_tokens=65_536)
    if Path(SHARED_ALPACA).exists():
        alpaca = LengthHistogram.from_lengths(np.load(SHARED_ALPACA)).clip(CASE_MAX_LENGTH)
        edges = [0, *alpaca.quantile([1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6]).tolist(), alpaca.max]
        report("alpaca_eval_outputs (6 quantile)", alpaca, edges, batch_size=CASE_BATCH_SIZE)
        report("alpaca_eval_outputs (CASE_EDGES)", alpaca, CASE_EDGES, batch_size=CASE_BATCH_SIZE)
    else:
        print(f"skipped alpaca_eval_outputs: {SHARED_ALPACA} not found")


if __name__ == "__main__":
    main()
