"""Benchmark: one simulated epoch of every batching strategy on case-sized data.

Run from the repository root::

    .venv/bin/python benchmarks/bench_simulate.py

On the bundled data (``data/case_lengths.csv``, in a seeded random sample order, as a dataset
on disk would be; a seeded lognormal stand-in of 902,087
samples of 65..8,192 tokens when it is missing), batch size 8, ``CASE_EDGES``, token
strategies at ``max_tokens = 8 * 8192``.  For each strategy prints the median of 7 runs of:
the one-off preparation (``epoch_builder``: sorting, bucket ids, the packing plan), one epoch
(``EpochBuilder.epoch``), and one epoch through ``simulate`` (epoch + per-batch table +
metrics).  Target: a bucketed epoch in <= 0.1 s.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from analysis.case import CASE_BATCH_SIZE, CASE_EDGES, CASE_MAX_LENGTH, CASE_N_SAMPLES
from analysis.lengths import LengthHistogram
from analysis.paths import BUNDLED_DATA
from analysis.simulate import simulate
from analysis.strategies import STRATEGIES, epoch_builder

RUNS = 7


def median_s(fn, runs: int = RUNS) -> float:
    """Median wall time of ``fn()`` in seconds (one warm-up call first)."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def case_lengths() -> tuple[np.ndarray, str]:
    """Per-sample lengths of the bundled data, or a stand-in of the same size and range."""
    if BUNDLED_DATA.exists():
        from analysis import load_lengths

        # expand() is sorted by length; a dataset on disk is not: shuffle it (seeded)
        lengths = load_lengths(BUNDLED_DATA).clip(CASE_MAX_LENGTH).expand()
        return np.random.default_rng(1701).permutation(lengths), f"{BUNDLED_DATA.name} (shuffled)"
    rng = np.random.default_rng(1701)
    lengths = np.clip(rng.lognormal(7.3, 0.8, CASE_N_SAMPLES).astype(np.int64), 65, CASE_MAX_LENGTH)
    return lengths, "lognormal stand-in"


def main() -> None:
    lengths, name = case_lengths()
    hist = LengthHistogram.from_lengths(lengths)
    print(f"data: {name}, {hist.n_samples:,} samples, {hist.n_distinct:,} distinct lengths")
    print(f"median of {RUNS} runs; batch_size={CASE_BATCH_SIZE}, edges={list(CASE_EDGES)}, "
          f"max_tokens={CASE_BATCH_SIZE * CASE_MAX_LENGTH}")
    print(f"{'strategy':<16}{'prepare s':>11}{'epoch s':>10}{'simulate s':>12}")
    for strategy in STRATEGIES:
        if strategy in ("token_budget", "packing"):
            rule = {"max_tokens": CASE_BATCH_SIZE * CASE_MAX_LENGTH}
        else:
            rule = {"batch_size": CASE_BATCH_SIZE}
        prepare = median_s(lambda: epoch_builder(lengths, strategy, edges=CASE_EDGES, **rule))
        builder = epoch_builder(lengths, strategy, edges=CASE_EDGES, **rule)
        rng = np.random.default_rng(0)
        epoch = median_s(lambda: builder.epoch(rng))
        sim = median_s(lambda: simulate(lengths, strategy, rng=rng, edges=CASE_EDGES, **rule),
                       runs=5)
        print(f"{strategy:<16}{prepare:>11.3f}{epoch:>10.3f}{sim:>12.3f}")


if __name__ == "__main__":
    main()
