"""Benchmark: how long the edges explorer takes to redraw after each interaction (issue 14).

Run from the repository root::

    .venv/bin/python benchmarks/bench_explorer.py [--before REV] [--repeats N]

Drives the panel of :func:`analysis.explore` headless on the bundled data
(``data/case_lengths.csv``, 902,087 samples of 65..8,192 tokens, batch size 8, K = 6): sets
a widget's value as the browser would and times until the callback returns ("redraw"), by
which time the status, the table and the figure's PNG are updated (checked: the PNG
changes).  Interactions marked ``*`` need an optimiser pass (``sweep_bucket_counts`` over
K = 1..16, a single DP pass); the panel runs it in a background thread and the callback
returns after drawing a provisional view, so for those the time until the optimal plan is on
show (:meth:`analysis.Explorer.wait` returned, from the same start) is printed too.  Each
interaction is timed ``--repeats`` times (default 7), waiting for any pass to end before the
next; "first" interactions are timed on a fresh panel each time (the panel's construction
is not timed).  The same interactions run on the explorer of ``--before`` (default
``08835f2``, the last commit before issue 14's rewrite; its ``analysis/explorer.py`` is read
with ``git show`` and imported as a module beside the current package), so the ratio
(before / redraw: how much sooner the panel answers) is measured in the same run; the old
explorer ran every pass in the callback, so its time compares with both columns.

The row "K slider 6 -> 7 during the max_tokens pass" moves K while the ``max_tokens`` pass
runs: the redraw then shares the CPU with the worker thread (the old explorer, which never had
a pass running, is not timed there).  The rows after it start under a token budget (eight times
the longest length) or with a floor set (issue 34: the explorer under a budget and with a floor;
the old explorer had no floor); a floor places one K per pass, so a K not seen before needs one.

Target (issue 14): every interaction redraws in <= 150 ms; it is a target for the redraw,
the time the panel is unresponsive.  The optimiser pass alone is timed last.  The load
average is printed before and after (the timings are wall times on shared cores).  Takes
about four minutes on two shared cores, most of it the old explorer's ``max_tokens``
placements (seconds each).
"""

from __future__ import annotations

import argparse
import math
import os
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
from analysis.optimize import Floor, optimize_edges, sweep_bucket_counts
from analysis.paths import PROJECT_ROOT

TARGET_MS = 150.0
BEFORE = "08835f2"
N_BUCKETS = 6
BATCH_SIZE = 8


def explorer_at(rev: str) -> types.ModuleType | None:
    """``analysis/explorer.py`` of commit ``rev`` as a module (None outside a git checkout, or
    where it imports modules this package no longer has)."""
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
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    except ImportError:  # (its imports name modules the package has since moved)
        return None
    return module


#: Seconds from an interaction: until the callback returned (the redraw), and until the optimal
#: plan was on show when the callback left an optimiser pass running (NaN when it did not).
Timing = tuple[float, float]


def timed_set(panel: Any, control: str, value: Any) -> Timing:
    """The :data:`Timing` of setting ``panel.<control>.value``."""
    png = panel.image.value
    start = time.perf_counter()
    getattr(panel, control).value = value
    redraw = time.perf_counter() - start
    if panel.image.value == png or panel.error is not None:
        raise RuntimeError(f"setting {control} = {value!r} did not redraw ({panel.error})")
    if getattr(panel.view, "provisional", None) is None:  # final at once (and the old explorer)
        return redraw, math.nan
    panel.wait()
    shown = time.perf_counter() - start
    if panel.view.provisional is not None or panel.error is not None:
        raise RuntimeError(f"setting {control} = {value!r}: no optimal plan after wait() ({panel.error})")
    return redraw, shown


def _rule(start: dict[str, Any]) -> dict[str, Any]:
    """The batch size of the bench, unless ``start`` gives a token budget."""
    return {} if "max_tokens" in start else {"batch_size": BATCH_SIZE}


def alternating(*values: Any) -> Iterator[Any]:
    """``values`` over and over (each set differs from the one before)."""
    while True:
        yield from values


def moved_edge(panel: Any, shift: int) -> str:
    """The panel's edges with the third one moved by ``shift`` tokens, as typed."""
    edges = list(panel.view.edges)
    edges[3] += shift
    return ", ".join(map(str, edges))


Run = Callable[[Callable[..., Any], int], list[Timing]]
#: (label, needs an optimiser pass, timed on the old explorer too, run(explore, repeats))
Scenario = tuple[str, bool, bool, Run]


