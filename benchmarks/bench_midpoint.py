"""Why the midpoint series sums its powers over the upper half: NumPy's float power by sign of
the base, and ``_midpoint_log_sum`` against the same series with the whole batch's powers.

Run it from the repository root (a few seconds)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_midpoint.py

Prints the nanoseconds per element of ``x ** 6.0`` over 100,000 positive floats and over the
same floats negated (the two differ in a few per cent of their last bits, and in speed: the
negative bases take a scalar path on these machines); then, for buckets of 110 and 1,000
samples per batch (the shared files' batch sizes under ``max_tokens=16384`` and at
``batch_size=1000``; 300 rows each), the median microseconds of one
:func:`analysis.padding.order_stats._midpoint_log_sum` call and of the same call with each power
sum taken over the whole batch (the form before: ``sum(offsets**k)`` over every offset, each
``k`` in turn); then, over 3,000 seeded buckets (batch sizes 65 to 3,000, 40 rows each), how
many rows of the two differ, by how many ulps at most, and which of the two is nearer the exact
``log C(c, size) - log C(n, size)`` there (mpmath, 40 digits; skipped without it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from analysis.padding import order_stats


def _whole_batch_sums(size: int, x0: float, ks: list[int]) -> list[float]:
    """The power sums as they were taken before: each ``k`` over every offset, both signs."""
    offsets = (np.arange(size) - (size - 1) / 2.0) / x0
    return [float(np.sum(offsets**k)) for k in ks]


def _micros(fn: Callable[[], Any], runs: int = 2001) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(1e-6, 1e-2, 100_000)
    for name, x in (("positive", base), ("negative", -base)):
        print(f"x ** 6.0, {name} bases: {_micros(lambda x=x: x**6.0, 51) * 1e3 / x.size:6.1f} ns per element")
    print(f"   last bits that differ between the two: {np.mean(base**6.0 != (-base) ** 6.0):.1%}")
    for size, n in ((110, 8_000.0), (1_000, 40_000.0)):
        d = n - np.sort(rng.integers(6 * size, int(n), 300)).astype(float)
        fast = _micros(lambda d=d, n=n, size=size: order_stats._midpoint_log_sum(d, n, size))
        slow = _micros(lambda d=d, n=n, size=size: _before(d, n, size))
        print(
            f"_midpoint_log_sum, batch size {size:,}: {fast:6.1f} us (upper half), "
            f"{slow:6.1f} us (whole batch), {slow / fast:.1f}x"
        )
    rows_of_the_two()


def _before(d: np.ndarray, n: float, size: int) -> np.ndarray:
    """``_midpoint_log_sum`` with the whole batch's power sums."""
    now = order_stats._power_sums
    order_stats._power_sums = _whole_batch_sums
    try:
        return order_stats._midpoint_log_sum(d, n, size)
    finally:
        order_stats._power_sums = now


def rows_of_the_two(buckets: int = 3_000) -> None:
    """The rows where the two forms differ, their largest difference in ulps and which one
    is nearer the exact value (:func:`_exact_log_prob`)."""
    rng = np.random.default_rng(11)
    rows = 0
    differ: list[tuple[int, int, int, float, float]] = []
    for _ in range(buckets):
        size = int(rng.choice([65, 100, 128, 200, 500, 1_000, 3_000]))
        n = int(rng.integers(7 * size, 300 * size))
        c = np.unique(rng.integers(6 * size, n - 65, 40))
        d = (n - c).astype(float)
        now, before = order_stats._midpoint_log_sum(d, float(n), size), _before(d, float(n), size)
        rows += d.size
        differ += [
            (int(c[i]), n, size, float(now[i]), float(before[i])) for i in np.nonzero(now != before)[0]
        ]
    ulps = max(
        (abs(int(np.float64(a).view(np.int64)) - int(np.float64(b).view(np.int64))) for *_, a, b in differ),
        default=0,
    )
    print(
        f"rows of {buckets:,} buckets: {rows:,}; differing {len(differ)} "
        f"({len(differ) / rows:.4%}), at most {ulps} ulp"
    )
    nearer = [_nearer(*row) for row in differ]
    if None not in nearer:
        print(
            f"   nearer the exact value: upper half {nearer.count('now')}, "
            f"whole batch {nearer.count('before')}"
        )


def _nearer(c: int, n: int, size: int, now: float, before: float) -> str | None:
    """Which of the two is nearer ``log C(c, size) - log C(n, size)`` (None without mpmath)."""
    try:
        import mpmath
    except ImportError:
        return None
    mpmath.mp.dps = 40
    exact = (
        mpmath.loggamma(c + 1)
        - mpmath.loggamma(c - size + 1)
        - mpmath.loggamma(n + 1)
        + mpmath.loggamma(n - size + 1)
    )
    return "now" if abs(mpmath.mpf(now) - exact) < abs(mpmath.mpf(before) - exact) else "before"


if __name__ == "__main__":
    main()
