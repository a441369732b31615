"""Benchmark: the exact expected padding on case-sized histograms.

Run from the repository root::

    .venv/bin/python benchmarks/bench_waste.py

Times ``expected_padding`` (6 buckets, ``CASE_EDGES``, batch size 8) on the bundled data
(``data/case_lengths.csv``, 902,087 samples of 65..8,192 tokens) and, if present, on
``../shared/data/alpaca_eval_outputs.npy`` clipped at 8,192.  Prints the median of 25 runs
in milliseconds.  Target: <= 10 ms on the case data.
"""

from __future__ import annotations

from _common import SHARED_DATA, case_histogram, median_seconds, shared_histogram

from analysis import BatchRule
from analysis.case import CASE_BATCH_SIZE, CASE_EDGES, CASE_MAX_LENGTH
from analysis.lengths import LengthHistogram
from analysis.padding.waste import expected_padding
from analysis.paths import BUNDLED_DATA, PROJECT_ROOT

RUNS = 25


def report(name: str, hist: LengthHistogram, edges, **rule) -> None:
    est = expected_padding(hist, edges, BatchRule(**rule))
    ms = 1e3 * median_seconds(lambda: expected_padding(hist, edges, BatchRule(**rule)), runs=RUNS)
    rule_text = ", ".join(f"{k}={v}" for k, v in rule.items())
    print(
        f"{name:<34} {hist.n_samples:>9,} samples {hist.n_distinct:>6,} distinct "
        f"{len(edges) - 1:>2} buckets {rule_text:<40} efficiency {est.efficiency:.4f}  "
        f"median {ms:7.3f} ms"
    )


def main() -> None:
    name = str(BUNDLED_DATA.relative_to(PROJECT_ROOT))
    hist = case_histogram()
    report(f"case ({name})", hist, CASE_EDGES, batch_size=CASE_BATCH_SIZE)
    report(f"case ({name}), one bucket", hist, [0, CASE_MAX_LENGTH], batch_size=CASE_BATCH_SIZE)
    report(f"case ({name}), rounded", hist, CASE_EDGES, batch_size=CASE_BATCH_SIZE, pad_to_multiple_of=64)
    report(f"case ({name})", hist, CASE_EDGES, max_tokens=65_536)
    alpaca = shared_histogram("alpaca_eval_outputs", CASE_MAX_LENGTH)
    if alpaca is not None:
        edges = [0, *alpaca.quantile([1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6]).tolist(), alpaca.max]
        report("alpaca_eval_outputs (6 quantile)", alpaca, edges, batch_size=CASE_BATCH_SIZE)
        report("alpaca_eval_outputs (CASE_EDGES)", alpaca, CASE_EDGES, batch_size=CASE_BATCH_SIZE)
    else:
        print(f"skipped alpaca_eval_outputs: {SHARED_DATA / 'alpaca_eval_outputs.npy'} not found")


if __name__ == "__main__":
    main()
