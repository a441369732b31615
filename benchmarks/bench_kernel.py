"""The DP kernel beside its previous implementations, in one run, on the bundled data.

Run from the repository root: ``python benchmarks/bench_kernel.py [runs]``.

The previous kernels are the NumPy one of commit ``08835f2`` and the first compiled one
(start by start) of ``4862e74`` (``git show`` into temporary packages, so this script needs
the git history); the reference is the plain DP (``analysis.optimize._reference``, the one
the tests hold the kernel to) over the dense matrix of the same bucket costs, timed with
building that matrix (one run; at batch size 8 only: the matrix is ``m**2`` floats, 0.5 GB
here).  Prints medians of ``runs`` calls (CPU seconds of this process: the machines are
shared) and the ratio of each other implementation to the current one, with issue 14's
targets stated as targets:

* K = 6 and one pass for K = 1..16 at batch size 8 (targets 0.15 s and 0.3 s);
* the same with every count multiplied by 4 and by 64 (57.7 M samples, more than the table
  of ``C(x, B)`` holds; one run): time should not depend on the sample count;
* batch sizes 10**4 and 10**8 and token budgets 65,536 / 131,072 (issue 10: time
  independent of the batch size; a token budget at the speed of batch_size mode);
* the first call in a new process with an empty numba cache and with a filled one
  (target <= 3 s); memory (target <= 100 MB): the peak of the optimiser's allocations, and
  the process's peak resident memory during its first call above the interpreter with
  numpy, pandas and the package imported (that call also loads numba and LLVM);
* whether this kernel gives the reference's edges for K = 1..16 at batch size 8.

"this" is the exact DP (each bucket's last short batch as it is, issue 25:
``_kernel.solve_kernel``) and the reference runs over its exact bucket costs
(``_kernel.cost_matrix``); the previous kernels minimise the full-batch objective (each last
short batch counted as a full one), so they are timed, not compared.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
from _common import case_histogram, median_seconds

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.optimize._reference import reference_dp
from analysis.paths import PROJECT_ROOT

PREVIOUS = {"numpy": "08835f2", "1st numba": "4862e74"}
from analysis.optimize import _problem as new_problem  # noqa: E402

new_kernel = importlib.import_module("analysis.optimize._kernel")


def previous_kernel(rev: str) -> tuple[types.ModuleType, types.ModuleType]:
    """``build_problem`` and ``_kernel`` of commit ``rev``, as a temporary package."""
    root = Path(tempfile.mkdtemp(prefix="old_kernel_"))
    name_ = f"kernel_{rev}"
    pkg = root / name_
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in ("build_problem", "_kernel"):
        src = subprocess.run(
            ["git", "show", f"{rev}:analysis/optimize/{name}.py"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (pkg / f"{name}.py").write_text(src.replace("analysis.optimize._problem", f"{name_}.build_problem"))
    sys.path.insert(0, str(root))
    return importlib.import_module(f"{name_}.build_problem"), importlib.import_module(f"{name_}._kernel")


def first_call(cache_dir: str, counts_file: str) -> dict[str, float]:
    """Time of the first ``optimize_edges`` in a new process; the process's resident memory
    before it and its peak during it (``VmHWM``, reset before the call through
    ``/proc/self/clear_refs``: ``ru_maxrss`` would carry this script's own peak into the child
    across ``exec``); and the peak of the allocations a second call traces (``tracemalloc``;
    the ratio tables the first call kept are dropped before it, so it builds them again).
    The histogram comes from a small ``.npz``, so loading it adds no peak."""
    code = (
        "import importlib, sys, time, tracemalloc\n"
        "import numpy as np\n"
        "import analysis\n"
        "from analysis.optimize import optimize_edges\n"
        "def status(key):\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith(key + ':'):\n"
        "            return int(line.split()[1]) * 1024\n"
        "z = np.load(sys.argv[1])\n"
        "h = analysis.LengthHistogram.from_counts(z['lengths'], z['counts'])\n"
        "base = status('VmRSS')\n"
        "open('/proc/self/clear_refs', 'w').write('5')\n"
        "t = time.perf_counter(); optimize_edges(h, 16, batch_size=8); first = time.perf_counter() - t\n"
        "peak = status('VmHWM')\n"
        "ratios = importlib.import_module('analysis.optimize._ratios')\n"
        "ratios._comb_table.cache_clear(); ratios.log_fact_table.cache_clear()\n"
        "tracemalloc.start(); optimize_edges(h, 16, batch_size=8)\n"
        "print(first, base, peak, tracemalloc.get_traced_memory()[1])\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    out = subprocess.run(
        [sys.executable, "-c", code, counts_file],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    first, base, peak, traced = (float(v) for v in out.stdout.split())
    return {"first": first, "base": base, "peak": peak, "traced": traced}


def main(runs: int = 5) -> None:
    previous = {label: previous_kernel(rev) for label, rev in PREVIOUS.items()}
    hist = case_histogram()
    big = LengthHistogram.from_counts(hist.lengths, hist.counts * 4)
    huge = LengthHistogram.from_counts(hist.lengths, hist.counts * 64)  # past the C(x, B) table
    print(f"bundled data: {hist.n_samples:,} samples, {hist.n_distinct:,} distinct lengths")
    print(f"CPU seconds, median of {runs} (token budgets: one run); ratio = that kernel / this one")
    head = "".join(f" {f'{label} {rev}':>18} {'ratio':>6}" for label, rev in PREVIOUS.items())
    print(f"{'':34}{head} {'this':>8} {'reference':>10} {'ratio':>6}  target")

    def timed(
        label: str, h: LengthHistogram, rule: BatchRule, k: int, target: str, n: int = runs, ref: bool = False
    ) -> float:
        p_new = new_problem.build_problem(h, rule)
        t_new = median_seconds(lambda: new_kernel.solve_kernel(p_new, k, p_new.ends), n, time.process_time)
        cols = ""
        for old_problem, old_kernel in previous.values():
            p_old = old_problem.build_problem(h, rule)
            solve = functools.partial(old_kernel.solve_kernel, p_old, k, p_old.ends)
            t_old = median_seconds(solve, n, time.process_time)
            cols += f" {t_old:18.3f} {t_old / t_new:5.1f}x"
        cols += f" {t_new:8.3f}"
        if ref:
            points = np.r_[0, p_new.ends]
            t_ref = median_seconds(
                lambda: reference_dp(new_kernel.cost_matrix(p_new, points), k), 1, time.process_time
            )
            cols += f" {t_ref:10.3f} {t_ref / t_new:5.0f}x"
        else:
            cols += f" {'':10} {'':6}"
        print(f"  {label:<32}{cols}  {target}", flush=True)
        return t_new

    b8 = BatchRule(batch_size=8)
    base = timed("K=6, batch_size 8", hist, b8, 6, "<= 0.15 s", ref=True)
    timed("K=1..16 (one pass), batch_size 8", hist, b8, 16, "<= 0.3 s", ref=True)
    timed("K=6, batch_size 8, counts x 4", big, b8, 6, "as K=6 (sample count)")
    timed("K=6, batch_size 8, counts x 64", huge, b8, 6, "as K=6 (sample count)", 1)
    for rule in (BatchRule(batch_size=10**4), BatchRule(batch_size=10**8)):
        t = timed(f"K=6, batch_size {rule.batch_size:,}", hist, rule, 6, "as batch_size 8")
        print(f"  {'':32} this kernel: {t / base:.1f}x batch_size 8")
    for budget in (65_536, 131_072):
        t = timed(f"K=6, max_tokens {budget:,}", hist, BatchRule(max_tokens=budget), 6, "as batch_size 8", 1)
        print(f"  {'':32} this kernel: {t / base:.1f}x batch_size 8")

    with tempfile.TemporaryDirectory() as tmp:
        counts_file = str(Path(tmp) / "case.npz")
        np.savez(counts_file, lengths=hist.lengths, counts=hist.counts)
        cold = first_call(str(Path(tmp) / "cache"), counts_file)
        warm = first_call(str(Path(tmp) / "cache"), counts_file)
    mib = 1 << 20
    print(
        f"first optimize_edges(K=16) in a new process: empty numba cache {cold['first']:.2f} s, "
        f"filled {warm['first']:.2f} s (target <= 3 s)"
    )
    print(
        f"memory (target <= 100 MB): the optimiser's allocations, its tables included (traced peak) "
        f"{warm['traced'] / mib:.1f} MiB; the process's peak RSS during the first call "
        f"{warm['peak'] / mib:.0f} MiB, {(warm['peak'] - warm['base']) / mib:.0f} MiB above the "
        "process before it (numba and LLVM are imported by that call)"
    )

    same = True
    p_new = new_problem.build_problem(hist, b8)
    _, arg_new = new_kernel.solve_kernel(p_new, 16, p_new.ends)
    points = np.r_[0, p_new.ends]  # the reference DP's argmin indexes the points 0, ends...
    _, arg_ref = reference_dp(new_kernel.cost_matrix(p_new, points), 16)
    for k in range(1, 17):
        ref_ends = [int(points[j]) for j in new_kernel.backtrack(arg_ref, k, len(points) - 1)]
        same &= new_kernel.backtrack(arg_new, k, p_new.m) == ref_ends
    print(json.dumps({"same exact edges K=1..16 (batch_size 8) as the reference DP": bool(same)}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
