"""Benchmark: one simulated epoch of every batching strategy on case-sized data.

Run from the repository root::

    .venv/bin/python benchmarks/bench_simulate.py

On the bundled data (``data/case_lengths.csv``, 902,087 samples of 65..8,192 tokens, in a
seeded random sample order, as a dataset on disk would be), batch size 8, ``CASE_EDGES``,
token strategies at ``max_tokens = 8 * 8192``.  For each strategy prints the median of 7
runs of: the one-off preparation (``epoch_builder``: sorting, bucket ids, the packing plan),
one epoch (``EpochBuilder.epoch``), and one epoch through ``simulate`` (epoch + per-batch
table + metrics).  Target: a bucketed epoch in <= 0.1 s.
"""

from __future__ import annotations

import numpy as np
from _common import case_histogram, median_seconds

from analysis.case import CASE_BATCH_SIZE, CASE_EDGES, CASE_MAX_LENGTH
from analysis.lengths import LengthHistogram
from analysis.paths import BUNDLED_DATA
from analysis.simulation import simulate
from analysis.strategies import STRATEGIES, epoch_builder

RUNS = 7


def main() -> None:
    # expand() is sorted by length; a dataset on disk is not: shuffle it (seeded)
    lengths = np.random.default_rng(1701).permutation(case_histogram().clip(CASE_MAX_LENGTH).expand())
    name = f"{BUNDLED_DATA.name} (shuffled)"
    hist = LengthHistogram.from_lengths(lengths)
    print(f"data: {name}, {hist.n_samples:,} samples, {hist.n_distinct:,} distinct lengths")
    print(
        f"median of {RUNS} runs; batch_size={CASE_BATCH_SIZE}, edges={list(CASE_EDGES)}, "
        f"max_tokens={CASE_BATCH_SIZE * CASE_MAX_LENGTH}"
    )
    print(f"{'strategy':<16}{'prepare s':>11}{'epoch s':>10}{'simulate s':>12}")
    for strategy in STRATEGIES:
        if strategy in ("token_budget", "packing"):
            rule = {"max_tokens": CASE_BATCH_SIZE * CASE_MAX_LENGTH}
        else:
            rule = {"batch_size": CASE_BATCH_SIZE}
        prepare = median_seconds(
            lambda s=strategy, r=rule: epoch_builder(lengths, s, edges=CASE_EDGES, **r), runs=RUNS
        )
        builder = epoch_builder(lengths, strategy, edges=CASE_EDGES, **rule)
        rng = np.random.default_rng(0)
        epoch = median_seconds(lambda b=builder, g=rng: b.epoch(g), runs=RUNS)
        sim = median_seconds(
            lambda s=strategy, g=rng, r=rule: simulate(lengths, s, rng=g, edges=CASE_EDGES, **r), runs=5
        )
        print(f"{strategy:<16}{prepare:>11.3f}{epoch:>10.3f}{sim:>12.3f}")


if __name__ == "__main__":
    main()
