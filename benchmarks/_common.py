"""What the benchmark scripts share: a median timer and the data they run on.

The scripts are run from the repository root (``python benchmarks/bench_NAME.py``), so
this module is importable as ``_common``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from analysis.case import CASE_MAX_LENGTH
from analysis.lengths import LengthHistogram
from analysis.loaders import load_lengths
from analysis.paths import BUNDLED_DATA, PROJECT_ROOT

#: Real length distributions for development (not part of the project; may be absent).
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


def median_seconds(fn: Callable[[], Any], runs: int = 5) -> float:
    """Median wall time of ``fn()`` in seconds over ``runs`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def case_histogram() -> LengthHistogram:
    """The bundled synthetic case data (902,087 samples of 65..8,192 tokens)."""
    return load_lengths(BUNDLED_DATA)


def shared_histogram(name: str, max_len: int = CASE_MAX_LENGTH) -> LengthHistogram | None:
    """``../shared/data/NAME.npy`` clipped at ``max_len``, or None when it is not there."""
    path = SHARED_DATA / f"{name}.npy"
    return load_lengths(path).clip(max_len) if path.exists() else None
