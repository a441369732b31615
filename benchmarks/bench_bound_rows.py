"""A token budget's table of bounds: its rows closer near the top (``_budget.row_starts``) and
the steps objective's rungs by the data's density (``_budget.rung_factor``), against the table
before them (every ``stride``-th start a row; rungs a factor 2 apart under the steps
objective), in one process.

Run it from the repository root (about a minute; ``--quick``: the steps objective alone;
``--rungs``: "before" is the rows as now with rungs a factor 2 apart, the rungs' share alone)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_bound_rows.py [--quick] [--rungs] [--rounds N]

For the bundled data and every ``../shared/data/*.npy`` (unclipped), ``optimize_edges(K=6)``
at ``max_tokens`` 4,096, 16,384 and 65,536: CPU ms, medians of ``--rounds`` runs taking turns
(batch size 8, the table before, the table now), the two tables' times over batch size 8's
(the issue's goal: at most 2) and whether both give the same plan; then (without ``--quick``)
the same calls under the padding objective and with a step time
(``StepTimeModel(per_step=0.05, per_token=2e-5, attention=1e-9)``), before and now.  The
numbers in ``analysis/optimize/_budget.py`` came from this comparison.  Timings on these
shared machines drift by 10 % from run to run: read the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from _common import SHARED_DATA

from analysis import BatchRule, LengthHistogram, StepTimeModel, load_lengths, optimize_edges
from analysis.optimize import _budget as budget
from analysis.optimize._costs import Arrays
from analysis.paths import BUNDLED_DATA

BUDGETS = (4_096, 16_384, 65_536)
MODEL = StepTimeModel(per_step=0.05, per_token=2e-5, attention=1e-9)
_RUNG_FACTOR = budget.rung_factor


def _stride_rows(m: int, stride: int) -> np.ndarray:
    """The table's rows before: every ``stride``-th start."""
    return np.arange(0, m, stride, dtype=np.int64)


def _rungs_before(data: Arrays, objective: str) -> float:
    """The rungs before: a factor 2 apart under the steps objective, whatever the density."""
    return budget._RUNG_STEPS if objective == "steps" else _RUNG_FACTOR(data, objective)


#: What "before" restores: the rows and the rungs, or (``--rungs``) the rungs alone.
_RESTORE = {"rows": True}


@contextmanager
def _before() -> Iterator[None]:
    """The table as it was, for the calls inside."""
    rows, rungs = budget.row_starts, budget.rung_factor
    if _RESTORE["rows"]:
        budget.row_starts = _stride_rows  # type: ignore[assignment]
    budget.rung_factor = _rungs_before  # type: ignore[assignment]
    try:
        yield
    finally:
        budget.row_starts, budget.rung_factor = rows, rungs  # type: ignore[assignment]


def _timed(fn: Callable[[], Any], before: bool) -> float:
    """CPU seconds of one call of ``fn``, with the table before if ``before``."""
    if before:
        with _before():
            start = time.process_time()
            fn()
            return time.process_time() - start
    start = time.process_time()
    fn()
    return time.process_time() - start


def _compare(call: Callable[[], Any], base: Callable[[], Any] | None, rounds: int) -> dict[str, float]:
    """Median CPU ms of ``call`` with the table before and now (and of ``base``, batch size 8),
    taking turns, the order reversed every other round, after a warm-up of each."""
    runs: dict[str, tuple[Callable[[], Any], bool]] = {"before": (call, True), "now": (call, False)}
    if base is not None:
        runs["b8"] = (base, False)
    for fn, before in runs.values():
        _timed(fn, before)
    laps: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(rounds):
        for name in list(runs) if r % 2 else list(runs)[::-1]:
            laps[name].append(_timed(*runs[name]))
    return {name: statistics.median(t) * 1e3 for name, t in laps.items()}


def _same_plan(call: Callable[[], Any]) -> bool:
    """Whether the table before and now give the same edges."""
    with _before():
        edges = call().edges
    return bool(call().edges == edges)


def _files() -> list[tuple[str, LengthHistogram]]:
    """The bundled data and every shared file there is."""
    out = [(BUNDLED_DATA.name, load_lengths(BUNDLED_DATA))]
    if SHARED_DATA.is_dir():
        out += [(p.stem, load_lengths(p)) for p in sorted(SHARED_DATA.glob("*.npy"))]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the steps objective alone")
    parser.add_argument("--rungs", action="store_true", help="before: the rows as now, rungs 2 apart")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    _RESTORE["rows"] = not args.rungs
    files = _files()
    print("steps objective (the token budget's default), K = 6, CPU ms, medians; x: over batch size 8's")
    head = f"{'file':24s} {'max_tokens':>10s} {'b8':>8s} {'before':>8s} {'now':>8s}"
    print(f"{head}   before/b8  now/b8  same plan")
    for name, hist in files:
        base = lambda hist=hist: optimize_edges(hist, 6, BatchRule(batch_size=8))  # noqa: E731
        for max_tokens in BUDGETS:
            call = lambda hist=hist, t=max_tokens: optimize_edges(hist, 6, BatchRule(max_tokens=t))  # noqa: E731
            ms = _compare(call, base, args.rounds)
            print(
                f"{name[:24]:24s} {max_tokens:10,d} {ms['b8']:8.2f} {ms['before']:8.2f} {ms['now']:8.2f}"
                f"   {ms['before'] / ms['b8']:8.2f}x {ms['now'] / ms['b8']:6.2f}x  {_same_plan(call)}",
                flush=True,
            )
    if args.quick:
        return
    print("\nthe other objectives, K = 6, CPU ms, medians")
    print(f"{'file':24s} {'max_tokens':>10s} {'objective':>10s} {'before':>9s} {'now':>9s}  now/before")
    for name, hist in files:
        for max_tokens in BUDGETS[1:]:
            for label, extra in (("padding", {"objective": "padding"}), ("time", {"step_time": MODEL})):
                rule = BatchRule(max_tokens=max_tokens)
                call = lambda hist=hist, r=rule, e=extra: optimize_edges(hist, 6, r, **e)  # noqa: E731
                ms = _compare(call, None, max(3, args.rounds // 2))
                print(
                    f"{name[:24]:24s} {max_tokens:10,d} {label:>10s} {ms['before']:9.2f} {ms['now']:9.2f}"
                    f"  {ms['now'] / ms['before']:9.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
