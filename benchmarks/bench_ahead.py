"""The install's compile-ahead at LLVM's -O1 against numba's default -O3: what the compile costs
and how fast the kernels it leaves in the cache run.

Run it from the repository root, with nothing else on the machine (about five minutes)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_ahead.py

For each level (``NUMBA_OPT``), from an empty numba cache of its own: the CPU seconds of
``python -m analysis.optimize._ahead 1,0,2`` and ``... 3`` side by side, as ``make setup`` runs
them (the user seconds of each); then, in a new process on one core with numba's
default level (the cache's kernels are loaded, not compiled again), the median CPU seconds of
five calls of each of :data:`CALLS` on the bundled data.  The levels take turns ``--rounds``
times (default 2) and every median is printed, so a load that comes and goes shows.

The floats are the same at both levels: ``benchmarks/plans_snapshot.py --bits`` with each cache
(``NUMBA_CACHE_DIR``) writes identical files.

``--schedule`` measures instead the order of the calls in the two processes, each from an
empty cache at -O1: the dev install's (``make setup``: parts 1, 0 and 2 beside part 3), the
order before (parts 0, 1 and 2 beside part 3's calls in the order of their first use, the token
budget's table of bounds last), and the report's install (parts 0 and 1 beside part 2); the
schedules take turns ``--rounds`` times, each line the CPU seconds of both processes and the
wall seconds until both have ended (about a minute a line)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_ahead.py --schedule --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from _common import case_histogram

from analysis import BatchRule, frontier, optimize_edges, sweep_bucket_counts
from analysis.paths import PROJECT_ROOT

LEVELS = ("3", "1")


def _calls() -> dict[str, Callable[[], Any]]:
    """The timed calls: the exact DP under seven rules, the sweep, two frontiers, a floor, the
    greedy rule and the candidate grid."""
    import numpy as np

    h = case_histogram()
    b8 = BatchRule(batch_size=8)
    rules = {
        "batch size 8": b8,
        "batch size 64": BatchRule(batch_size=64),
        "batch size 1,000": BatchRule(batch_size=1_000),
        "batch size 10,000": BatchRule(batch_size=10_000),
        "max_tokens 16,384": BatchRule(max_tokens=16_384),
        "max_tokens 16,384, multiple 64": BatchRule(max_tokens=16_384, pad_to_multiple_of=64),
        "max_tokens 2**24": BatchRule(max_tokens=2**24),
    }
    calls: dict[str, Callable[[], Any]] = {
        f"K = 6, {name}": (lambda r=rule: optimize_edges(h, 6, r, candidates=None))
        for name, rule in rules.items()
    }
    calls["sweep K = 1..16, batch size 8"] = lambda: sweep_bucket_counts(
        h, range(1, 17), ["optimal"], b8, candidates=None
    )
    for rule in (b8, BatchRule(max_tokens=65_536)):
        calls[f"frontier, {rule.text}"] = lambda r=rule: frontier(
            h, r, rng=np.random.default_rng(0), simulate_strategies=False
        )
    calls["floor K = 6, efficiency 0.9"] = lambda: optimize_edges(h, 6, b8, min_efficiency=0.9)
    calls["greedy K = 6"] = lambda: optimize_edges(h, 6, b8, method="greedy")
    calls["grid of 64, K = 6"] = lambda: optimize_edges(h, 6, b8, candidates=64)
    return calls


def _child() -> None:
    """In the timing process: one core, every call once, then five times each; prints a
    median per line (``name<TAB>seconds``)."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    calls = _calls()
    for call in calls.values():
        call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(5):
        for name, call in calls.items():
            start = time.process_time()
            call()
            times[name].append(time.process_time() - start)
    for name, values in times.items():
        print(f"{name}\t{statistics.median(values)}")


def _side_by_side(commands: list[list[str]], env: dict[str, str], what: str) -> list[Any]:
    """Run ``commands`` side by side (from the repository root, under ``env``) until all have
    ended; each process's own resource usage (``os.wait4``), in order.  A failure ends the
    benchmark with ``what`` and the processes' output."""
    with tempfile.TemporaryFile("w+") as log:
        procs = [subprocess.Popen(c, cwd=PROJECT_ROOT, env=env, stdout=log, stderr=log) for c in commands]
        usages = []
        for proc in procs:
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                log.seek(0)
                raise SystemExit(f"{what} failed:\n{log.read()}")
            usages.append(usage)
    return usages