def scenarios(hist: LengthHistogram) -> list[Scenario]:
    """The interactions timed, in the order printed."""

    def fresh(control: str, value: Any, before: str | None = None, **start: Any) -> Run:
        """Set ``control`` on a fresh panel each time (after setting ``before``, when given,
        to the other batch rule without waiting: its pass still runs)."""

        def run(explore: Callable[..., Any], repeats: int) -> list[Timing]:
            out = []
            for _ in range(repeats):
                panel = explore(hist, **{"batch_size": BATCH_SIZE, "n_buckets": N_BUCKETS, **start})
                if before is not None:
                    panel.rule.value = before
                out.append(timed_set(panel, control, value))
            return out

        return run

    def steady(control: str, values: Callable[[Any], Iterator[Any]], warm: int = 2, **start: Any) -> Run:
        def run(explore: Callable[..., Any], repeats: int) -> list[Timing]:
            panel = explore(hist, **{"n_buckets": N_BUCKETS, **_rule(start), **start})
            seq = values(panel)
            for _ in range(warm):  # visit each value once: what the panel may keep
                timed_set(panel, control, next(seq))
            return [timed_set(panel, control, next(seq)) for _ in range(repeats)]

        return run

    def edge_moves(panel: Any) -> Iterator[str]:
        return alternating(moved_edge(panel, 16), moved_edge(panel, -16))

    budget: dict[str, Any] = {"max_tokens": BatchRule.resolve().token_budget(hist.max)}
    floor: dict[str, Any] = {"floor": Floor("mixing", 0.3)}
    fill: dict[str, Any] = {"floor": Floor("budget_fill", 0.7)}

    return [
        ("move an edge (type the edges, Enter)", False, True, steady("edges", edge_moves)),
        ("K slider 6 <-> 7, optimal", False, True, steady("n_buckets", lambda _: alternating(7, 6))),
        (
            "K slider 6 <-> 7, equal_tokens",
            False,
            True,
            steady("n_buckets", lambda _: alternating(7, 6), method="equal_tokens"),
        ),
        ("method -> equal_tokens, first time", False, True, fresh("method", "equal_tokens")),
        ("method -> greedy, first time", False, True, fresh("method", "greedy")),
        (
            "method optimal <-> equal_tokens, seen",
            False,
            True,
            steady("method", lambda _: alternating("equal_tokens", "optimal")),
        ),
        (
            "method -> optimal, first time for the rule",
            True,
            True,
            fresh("method", "optimal", method="equal_tokens"),
        ),
        ("batch size 8 <-> 16, seen", False, True, steady("rule_value", lambda _: alternating("16", "8"))),
        (
            "batch size -> a new value",
            True,
            True,
            steady("rule_value", lambda _: map(str, range(9, 100)), warm=0),
        ),
        ("batch rule -> max_tokens, first time", True, True, fresh("rule", "max_tokens")),
        (
            "batch rule batch_size <-> max_tokens, seen",
            False,
            True,
            steady("rule", lambda _: alternating("max_tokens", "batch_size")),
        ),
        # the UI thread beside a running pass (the old explorer had none running: not timed)
        (
            "K slider 6 -> 7 during the max_tokens pass",
            True,
            False,
            fresh("n_buckets", N_BUCKETS + 1, before="max_tokens"),
        ),
        # under a token budget from the start, and with a floor set (issue 34; the old
        # explorer had neither a budget start nor a floor: not timed)
        (
            "max_tokens: K slider 6 <-> 7, seen",
            False,
            False,
            steady("n_buckets", lambda _: alternating(7, 6), **budget),
        ),
        ("max_tokens: move an edge", False, False, steady("edges", edge_moves, **budget)),
        ("floor: type mixing >= 30%, first time", True, False, fresh("floor_value", "30%")),
        (
            "floor 30% set: K slider 6 <-> 7, seen",
            False,
            False,
            steady("n_buckets", lambda _: alternating(7, 6), **floor),
        ),
        (
            "floor 30% set: K slider -> a new K",
            True,
            False,
            steady("n_buckets", lambda _: iter(range(7, 17)), warm=0, **floor),
        ),
        ("floor 30% set: move an edge", False, False, steady("edges", edge_moves, **floor)),
        (
            "floor 30% set: batch size -> a new value",
            True,
            False,
            steady("rule_value", lambda _: map(str, range(9, 100)), warm=0, **floor),
        ),
        (
            "max_tokens, budget fill >= 70%: K -> a new K",
            True,
            False,
            steady("n_buckets", lambda _: iter(range(7, 17)), warm=0, **budget, **fill),
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


def load() -> str:
    """The 1-, 5- and 15-minute load averages, as ``uptime`` prints them."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def ms(seconds: list[float]) -> float:
    """Median of ``seconds`` in milliseconds (NaN when every value is NaN)."""
    values = [s for s in seconds if not math.isnan(s)]
    return 1e3 * statistics.median(values) if values else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help=f"the commit to compare with (default {BEFORE})")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats per interaction (default 7)")
    args = parser.parse_args()
    hist = case_histogram()
    before = explorer_at(args.before)
    print(
        f"explorer per interaction, bundled data ({hist.n_samples:,} samples, "
        f"{hist.n_distinct:,} distinct lengths), batch size {BATCH_SIZE}, K = {N_BUCKETS}; "
        f"median of {args.repeats}; {os.cpu_count()} CPUs, load average {load()}"
    )
    if before is None:
        print(
            f"(before: {args.before} not readable with git or not importable beside this package; "
            "only the current explorer is timed)"
        )
    print(
        f"{'interaction':<46} {'before ms':>10} {'redraw ms':>10} {'ratio':>7} {'optimal shown ms':>17}"
        f"  redraw target <= {TARGET_MS:.0f} ms"
    )
    for label, optimiser, compare, run in scenarios(hist):
        timings = run(analysis.explorer.explore, args.repeats)
        redraw, shown = ms([t[0] for t in timings]), ms([t[1] for t in timings])
        old = ms([t[0] for t in run(before.explore, args.repeats)]) if before and compare else math.nan
        ratio = "    n/a" if math.isnan(old) else f"{old / redraw:6.1f}x"
        old_text = f"{old:10.0f}" if not math.isnan(old) else f"{'-':>10}"
        shown_text = f"{shown:17.0f}" if not math.isnan(shown) else f"{'-':>17}"
        met = "met" if redraw <= TARGET_MS else "not met"
        mark = "*" if optimiser else " "
        print(f"{mark}{label:<45} {old_text} {redraw:10.0f} {ratio} {shown_text}  {met}")
    sweep, single = optimiser_pass_ms(hist, args.repeats)
    print(
        f"* needs one optimiser pass (run in the background, timed until shown): "
        f"sweep_bucket_counts K = 1..16 {sweep:.0f} ms "
        f"(optimize_edges K = {N_BUCKETS} alone: {single:.0f} ms)"
    )
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
