"""Benchmark: where one ``optimize_edges(K=6)`` call spends its time, stage by stage, rule by rule
(the anatomy behind issue 34's "every rule within 2x of batch size 8").

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_stages.py gsm8k
    PYTHONPATH=. .venv/bin/python benchmarks/bench_stages.py gsm8k tldr_pages --rules b8,t16384,t65536
    PYTHONPATH=. .venv/bin/python benchmarks/bench_stages.py bundled --calls 7

Each file is ``bundled`` (the bundled data), a name of ``../shared/data/NAME.npy`` or a path
(unclipped).  ``--rules``: ``bN`` (batch size N), ``tN`` (``max_tokens`` N), ``tNpM`` (with
``pad_to_multiple_of`` M); the first is the one the others are compared with (default: batch
size 8 and the budgets of the shared files' cells nearest 2x).  For each rule, the median CPU
milliseconds (one core) over ``--calls`` warm calls, the calls of the rules taken in turn so
that a load that comes and goes slows each alike, of the whole call and of its stages: the
token budget's bound table (``_kernel.budget_bounds``), the backward pass over the bounds
(``_pruned.backward``), the upper bounds (``_pruned._uppers``), the exact forward pass
(``_pruned._forwards``), the plan's estimate and objective (``optimize.make_plan``), and the
rest (the problem, the tables, the calls between).  A stage's time includes its wrapper's
(about a microsecond): compare rules, not absolute sub-millisecond values.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import SHARED_DATA

import analysis.optimize as optimize
import analysis.optimize._kernel as kernel
import analysis.optimize._pruned as pruned
from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.loaders import load_lengths
from analysis.paths import BUNDLED_DATA

_STAGES = (
    ("table", kernel, "budget_bounds"),
    ("backward", pruned, "backward"),
    ("uppers", pruned, "_uppers"),
    ("forward", pruned, "_forwards"),
    ("plan", optimize, "make_plan"),
)
_DEFAULT_RULES = "b8,b64,b100,t16384,t16384p64,t65536,t65536p64"
_RULE = re.compile(r"(?:b(\d+)|t(\d+)(?:p(\d+))?)")


def parse_rule(text: str) -> BatchRule:
    """``bN``, ``tN`` or ``tNpM`` as a :class:`BatchRule` (a ValueError naming ``text`` if not)."""
    match = _RULE.fullmatch(text)
    if match is None:
        raise ValueError(f"rule {text!r}: expected bN (batch size), tN (max_tokens) or tNpM (pad to M)")
    size, tokens, pad = match.groups()
    if size is not None:
        return BatchRule(batch_size=int(size))
    return BatchRule(max_tokens=int(tokens), pad_to_multiple_of=int(pad or 1))


def load(name: str) -> LengthHistogram:
    """``bundled``, a shared file's name or a path (a ValueError naming it if none is there)."""
    path = BUNDLED_DATA if name == "bundled" else Path(name)
    if name != "bundled" and not path.exists():
        path = SHARED_DATA / f"{name}.npy"
    if not path.exists():
        raise ValueError(f"{name}: not bundled, not a file, not in {SHARED_DATA}")
    return load_lengths(path)


def stage_times(hist: LengthHistogram, rules: list[BatchRule], calls: int) -> dict[str, dict[str, float]]:
    """Per rule (by its text) the median CPU seconds of the call (``total``) and of each stage
    (absent where the call never enters it), the rules' calls taken in turn."""
    spent: dict[str, dict[str, list[float]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    current = [""]
    originals = [(module, attr, getattr(module, attr)) for _, module, attr in _STAGES]

    def timed(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[current[0]][stage].append(time.process_time() - start)

        return call

    for rule in rules:  # compiled or loaded from the cache, before any stage is timed
        optimize.optimize_edges(hist, 6, rule, candidates=None)
    try:
        for stage, module, attr in _STAGES:
            setattr(module, attr, timed(stage, getattr(module, attr)))
        for _ in range(calls):
            for rule in rules:
                current[0] = rule.text
                start = time.process_time()
                optimize.optimize_edges(hist, 6, rule, candidates=None)
                spent[rule.text]["total"].append(time.process_time() - start)
    finally:
        for module, attr, fn in originals:
            setattr(module, attr, fn)
    return {rule: {stage: statistics.median(v) for stage, v in by.items()} for rule, by in spent.items()}


def _row(text: str, got: dict[str, float], base: float) -> str:
    """One rule's line: total, its ratio to the first rule's, each stage and the rest (ms)."""
    parts = [f"{text:<40} {got['total'] * 1e3:8.2f} {got['total'] / base:6.2f}x"]
    for stage, _, _ in _STAGES:
        parts.append(f"{got[stage] * 1e3:8.2f}" if stage in got else f"{'-':>8}")
    rest = got["total"] - sum(got.get(stage, 0.0) for stage, _, _ in _STAGES)
    parts.append(f"{rest * 1e3:8.2f}")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="bundled, a name in ../shared/data, or a path")
    parser.add_argument("--rules", default=_DEFAULT_RULES, help=f"comma-separated (default {_DEFAULT_RULES})")
    parser.add_argument("--calls", type=int, default=101, help="timed calls per rule (default 101)")
    args = parser.parse_args(argv)
    try:
        rules = [parse_rule(text) for text in args.rules.split(",")]
        hists = {name: load(name) for name in args.files}
    except ValueError as err:
        parser.exit(2, f"bench_stages: {err}\n")
    if args.calls < 1:
        parser.exit(2, f"bench_stages: --calls must be at least 1, got {args.calls}\n")
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core (numba's threads on it too)
    head = " ".join(f"{stage:>8}" for stage, _, _ in _STAGES)
    for name, hist in hists.items():
        times = stage_times(hist, rules, args.calls)
        size = f"{hist.n_samples:,} samples, {hist.lengths.size:,} lengths"
        print(f"\n{name} ({size}), K = 6, CPU ms, one core")
        print(f"{'rule':<40} {'total':>8} {'ratio':>7} {head} {'rest':>8}")
        base = times[rules[0].text]["total"]
        for rule in rules:
            print(_row(rule.text, times[rule.text], base))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
