"""Edges for time to quality (issue 33 item 3): ``optimize_edges(..., noise=, step_time=)`` at
K = 6 on the benchmark's own lengths and on the bundled case lengths, with the committed
gradient-noise model and the step times of the benchmark's own GPT-2 on CPU
(``data/step_times_gradient_noise_cpu.csv``; ``step_times_cpu.csv`` times another network);
median of 3 (after one warm-up call that fills numba's cache), beside the time-optimal DP in the
same process.

    PYTHONPATH=$PWD python benchmarks/bench_quality.py
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from analysis import StepTimeModel, optimize_edges
from analysis.loaders import load_gradient_noise, load_lengths, load_step_times

DATA = Path(__file__).resolve().parents[1] / "data"


def _median(call, repeats: int = 3) -> tuple[float, object]:
    call()  # warm-up: numba's cache, the first allocation
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    model = load_gradient_noise(DATA / "gradient_noise_model.npz")
    clock = StepTimeModel.fit(load_step_times(DATA / "step_times_gradient_noise_cpu.csv"))
    print(f"model bins {model.edges[0]}..{model.edges[-1]} ({model.n_bins}), step time {clock}")
    for name in ("gradient_noise_lengths.csv", "case_lengths.csv"):
        hist = load_lengths(DATA / name)
        t_q, plan = _median(lambda h=hist: optimize_edges(h, 6, batch_size=8, noise=model, step_time=clock))
        t_t, fast = _median(lambda h=hist: optimize_edges(h, 6, batch_size=8, step_time=clock))
        g = plan.gradient
        print(
            f"{name}: {hist.n_samples} samples, {hist.n_distinct} lengths {hist.min}..{hist.max}; "
            f"quality K=6 {t_q:.3f} s (time-optimal DP {t_t:.3f} s, x{t_q / t_t:.1f}); "
            f"edges {plan.edges} (time-optimal {fast.edges}); exact {g.exact} grid {g.grid}; "
            f"vertices {g.vertices} passes {g.passes}; rho {g.between_share:.4f}; "
            f"B_eff/B design {g.effective_batch_share:.3f} exact "
            f"{g.priced.effective_batch.value / g.priced.batch_size:.3f}; time to quality predicted "
            f"{g.predicted_time_ratio:.3f} exact {g.time_ratio.value:.3f} +- {g.time_ratio.se:.3f}"
        )


if __name__ == "__main__":
    main()
