"""Peak memory of ``padding-workbench report`` on huge histograms (the goal: at most 2 GB).

The bundled case histogram is scaled to 1e9 and to 1e12 samples (same distinct lengths) and
the report is run on each in a child process, as a user would.  Printed per size: the largest
peak RSS of any one process of the run (the CLI or a notebook's kernel: ``getrusage``'s
``RUSAGE_CHILDREN`` over the waited-for process tree), the largest sum of the tree's RSS seen
by polling every 0.2 s (psutil), and the wall time.  A histogram over
``SIMULATION_SAMPLE_LIMIT`` samples is simulated (and shown to the sampler) through a uniform
subsample, never expanded: without that, notebook 03 expanded 1e9 samples (8 GB) for its
sampler example.

Run from the repository root: ``python benchmarks/bench_report_memory.py [1e9 1e12]``.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import case_histogram

from analysis.lengths import LengthHistogram
from analysis.loaders import save_histogram


def scaled(hist: LengthHistogram, n: int) -> LengthHistogram:
    """``hist``'s shape with ``n`` samples (every length kept, at least once)."""
    counts = np.maximum(1, (hist.counts.astype(float) * (n / hist.n_samples)).astype(np.int64))
    counts[np.argmax(counts)] += n - int(counts.sum())
    return LengthHistogram(hist.lengths, counts)


def tree_rss(pid: int) -> int:
    """Bytes resident in process ``pid`` and its descendants (0 once it is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def run(n: int, folder: Path) -> tuple[float, float, float, int]:
    """Peak single-process RSS (MiB), peak tree RSS (MiB), seconds, exit status."""
    src = save_histogram(scaled(case_histogram(), n), folder / f"hist_{n:.0e}.csv")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    command = [
        sys.executable,
        "-m",
        "analysis",
        "report",
        str(src),
        "--out",
        str(folder / "report"),
        "--quiet",
    ]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak_tree = 0
    while process.poll() is None:
        peak_tree = max(peak_tree, tree_rss(process.pid))
        time.sleep(0.2)
    seconds = time.perf_counter() - start
    err = process.stderr.read() if process.stderr else ""
    if process.returncode != 0:
        print(f"  the report failed: {err.strip()}", flush=True)
    peak_one = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, the largest so far
    if peak_one <= before:
        print("  (the largest process so far was an earlier run's: the peak below is a bound)")
    return peak_one / 1024, peak_tree / 2**20, seconds, process.returncode


def main(sizes: list[int]) -> None:
    print("padding-workbench report on the case histogram scaled to n samples (goal: <= 2,048 MiB)")
    print(f"  {'samples':>17}  {'peak one process':>16}  {'peak all processes':>18}  {'time':>7}  exit")
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-report-memory-") as tmp:
            one, tree, seconds, code = run(n, Path(tmp))
        print(f"  {n:>17,}  {one:>12,.0f} MiB  {tree:>14,.0f} MiB  {seconds:>6.0f}s  {code}", flush=True)


if __name__ == "__main__":
    main([int(float(a)) for a in sys.argv[1:]] or [10**9, 10**12])
