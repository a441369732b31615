"""Step times of the gradient-noise benchmark's own model, so that a report made with its
noise model (``--noise data/gradient_noise_model.npz``) prices time with the same network.

``benchmarks/bench_gradient_noise.py`` probes a 2-layer GPT-2 of width 64 (built from a config,
no download); ``data/step_times_cpu.csv`` times another network (2 layers, width 128, vocabulary
512), so a report that combined the two would price the noise of one model with the steps of
another.  This script times full training steps (forward, backward, AdamW; the benchmark's
sample-mean loss, dropout on) of the benchmark's model on
:func:`analysis.calibration_shapes` of ``data/gradient_noise_lengths.csv`` at batch size 8
(24 shapes, 8 log-spaced lengths x batch sizes 8, 4, 2), ``--repeats`` rounds each, every
round in its own seeded random order (:func:`analysis.measure_step_times`), on one thread,
timed by the process's CPU time (``time.process_time``, as ``bench_step_time.py`` does on a
shared machine), and writes
``step_times_gradient_noise_cpu.csv`` (``batch_size,length,seconds``).  Under a minute:

    PYTHONPATH=$PWD python benchmarks/bench_gradient_noise_step_times.py --out data
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gradient_noise import BATCH, batch_loss, build_model  # noqa: E402

from analysis import StepTimeModel, calibration_shapes, load_lengths, measure_step_times  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = "step_times_gradient_noise_cpu.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "data", help="folder to write the CSV into")
    parser.add_argument("--repeats", type=int, default=9, help="timed rounds per shape (default 9)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    hist = load_lengths(ROOT / "data" / "gradient_noise_lengths.csv")
    shapes = calibration_shapes(hist, batch_size=BATCH)
    model = build_model(0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)

    def step(batch_size: int, length: int) -> None:
        seqs = [rng.integers(1, 1024, length) for _ in range(batch_size)]
        opt.zero_grad()
        batch_loss(model, seqs).backward()
        opt.step()

    started = time.perf_counter()
    # each round in its own random order: in one fixed order the shape after the largest one
    # (8 x 512) ran up to 2x slow in half the rounds, whatever it was
    order = np.random.default_rng(1)
    rounds = [
        measure_step_times(
            step, [shapes[i] for i in order.permutation(len(shapes))], repeats=1, clock=time.process_time
        )
        for _ in range(args.repeats)
    ]
    frame = pd.concat(rounds, ignore_index=True)
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / OUT, index=False)
    fit = StepTimeModel.fit(frame)
    print(f"{len(shapes)} shapes x {args.repeats} rounds in {time.perf_counter() - started:.0f} s wall")
    print(fit)
    print(f"wrote {args.out / OUT}")


if __name__ == "__main__":
    main()
