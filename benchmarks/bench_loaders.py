"""How fast does ``load_lengths`` read 10 million lengths from .npy and Parquet?

Run:  .venv/bin/python benchmarks/bench_loaders.py [--rows N] [--runs R]

Builds ``N`` seeded, case-like int32 lengths (log-normal, clipped to 1..8192), writes them
to a temporary ``.npy`` file and a Parquet file with 10 row groups, then prints the median
of ``R`` timed ``load_lengths`` calls as rows per second, and the peak memory of one call in a
fresh process: Python/NumPy allocations traced by ``tracemalloc`` plus the peak of Arrow's
memory pool (Arrow buffers are not traced; the pages of a memory-mapped ``.npy`` are the
operating system's file cache, not counted).  The text formats (CSV column, JSONL) are timed
on the first ``--text-rows`` lengths, since they are parsed rather than mapped.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from analysis import load_lengths


def make_lengths(n_rows: int, seed: int = 1701) -> np.ndarray:
    """Case-like lengths: log-normal around 700 tokens, clipped to 1..8192, int32."""
    rng = np.random.default_rng(seed)
    return np.clip(np.rint(rng.lognormal(6.5, 0.9, n_rows)), 1, 8192).astype(np.int32)


def time_load(path: Path, runs: int) -> float:
    """Median seconds of ``runs`` calls of ``load_lengths(path)``."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        load_lengths(path)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


_MEMORY_PROBE = """
import sys, tracemalloc
import pyarrow as pa
from analysis import load_lengths
tracemalloc.start()
load_lengths(sys.argv[1])
print(tracemalloc.get_traced_memory()[1] + pa.default_memory_pool().max_memory())
"""


def peak_memory(path: Path) -> int:
    """Peak bytes of one call in a fresh process: traced Python/NumPy heap + Arrow's pool."""
    result = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, str(path)], check=True, capture_output=True, text=True
    )
    return int(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--text-rows", type=int, default=1_000_000)
    args = parser.parse_args()
    lengths = make_lengths(args.rows)
    expected = int(lengths.astype(np.int64).sum())
    with tempfile.TemporaryDirectory() as tmp:
        npy = Path(tmp) / "lengths.npy"
        parquet = Path(tmp) / "lengths.parquet"
        np.save(npy, lengths)
        pq.write_table(pa.table({"n_tokens": lengths}), parquet, row_group_size=-(-args.rows // 10))
        assert pq.ParquetFile(parquet).num_row_groups == 10
        print(
            f"{args.rows:,} int32 lengths, {len(np.unique(lengths)):,} distinct; median of {args.runs} runs"
        )
        text = lengths[: args.text_rows]
        csv, jsonl = Path(tmp) / "lengths.csv", Path(tmp) / "lengths.jsonl"
        csv.write_text("n_tokens\n" + "\n".join(map(str, text.tolist())) + "\n")
        jsonl.write_text("".join(f'{{"n_tokens": {n}}}\n' for n in text.tolist()))
        print(f"data: {lengths.nbytes / 2**20:.0f} MiB as int32")
        for label, path, rows, total in [
            (".npy", npy, args.rows, expected),
            (".parquet (10 row groups)", parquet, args.rows, expected),
            (".csv (one column)", csv, text.size, int(text.sum())),
            (".jsonl", jsonl, text.size, int(text.sum())),
        ]:
            assert load_lengths(path).total_tokens == total
            seconds, peak = time_load(path, args.runs), peak_memory(path)
            print(
                f"{label:26s} {rows:>12,} rows {seconds * 1e3:8.1f} ms "
                f"{rows / seconds / 1e6:7.1f} M rows/s  peak memory {peak / 2**20:6.1f} MiB"
            )


if __name__ == "__main__":
    main()