def _compile(level: str, cache: str) -> tuple[float, float]:
    """The user CPU seconds of ``_ahead 1,0,2`` and ``_ahead 3``, side by side, at ``level``
    (each process's own)."""
    env = {**os.environ, "NUMBA_OPT": level, "NUMBA_CACHE_DIR": cache}
    command = [sys.executable, "-m", "analysis.optimize._ahead"]
    first, second = _side_by_side([[*command, "1,0,2"], [*command, "3"]], env, f"_ahead at NUMBA_OPT={level}")
    return first.ru_utime, second.ru_utime


# Each schedule: what each of the two processes calls, in order: a part of
# :func:`analysis.optimize._ahead._parts` (its calls in order), or ``(part, order)`` (those of its
# calls, in that order).  "Before": the order before the reorder (the calls in the order of their
# first use, the token budget's table last).
Step = int | tuple[int, tuple[int, ...]]
SCHEDULES: dict[str, tuple[list[Step], list[Step]]] = {
    "make setup's (1,0,2 beside 3)": ([1, 0, 2], [3]),
    "before (0,1,2 beside 3 as 2,3,1,0)": ([0, 1, 2], [(3, (2, 3, 1, 0))]),
    "make report's (0,1 beside 2)": ([0, 1], [2]),
}


def _calls_of(spec: str) -> None:
    """In a child: the calls of one process of a schedule (:data:`SCHEDULES`, as ``repr``)."""
    import ast

    from analysis.optimize import _ahead

    every = _ahead._parts(_ahead.histogram())
    for item in ast.literal_eval(spec):
        part, order = item if isinstance(item, tuple) else (item, range(len(every[item])))
        for index in order:
            every[part][index]()


def _schedule(parts: tuple[list[Step], list[Step]]) -> tuple[float, float, float]:
    """The CPU seconds of the two processes of ``parts`` side by side, from an empty cache at
    -O1, and the wall seconds until both have ended."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_OPT": "1", "NUMBA_CACHE_DIR": cache}
        start = time.perf_counter()
        commands = [[sys.executable, __file__, "--parts", repr(p)] for p in parts]
        first, second = _side_by_side(commands, env, f"the schedule {parts}")
        wall = time.perf_counter() - start
    return first.ru_utime + first.ru_stime, second.ru_utime + second.ru_stime, wall


def _schedules(rounds: int) -> None:
    """:func:`_schedule` of every one of :data:`SCHEDULES`, taking turns ``rounds`` times."""
    for _ in range(rounds):
        for name, parts in SCHEDULES.items():
            first, second, wall = _schedule(parts)
            cpu = f"CPU {first:5.1f} s + {second:5.1f} s = {first + second:5.1f} s"
            print(f"{name:<37} {cpu}, wall {wall:5.1f} s")


def _run_times(cache: str) -> dict[str, float]:
    """:func:`_child`'s medians, in a new process loading ``cache`` at numba's default level."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_OPT"}
    env["NUMBA_CACHE_DIR"] = cache
    out = subprocess.run(
        [sys.executable, __file__, "--child"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return {name: float(value) for name, value in (line.split("\t") for line in out.stdout.splitlines())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--schedule", action="store_true", help="time the orders of the calls instead")
    parser.add_argument("--parts", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child()
        return
    if args.parts is not None:
        _calls_of(args.parts)
        return
    if args.schedule:
        _schedules(args.rounds)
        return
    runs: dict[str, list[dict[str, float]]] = {level: [] for level in LEVELS}
    for _ in range(args.rounds):
        for level in LEVELS:
            with tempfile.TemporaryDirectory() as cache:
                first, second = _compile(level, cache)
                both = f"_ahead 1,0,2 {first:.1f} s and _ahead 3 {second:.1f} s of CPU"
                print(f"-O{level}: {both}, side by side")
                runs[level].append(_run_times(cache))
    print("\nmedian CPU seconds of each call (one core), each round's, by level:")
    for name in runs[LEVELS[0]][0]:
        cells = "   ".join(
            f"-O{level} " + " ".join(f"{r[name]:.4f}" for r in runs[level]) for level in LEVELS
        )
        print(f"   {name:<38} {cells}")


if __name__ == "__main__":
    main()
