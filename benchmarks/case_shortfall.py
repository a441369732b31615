"""Can batch shapes explain the case's bucketed run (25.1 Ktok/s measured, ~28 predicted)?

The case measured three rates on the same data and batch size 8: sorted ~32, random ~12 and
its 6-bucket shuffle 25.1 Ktok/s.  Every term of :class:`analysis.StepTimeModel` has an exact
expected epoch time for these three strategies (:func:`analysis.timing.epoch.expected_epoch_time`),
so for each pair of terms this fits the pair to the sorted and random rates exactly and prints
what it predicts for the bucketed run, then the best non-negative fit of all terms to all
three rates.  With one batch size for every batch, ``working_set * (B T)**2`` is ``8 *
attention * B T**2``: the two cannot be told apart here.  Last, the step time of 8 ranks (a
step lasts as long as its slowest rank) over simulated epochs, with time proportional to
padded tokens.

Run from the repository root: ``python benchmarks/case_shortfall.py`` (a few seconds).
"""

from __future__ import annotations

import itertools

import numpy as np
from _common import case_histogram
from scipy.optimize import nnls

from analysis import BatchRule, StepTimeModel
from analysis.answers.throughput import simulated_epoch_times
from analysis.case import (
    CASE_BATCH_SIZE,
    CASE_BUCKETED_TOKENS_PER_S,
    CASE_EDGES,
    CASE_RANDOM_TOKENS_PER_S,
    CASE_SORTED_TOKENS_PER_S,
)
from analysis.timing.epoch import expected_epoch_time

TERMS = ("per_step", "per_token", "attention", "working_set")
RUNS = (("sorted", None), ("random", None), ("bucketed", list(CASE_EDGES)))


def main() -> None:
    hist = case_histogram()
    measured = np.array([CASE_SORTED_TOKENS_PER_S, CASE_RANDOM_TOKENS_PER_S, CASE_BUCKETED_TOKENS_PER_S])
    seconds = hist.total_tokens / measured
    # features[r, t]: the expected epoch seconds of run r under a model with term t = 1 alone
    features = np.array(
        [
            [
                expected_epoch_time(
                    hist, StepTimeModel(**{t: 1.0}), s, rule=BatchRule(batch_size=CASE_BATCH_SIZE), edges=e
                )
                for t in TERMS
            ]
            for s, e in RUNS
        ]
    )
    print("fitted exactly to the sorted and random rates -> predicted bucketed rate")
    for pair in itertools.combinations(range(len(TERMS)), 2):
        a = features[:2][:, pair]
        if np.linalg.cond(a / a.max(axis=0)) > 1e4:  # B is 8 but in the last, partial batches
            print(f"  {' + '.join(TERMS[p] for p in pair):<26} (one feature when B is fixed)")
            continue
        coef = np.linalg.solve(a, seconds[:2])
        rate = hist.total_tokens / float(features[2, list(pair)] @ coef)
        sign = "non-negative" if (coef >= 0).all() else "needs a negative coefficient"
        print(f"  {' + '.join(TERMS[p] for p in pair):<26} {rate / 1e3:6.2f} Ktok/s  ({sign})")
    coef, _ = nnls(features / seconds[:, None], np.ones(len(RUNS)))
    rates = hist.total_tokens / (features @ coef)
    print(
        "best non-negative fit of every term to all three: "
        + ", ".join(
            f"{s} {r / 1e3:.1f} ({r / m - 1:+.1%})"
            for (s, _), r, m in zip(RUNS, rates, measured, strict=True)
        )
    )
    print("8 ranks, a step as long as its slowest rank (time proportional to padded tokens):")
    model = StepTimeModel(per_token=1.0)
    rng = np.random.default_rng(0)
    for s, e in RUNS:
        one, eight = (
            float(
                simulated_epoch_times(
                    hist, model, s, batch_size=CASE_BATCH_SIZE, edges=e, world_size=w, rng=rng, epochs=2
                )["tokens_per_s"].mean()
            )
            / w
            for w in (1, 8)
        )
        print(f"  {s:<9} per-rank rate x {eight / one:.3f} of one rank's")


if __name__ == "__main__":
    main()
