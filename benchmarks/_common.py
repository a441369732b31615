"""What the benchmark scripts share: a median timer and the data they run on.

The scripts are run from the repository root (``python benchmarks/bench_NAME.py``), so
this module is importable as ``_common``.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import io
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from analysis.case import CASE_MAX_LENGTH
from analysis.lengths import LengthHistogram
from analysis.loaders import load_lengths
from analysis.paths import BUNDLED_DATA, PROJECT_ROOT

#: Real length distributions for development (not part of the project; may be absent).
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


def median_seconds(
    fn: Callable[[], Any], runs: int = 5, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Median time of ``fn()`` in seconds over ``runs`` calls, after one warm-up call (wall
    time; ``clock=time.process_time`` for this process's CPU time)."""
    fn()
    times = []
    for _ in range(runs):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def case_histogram() -> LengthHistogram:
    """The bundled synthetic case data (902,087 samples of 65..8,192 tokens)."""
    return load_lengths(BUNDLED_DATA)


def shared_histogram(name: str, max_len: int = CASE_MAX_LENGTH) -> LengthHistogram | None:
    """``../shared/data/NAME.npy`` clipped at ``max_len``, or None when it is not there."""
    path = SHARED_DATA / f"{name}.npy"
    return load_lengths(path).clip(max_len) if path.exists() else None


def paired_seconds(
    previous: Callable[[], Any],
    current: Callable[[], Any],
    runs: int = 7,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, float, float]:
    """Median times of ``previous()`` and ``current()`` and the median of their per-run
    ratios (current / previous), the two called alternately ``runs`` times after a warm-up
    call each, so a load that comes and goes slows both alike (wall time;
    ``clock=time.process_time`` for this process's CPU time)."""
    previous()
    current()
    before, after = [], []
    for _ in range(runs):
        start = clock()
        previous()
        before.append(clock() - start)
        start = clock()
        current()
        after.append(clock() - start)
    ratio = statistics.median(b / a for a, b in zip(before, after))
    return statistics.median(before), statistics.median(after), ratio


def unpack_analysis(rev: str, folder: Path) -> bool:
    """The ``analysis`` package as of git revision ``rev`` unpacked into ``folder`` (as
    ``folder/analysis``); False when git cannot give it (no git, a shallow clone)."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "archive", "--format=tar", rev, "analysis"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return True


def _has_module(name: str) -> bool:
    """Whether ``name`` can be imported (its parent packages included)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package it lacks
        return False


def previous_analysis(rev: str) -> ModuleType | None:
    """The ``analysis`` package as of git revision ``rev`` (or from the directory ``rev``, which
    holds an ``analysis/`` folder), imported in this process beside the current one (its
    modules registered as ``analysis_previous.*``), so a benchmark can time both in one run;
    None when ``rev`` cannot be read (no git, a shallow clone).

    Call it after importing the current ``analysis``: the current modules are set aside while
    the old ones load, then put back.  Old code that imports ``analysis`` lazily, inside a
    function, would get the current package; the simulation path does not.
    """
    if (Path(rev) / "analysis" / "__init__.py").is_file():
        root = Path(rev).resolve()
    else:
        root = Path(tempfile.mkdtemp(prefix="analysis_previous_"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        if not unpack_analysis(rev, root):
            return None

    def ours(name: str) -> bool:
        return name == "analysis" or name.startswith("analysis.")

    current = {name: sys.modules.pop(name) for name in list(sys.modules) if ours(name)}
    sys.path.insert(0, str(root))
    try:
        old = importlib.import_module("analysis")
        for sub in ("simulation", "strategies", "sampler", "batching", "padding.waste"):
            if _has_module(f"analysis.{sub}"):  # (the ones that commit has)
                importlib.import_module(f"analysis.{sub}")
    finally:
        sys.path.remove(str(root))
        loaded = {name: sys.modules.pop(name) for name in list(sys.modules) if ours(name)}
        sys.modules.update(current)
    for name, module in loaded.items():
        sys.modules["analysis_previous" + name.removeprefix("analysis")] = module
    return old
