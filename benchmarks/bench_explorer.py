"""Benchmark: how long the edges explorer takes to redraw after each interaction (issue 14).

Run from the repository root::

    .venv/bin/python benchmarks/bench_explorer.py [--before REV] [--repeats N]

Drives the panel of :func:`analysis.explore` headless on the bundled data
(``data/case_lengths.csv``, 902,087 samples of 65..8,192 tokens, batch size 8, K = 6): sets
a widget's value as the browser would and times until the callback returns, by which time
the status, the table and the figure's PNG are updated (checked: the PNG changes).  Each
interaction is timed ``--repeats`` times (default 7); "first" interactions are timed on a
fresh panel each time (the panel's construction is not timed).  The same interactions run
on the explorer of ``--before`` (default ``08835f2``, the last commit before issue 14's
rewrite; its ``analysis/explorer.py`` is read with ``git show`` and imported as a module
beside the current package), so the ratio is measured in the same run.

Target (issue 14): every interaction redraws in <= 150 ms.  Interactions marked ``*`` pay for
one optimiser pass (``sweep_bucket_counts`` over K = 1..16, a single DP pass); its time is
printed last, and those interactions meet the target only once the optimiser is that fast.
Takes about six minutes on two shared cores, most of it the old explorer's ``max_tokens``
placements (seconds each).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

from _common import case_histogram

import analysis.explorer
from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.optimize import optimize_edges, sweep_bucket_counts
from analysis.paths import PROJECT_ROOT

TARGET_MS = 150.0
BEFORE = "08835f2"
N_BUCKETS = 6
BATCH_SIZE = 8


def explorer_at(rev: str) -> types.ModuleType | None:
    """``analysis/explorer.py`` of commit ``rev`` as a module (None outside a git checkout)."""
    try:
        source = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "show", f"{rev}:analysis/explorer.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    module = types.ModuleType("explorer_before")
    module.__file__ = f"{rev}:analysis/explorer.py"
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def timed_set(panel: Any, control: str, value: Any) -> float:
    """Seconds from setting ``panel.<control>.value`` until the panel has redrawn."""
    png = panel.image.value
    start = time.perf_counter()
    getattr(panel, control).value = value
    seconds = time.perf_counter() - start
    if panel.image.value == png or panel.error is not None:
        raise RuntimeError(f"setting {control} = {value!r} did not redraw ({panel.error})")
    return seconds


def alternating(*values: Any) -> Iterator[Any]:
    """``values`` over and over (each set differs from the one before)."""
    while True:
        yield from values


def moved_edge(panel: Any, shift: int) -> str:
    """The panel's edges with the third one moved by ``shift`` tokens, as typed."""
    edges = list(panel.view.edges)
    edges[3] += shift
    return ", ".join(map(str, edges))


Scenario = tuple[str, bool, Callable[[Callable[..., Any], int], list[float]]]


def scenarios(hist: LengthHistogram) -> list[Scenario]:
    """(label, pays for an optimiser pass, run(explore, repeats) -> seconds)."""

    def fresh(control: str, value: Any, **start: Any) -> Callable[[Callable[..., Any], int], list[float]]:
        def run(explore: Callable[..., Any], repeats: int) -> list[float]:
            out = []
            for _ in range(repeats):
                panel = explore(hist, batch_size=BATCH_SIZE, n_buckets=N_BUCKETS, **start)
                out.append(timed_set(panel, control, value))
            return out

        return run

    def steady(
        control: str, values: Callable[[Any], Iterator[Any]], warm: int = 2, **start: Any
    ) -> Callable[[Callable[..., Any], int], list[float]]:
        def run(explore: Callable[..., Any], repeats: int) -> list[float]:
            panel = explore(hist, batch_size=BATCH_SIZE, n_buckets=N_BUCKETS, **start)
            seq = values(panel)
            for _ in range(warm):  # visit each value once: what the panel may keep
                timed_set(panel, control, next(seq))
            return [timed_set(panel, control, next(seq)) for _ in range(repeats)]

        return run

    def edge_moves(panel: Any) -> Iterator[str]:
        return alternating(moved_edge(panel, 16), moved_edge(panel, -16))

    return [
        ("move an edge (type the edges, Enter)", False, steady("edges", edge_moves)),
        ("K slider 6 <-> 7, optimal", False, steady("n_buckets", lambda _: alternating(7, 6))),
        (
            "K slider 6 <-> 7, equal_tokens",
            False,
            steady("n_buckets", lambda _: alternating(7, 6), method="equal_tokens"),
        ),
        ("method -> equal_tokens, first time", False, fresh("method", "equal_tokens")),
        ("method -> greedy, first time", False, fresh("method", "greedy")),
        (
            "method optimal <-> equal_tokens, seen",
            False,
            steady("method", lambda _: alternating("equal_tokens", "optimal")),
        ),
        (
            "method -> optimal, first time for the rule",
            True,
            fresh("method", "optimal", method="equal_tokens"),
        ),
        ("batch size 8 <-> 16, seen", False, steady("rule_value", lambda _: alternating(16, 8))),
        ("batch size -> a new value", True, steady("rule_value", lambda _: iter(range(9, 100)), warm=0)),
        ("batch rule -> max_tokens, first time", True, fresh("rule", "max_tokens")),
        (
            "batch rule batch_size <-> max_tokens, seen",
            False,
            steady("rule", lambda _: alternating("max_tokens", "batch_size")),
        ),
    ]


def optimiser_pass_ms(hist: LengthHistogram, repeats: int) -> tuple[float, float]:
    """Median ms of the optimiser alone: the sweep over K = 1..16, and optimize_edges for K = 6."""
    rule = BatchRule(batch_size=BATCH_SIZE)

    def median_ms(fn: Callable[[], Any]) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return 1e3 * statistics.median(times)

    sweep = median_ms(lambda: sweep_bucket_counts(hist, range(1, 17), ["optimal"], rule))
    return sweep, median_ms(lambda: optimize_edges(hist, N_BUCKETS, rule))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help=f"the commit to compare with (default {BEFORE})")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats per interaction (default 7)")
    args = parser.parse_args()
    hist = case_histogram()
    before = explorer_at(args.before)
    print(
        f"explorer redraw per interaction, bundled data ({hist.n_samples:,} samples, "
        f"{hist.n_distinct:,} distinct lengths), batch size {BATCH_SIZE}, K = {N_BUCKETS}; "
        f"median of {args.repeats}"
    )
    if before is None:
        print(f"(before: {args.before} not readable with git; only the current explorer is timed)")
    print(f"{'interaction':<46} {'before ms':>10} {'after ms':>9} {'ratio':>7}  target <= {TARGET_MS:.0f} ms")
    for label, optimiser, run in scenarios(hist):
        after = 1e3 * statistics.median(run(analysis.explorer.explore, args.repeats))
        old = 1e3 * statistics.median(run(before.explore, args.repeats)) if before else float("nan")
        ratio = f"{old / after:6.1f}x" if before else "    n/a"
        met = "met" if after <= TARGET_MS else "not yet"
        mark = "*" if optimiser else " "
        print(f"{mark}{label:<45} {old:10.0f} {after:9.0f} {ratio}  {met}")
    sweep, single = optimiser_pass_ms(hist, args.repeats)
    print(
        f"* pays for one optimiser pass: sweep_bucket_counts K = 1..16 {sweep:.0f} ms "
        f"(optimize_edges K = {N_BUCKETS} alone: {single:.0f} ms)"
    )


if __name__ == "__main__":
    main()
