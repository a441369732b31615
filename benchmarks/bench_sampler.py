"""Benchmark: the straggler factor of the bucketed sampler with and without ``sync_buckets``.

Run from the repository root::

    .venv/bin/python benchmarks/bench_sampler.py [LENGTHS.npy ...]

For each length file (``int32`` per-sample lengths; default: ``alpaca_eval_outputs.npy`` and
``tldr_pages.npy`` from the shared development data), lengths clipped at 8,192 (zeros dropped),
optimal 6-bucket edges (``optimize_edges(hist, 6, batch_size=8)``), 8 ranks, 3 epochs: the
straggler factor (mean over steps of the slowest rank's padded tokens over the ranks' mean),
efficiency, steps per epoch and repeated samples per epoch of ``simulate(..., "bucketed",
world_size=8, sync_buckets=...)``, which builds the sampler's epochs, and the median time of
one sampler epoch for one rank (``list(BucketedBatchSampler(...))`` after ``set_epoch``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _common import SHARED_DATA, median_seconds

from analysis import BucketedBatchSampler, LengthHistogram, optimize_edges, simulate

WORLD_SIZE, BATCH_SIZE, N_BUCKETS, EPOCHS, CLIP = 8, 8, 6, 3, 8192
DEFAULT_FILES = ("alpaca_eval_outputs.npy", "tldr_pages.npy")


def main(paths: list[Path]) -> None:
    print(
        f"{WORLD_SIZE} ranks, batch_size={BATCH_SIZE}, {N_BUCKETS} optimal buckets, "
        f"{EPOCHS} epochs, lengths clipped at {CLIP}"
    )
    print(
        f"{'data':<24}{'samples':>9}{'sync':>6}{'straggler':>11}{'efficiency':>12}"
        f"{'steps':>7}{'repeats':>9}{'epoch s':>9}"
    )
    for path in paths:
        raw = np.load(path).astype(np.int64)
        lengths = np.minimum(raw[raw > 0], CLIP)
        plan = optimize_edges(LengthHistogram.from_lengths(lengths), N_BUCKETS, batch_size=BATCH_SIZE)
        for sync in (True, False):
            res = simulate(
                lengths,
                "bucketed",
                rng=np.random.default_rng(0),
                epochs=EPOCHS,
                edges=plan.edges,
                batch_size=BATCH_SIZE,
                world_size=WORLD_SIZE,
                sync_buckets=sync,
            )
            summary = res.summary()
            sampler = BucketedBatchSampler(lengths, plan, world_size=WORLD_SIZE, sync_buckets=sync)

            epochs = iter(range(10**6))

            def one_epoch(sampler=sampler, epochs=epochs) -> None:
                sampler.set_epoch(next(epochs))
                list(sampler)

            seconds = median_seconds(one_epoch, runs=5)
            print(
                f"{path.stem:<24}{lengths.size:>9,}{'yes' if sync else 'no':>6}"
                f"{summary['straggler_factor']:>11.3f}{summary['efficiency']:>12.4f}"
                f"{summary['steps']:>7.0f}{sampler.n_repeated:>9,}{seconds:>9.3f}"
            )


if __name__ == "__main__":
    args = [Path(p) for p in sys.argv[1:]] or [SHARED_DATA / name for name in DEFAULT_FILES]
    main(args)
