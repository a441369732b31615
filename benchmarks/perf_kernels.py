"""Where the optimiser's compiled kernels spend their time: Linux ``perf`` samples of a warm
workload, each named by its kernel (not a timing to quote: a profile to read).

Run from the repository root (needs ``perf``; a minute or two: the kernels compile first)::

    PYTHONPATH=. .venv/bin/python benchmarks/perf_kernels.py b1000          # one workload
    PYTHONPATH=. .venv/bin/python benchmarks/perf_kernels.py --list         # the workloads
    PYTHONPATH=. .venv/bin/python benchmarks/perf_kernels.py b64 --data ../shared/data/gsm8k.npy
    PYTHONPATH=. .venv/bin/python benchmarks/perf_kernels.py b100 --vector  # packed or scalar

``perf`` names only the code it finds in a binary or in ``/tmp/perf-PID.map``; numba's code lies
in memory with no such entry, so a plain ``perf record`` shows bare addresses.  This script
compiles every kernel in its own process (numba's cache in a new temporary folder: a kernel
loaded from the cache keeps no names), runs the workload once, writes that map (each compiled
function's address and the distance to the next), then records only the warm repetitions
(``perf record -p`` on this process, started after the first run) and prints perf's table by
symbol: the kernels as ``module.function`` (numba's mangled names shortened), libm's
``exp``/``log1p`` and the interpreter as they are.  Inlined helpers (``inline="always"``)
count in their caller.

``--vector`` adds, beside each kernel, the floating-point arithmetic of its machine code
(numba's assembly of the kernels compiled here): instructions on 8 (``zmm``) and 4 (``ymm``)
doubles, and scalar ones (summed over the kernel's compiled signatures), so that a lane loop
the vectoriser left scalar shows (the backward pass's tiles are 8-wide on an AVX-512 machine).
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Before numba is imported (by analysis): compile into an empty cache, in this process (the
# folder removed at exit).
os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="perf-kernels-")
atexit.register(shutil.rmtree, os.environ["NUMBA_CACHE_DIR"], ignore_errors=True)

from _common import case_histogram  # noqa: E402

from analysis.batching import BatchRule  # noqa: E402
from analysis.lengths import LengthHistogram  # noqa: E402
from analysis.loaders import load_lengths  # noqa: E402
from analysis.optimize import optimize_edges  # noqa: E402
from analysis.optimize._frontier import frontier_minima  # noqa: E402

_MANGLED = re.compile(r"^_ZN((?:\d+[A-Za-z_]\w*?)+)(?:B\d+v\d+|E)")


def workloads(hist: LengthHistogram) -> dict[str, Callable[[], object]]:
    """The profiled calls on ``hist`` (by default the bundled data: 902,087 samples, 8,128
    distinct lengths)."""

    def k6(**rule: int) -> Callable[[], object]:
        return lambda: optimize_edges(hist, 6, BatchRule(**rule), candidates=None)

    return {
        "b8": k6(batch_size=8),
        "b64": k6(batch_size=64),
        "b100": k6(batch_size=100),
        "b1000": k6(batch_size=1000),
        "b10000": k6(batch_size=10_000),
        "tokens16384": k6(max_tokens=16_384),
        "tokens65536": k6(max_tokens=65_536),
        "frontier_tokens65536": lambda: frontier_minima(hist, BatchRule(max_tokens=65_536), 32, [0.0, 1.0]),
    }


def kernel_name(mangled: str) -> str:
    """``module.function`` from numba's mangled symbol (``_ZN8analysis8optimize...``), else the
    symbol as it is."""
    match = _MANGLED.match(mangled)
    if not match:
        return mangled
    parts, rest = [], match.group(1)
    while rest:
        size = re.match(r"\d+", rest)
        if size is None:
            break
        start = size.end()
        parts.append(rest[start : start + int(size.group())])
        rest = rest[start + int(size.group()) :]
    return ".".join(parts) or mangled


def _dispatchers() -> list[Any]:
    """Every numba dispatcher (a compiled function and its signatures) alive in this process."""
    import gc

    from numba.core.registry import CPUDispatcher

    return [obj for obj in gc.get_objects() if isinstance(obj, CPUDispatcher)]


def write_perf_map() -> int:
    """``/tmp/perf-PID.map`` for every function numba compiled in this process; their count."""
    addresses: dict[int, str] = {}
    for obj in _dispatchers():
        for result in list(obj.overloads.values()):
            library = result.library
            for fn in library._final_module.functions:  # (compiled here: the IR is kept)
                if not fn.is_declaration:
                    address = library.get_pointer_to_function(fn.name)
                    if address:
                        addresses[address] = kernel_name(fn.name)
    ordered = sorted(addresses.items())
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as out:
        for k, (address, name) in enumerate(ordered):
            size = ordered[k + 1][0] - address if k + 1 < len(ordered) else 1 << 16
            out.write(f"{address:x} {min(size, 1 << 20):x} {name}\n")
    return len(ordered)


_ARITHMETIC = re.compile(r"^\s+v(?:add|sub|mul|div|fn?m(?:add|sub)\d*|max|min|sqrt)(pd|sd)\s+(\S+)", re.M)


def vector_counts() -> dict[str, tuple[int, int, int]]:
    """Per kernel compiled in this process (``module.function``), its double-precision
    arithmetic instructions on ``zmm`` (8 doubles), on ``ymm`` (4) and scalar, summed over its
    compiled signatures."""
    out: dict[str, tuple[int, int, int]] = {}
    for obj in _dispatchers():
        name = f"{obj.py_func.__module__}.{obj.py_func.__name__}"
        for asm in obj.inspect_asm().values():
            wide = narrow = scalar = 0
            for kind, register in _ARITHMETIC.findall(asm):
                scalar += kind == "sd"
                wide += kind == "pd" and register.startswith("%zmm")
                narrow += kind == "pd" and register.startswith("%ymm")
            old = out.get(name, (0, 0, 0))
            out[name] = (old[0] + wide, old[1] + narrow, old[2] + scalar)
    return out


def profile(call: Callable[[], object], seconds: float, top: int, vector: bool = False) -> None:
    """Record ``call`` repeated for about ``seconds`` (after a first, compiling call) and print
    perf's ``top`` symbols (with ``vector``, each kernel's :func:`vector_counts`)."""
    started = time.perf_counter()
    call()
    print(f"first call (compiles): {time.perf_counter() - started:.1f} s; {write_perf_map()} functions named")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        command = ["perf", "record", "-q", "-F", "999", "-p", str(os.getpid()), "-o", str(data)]
        recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)  # (perf attaches)
        runs, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds or runs == 0:
            call()
            runs += 1
        elapsed = time.perf_counter() - started
        recorder.send_signal(signal.SIGINT)
        _, err = recorder.communicate(timeout=60)
        if recorder.returncode not in (0, -signal.SIGINT):
            sys.exit(f"perf record failed: {err.decode().strip()}")
        print(f"recorded {runs} warm calls, {elapsed / runs * 1000:.1f} ms each (wall, perf attached)")
        report = subprocess.run(
            ["perf", "report", "-i", str(data), "--no-children", "--sort", "symbol", "--stdio", "-q"],
            capture_output=True,
            text=True,
            check=True,
        )
    Path(f"/tmp/perf-{os.getpid()}.map").unlink(missing_ok=True)  # (read by perf report: now done)
    lines = [line for line in report.stdout.splitlines() if line.strip()]
    counts = vector_counts() if vector else {}
    if vector:
        print(f"{'':8}  {'kernel':<50} zmm ops  ymm ops  scalar")
    for line in lines[:top]:  # ("  36.00%  [.] SYMBOL   -   -")
        share, _, rest = line.strip().partition(" ")
        name = kernel_name(re.split(r"\s{2,}", rest.replace("[.]", "").strip())[0])
        ops = counts.get(name)
        beside = "" if ops is None else f" {ops[0]:7d}  {ops[1]:7d}  {ops[2]:6d}"
        print(f"{share:>8}  {name:<50}{beside}" if vector else f"{share:>8}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", nargs="?", default="b8")
    parser.add_argument("--list", action="store_true", help="print the workloads and stop")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to record (default 5)")
    parser.add_argument("--top", type=int, default=25, help="how many symbols to print")
    parser.add_argument("--vector", action="store_true", help="each kernel's packed and scalar arithmetic")
    parser.add_argument("--data", default=None, help="a lengths file to run on (default: the bundled data)")
    args = parser.parse_args()
    try:
        hist = case_histogram() if args.data is None else load_lengths(args.data)
    except (OSError, ValueError) as err:
        sys.exit(f"perf_kernels: {err}")
    calls = workloads(hist)
    if args.list or args.workload not in calls:
        print("workloads: " + ", ".join(calls))
        sys.exit(0 if args.list else f"no workload {args.workload!r}")
    profile(calls[args.workload], args.seconds, args.top, args.vector)


if __name__ == "__main__":
    main()
