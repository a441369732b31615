"""Benchmark: the exact expected padding on case-sized histograms.

Run from the repository root::

    .venv/bin/python benchmarks/bench_waste.py

Times ``expected_padding`` (6 buckets, ``CASE_EDGES``, batch size 8) on the bundled data
(``data/case_lengths.csv``, 902,087 samples of 65..8,192 tokens) and, if present, on
``../shared/data/alpaca_eval_outputs.npy`` clipped at 8,192.  Prints the median of 25 runs
in milliseconds.  Target: <= 10 ms on the case data.

With ``--against REV`` (a commit, or a folder holding an ``analysis/``): the optimal 6 buckets'
``expected_padding`` and ``evaluate_edges`` (the plan: its padding and objective) under a token
budget (``max_tokens=16384``: batch sizes above 64 in most files' longer buckets, where the
order statistics take the forms above the product form) and at batch size 8, on the bundled
data and every file of ``../shared/data`` (unclipped), ours and ``REV``'s called in turn (31
pairs of 20 calls, one core, CPU time): the median of each and of their ratios, and whether
the two give the same floats::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_waste.py --against HEAD~1
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable

from _common import (
    SHARED_DATA,
    case_histogram,
    median_seconds,
    paired_seconds,
    previous_analysis,
    shared_histogram,
)

from analysis import BatchRule, evaluate_edges, optimize_edges
from analysis.case import CASE_BATCH_SIZE, CASE_EDGES, CASE_MAX_LENGTH
from analysis.lengths import LengthHistogram
from analysis.loaders import load_lengths
from analysis.padding.waste import expected_padding
from analysis.paths import BUNDLED_DATA, PROJECT_ROOT

RUNS = 25


def report(name: str, hist: LengthHistogram, edges, **rule) -> None:
    est = expected_padding(hist, edges, BatchRule(**rule))
    ms = 1e3 * median_seconds(lambda: expected_padding(hist, edges, BatchRule(**rule)), runs=RUNS)
    rule_text = ", ".join(f"{k}={v}" for k, v in rule.items())
    print(
        f"{name:<34} {hist.n_samples:>9,} samples {hist.n_distinct:>6,} distinct "
        f"{len(edges) - 1:>2} buckets {rule_text:<40} efficiency {est.efficiency:.4f}  "
        f"median {ms:7.3f} ms"
    )


#: The rules of ``--against``: batch sizes above the product form's 64 under the token budget
#: (most files' longer buckets), within it at batch size 8.
_AGAINST_RULES = (BatchRule(max_tokens=16384), BatchRule(batch_size=8))


def against(rev: str, pairs: int = 31, calls: int = 20) -> None:
    """Ours and ``rev``'s ``expected_padding`` and ``evaluate_edges`` (the plan: padding and
    objective, one bucket's order statistics shared) of the optimal 6 buckets under each of
    ``_AGAINST_RULES``, on the bundled data and every shared file, called in turn (module
    docstring)."""
    old = previous_analysis(rev)
    if old is None:
        raise SystemExit(f"cannot read {rev}: no git history here")
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    waste = sys.modules["analysis_previous.padding.waste"]
    named = {"case": case_histogram(), **{p.stem: load_lengths(p) for p in sorted(SHARED_DATA.glob("*.npy"))}}
    for name, hist in named.items():
        theirs_hist = old.LengthHistogram.from_counts(hist.lengths, hist.counts)
        for rule in _AGAINST_RULES:
            plan = optimize_edges(hist, 6, rule, candidates=None)
            theirs_rule = _old_rule(old, rule)
            calls_of = {
                "expected_padding": (
                    functools.partial(waste.expected_padding, theirs_hist, plan.edges, theirs_rule),
                    functools.partial(expected_padding, hist, plan.edges, rule),
                ),
                "evaluate_edges": (
                    functools.partial(old.evaluate_edges, theirs_hist, plan.edges, theirs_rule),
                    functools.partial(evaluate_edges, hist, plan.edges, rule),
                ),
            }
            for what, (theirs, ours) in calls_of.items():
                same = _floats(ours()) == _floats(theirs())
                before, after, ratio = paired_seconds(
                    _times(theirs, calls), _times(ours, calls), pairs, time.process_time
                )
                print(
                    f"{name:<23} {rule.text:<17} {what:<17} batch sizes {str(list(plan.batch_sizes)):<28} "
                    f"{rev} {1e3 * before / calls:6.3f} ms, ours {1e3 * after / calls:6.3f} ms, "
                    f"{ratio:.2f}x; the same floats: {same}"
                )


def _old_rule(old: object, rule: BatchRule) -> object:
    """``rule`` in the earlier package's own class."""
    return old.BatchRule(  # type: ignore[attr-defined]
        batch_size=rule.batch_size, max_tokens=rule.max_tokens, pad_to_multiple_of=rule.pad_to_multiple_of
    )


def _floats(result: object) -> tuple[object, ...]:
    """An estimate's or a plan's numbers to compare bit for bit."""
    est = getattr(result, "estimate", result)
    return (est.bucket_waste_tokens, getattr(result, "objective", None))


def _times(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    """``fn`` called ``calls`` times."""

    def run() -> None:
        for _ in range(calls):
            fn()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="time a token budget's plans beside REV's")
    args = parser.parse_args()
    if args.against:
        against(args.against)
        return
    name = str(BUNDLED_DATA.relative_to(PROJECT_ROOT))
    hist = case_histogram()
    report(f"case ({name})", hist, CASE_EDGES, batch_size=CASE_BATCH_SIZE)
    report(f"case ({name}), one bucket", hist, [0, CASE_MAX_LENGTH], batch_size=CASE_BATCH_SIZE)
    report(f"case ({name}), rounded", hist, CASE_EDGES, batch_size=CASE_BATCH_SIZE, pad_to_multiple_of=64)
    report(f"case ({name})", hist, CASE_EDGES, max_tokens=65_536)
    alpaca = shared_histogram("alpaca_eval_outputs", CASE_MAX_LENGTH)
    if alpaca is not None:
        edges = [0, *alpaca.quantile([1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6]).tolist(), alpaca.max]
        report("alpaca_eval_outputs (6 quantile)", alpaca, edges, batch_size=CASE_BATCH_SIZE)
        report("alpaca_eval_outputs (CASE_EDGES)", alpaca, CASE_EDGES, batch_size=CASE_BATCH_SIZE)
    else:
        print(f"skipped alpaca_eval_outputs: {SHARED_DATA / 'alpaca_eval_outputs.npy'} not found")


if __name__ == "__main__":
    main()
