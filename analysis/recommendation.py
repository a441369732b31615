"""The recommendation a design review reads: a plan, the strategies beside it, and K.

:func:`recommend` is the one definition every face uses (the report, the CLI, notebook 03);
:func:`compare_edge_sets` puts several edge sets (the optimum, a published config...) side by
side on the same data; :func:`case_plans` is that for the case's two published edge sets (the
"case, for reference" sections of notebooks 02 and 03).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.batching import (
    DEFAULT_MAX_BUCKETS,
    DEFAULT_METHOD,
    DEFAULT_MIN_GAIN,
    DEFAULT_N_BUCKETS,
    BatchRule,
    as_rule,
    check_edges,
    cover_edges,
)
from analysis.case import CASE_EDGES, CASE_GEOMETRIC_EDGES
from analysis.lengths import LengthHistogram
from analysis.optimize import (
    BucketPlan,
    evaluate_edges,
    optimize_edges,
    recommend_n_buckets,
    sweep_bucket_counts,
)
from analysis.throughput import predict_from_reference
from analysis.waste import WasteEstimate, random_padding, sorted_padding, strategy_table

__all__ = ["Recommendation", "recommend", "compare_edge_sets", "case_plans"]


@dataclass(frozen=True)
class Recommendation:
    """A plan for ``n_buckets`` buckets, the exact padding of the strategies beside it, and
    the efficiency for every K (a :func:`analysis.sweep_bucket_counts` frame: the optimum, to
    choose K by the gain rule, and any other method :func:`recommend` was asked to sweep)."""

    plan: BucketPlan
    strategies: Mapping[str, WasteEstimate]
    sweep: pd.DataFrame
    n_buckets_suggested: int
    min_gain: float

    @property
    def rule(self) -> BatchRule:
        """The batch rule of every number here."""
        return self.plan.rule

    def strategy_table(self) -> pd.DataFrame:
        """The exact strategy table: random, sorted, bucketed (a row each)."""
        return strategy_table(dict(self.strategies))

    def predicted_tokens_per_s(self, tokens_per_s: float, reference_strategy: str) -> dict[str, float]:
        """Useful tokens/s of each strategy, given ``reference_strategy`` measured at
        ``tokens_per_s`` (:func:`analysis.throughput.predict_from_reference`)."""
        names = list(self.strategies)
        rates = predict_from_reference(
            names,
            [est.efficiency for est in self.strategies.values()],
            reference=reference_strategy,
            reference_tokens_per_s=tokens_per_s,
        )
        return dict(zip(names, rates.tolist(), strict=True))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the plan, the strategies, the efficiency for each K, the suggested K."""
        optimal = self.sweep[self.sweep["method"] == "optimal"]
        return {
            "n_buckets": self.plan.n_buckets,
            "plan": self.plan.to_dict(),
            "strategies": {name: est.to_dict() for name, est in self.strategies.items()},
            "optimal_efficiency_by_n_buckets": {
                str(int(k)): float(e) for k, e in zip(optimal["n_buckets"], optimal["efficiency"])
            },
            "n_buckets_suggested": int(self.n_buckets_suggested),
            "min_gain": float(self.min_gain),
        }


def recommend(
    hist: LengthHistogram,
    n_buckets: int = DEFAULT_N_BUCKETS,
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    method: str = DEFAULT_METHOD,
    max_buckets: int = DEFAULT_MAX_BUCKETS,
    min_gain: float = DEFAULT_MIN_GAIN,
    methods: Iterable[str] = ("optimal",),
) -> Recommendation:
    """The plan for ``n_buckets`` buckets by ``method``, the exact padding of a full shuffle,
    sorted batches and the plan, and the K the gain rule suggests (the smallest K after
    which one more bucket gains less than ``min_gain``; :func:`analysis.optimize.recommend_n_buckets`)
    from one DP pass over ``K = 1..max_buckets``.

    ``methods`` are the methods swept for every K into ``sweep`` (it must hold
    ``"optimal"``, which the gain rule reads); ``methods=analysis.METHODS`` adds the field's
    rules beside the optimum, the frame notebook 03 draws.

    Examples
    --------
    >>> rec = recommend(LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80]),
    ...                 n_buckets=2, batch_size=2)
    >>> rec.plan.edges, rec.plan.batch_sizes, list(rec.strategies)
    ([0, 4, 80], [2, 2], ['random', 'sorted', 'bucketed'])
    >>> rec.n_buckets_suggested
    5
    >>> both = recommend(LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80]), n_buckets=2,
    ...                  batch_size=2, methods=["optimal", "geometric"])
    >>> both.sweep.loc[both.sweep["n_buckets"] == 2, ["method", "edges"]]
          method       edges
    2    optimal  [0, 4, 80]
    3  geometric  [0, 8, 80]
    """
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    methods = tuple(methods)
    if "optimal" not in methods:
        raise ValueError(f"methods must include 'optimal' (the gain rule reads it), got {methods!r}")
    plan = optimize_edges(hist, n_buckets, rule, method=method)
    ks = range(1, min(max_buckets, hist.n_distinct) + 1)
    sweep = sweep_bucket_counts(hist, ks, methods, rule)
    strategies = {
        "random": random_padding(hist, rule),
        "sorted": sorted_padding(hist, rule),
        "bucketed": plan.estimate,
    }
    return Recommendation(plan, strategies, sweep, recommend_n_buckets(sweep, min_gain), min_gain)


def compare_edge_sets(
    hist: LengthHistogram,
    edge_sets: Mapping[str, Sequence[int] | BucketPlan],
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
) -> dict[str, BucketPlan]:
    """Plans for several edge sets on the same data and rule, by name (edges or plans; a plan
    made for another rule is re-evaluated under ``rule``).  Frame it with
    ``pd.DataFrame({k: p.to_dict() for k, p in plans.items()}).T``, or plot it with
    :func:`analysis.plots.plot_edge_sets`.

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80])
    >>> plans = compare_edge_sets(h, {"two": [0, 4, 80], "one": [0, 80]}, batch_size=2)
    >>> {k: round(p.efficiency, 3) for k, p in plans.items()}
    {'two': 0.88, 'one': 0.63}
    """
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    out = {}
    for name, edges in edge_sets.items():
        if isinstance(edges, BucketPlan) and edges.rule == rule:
            out[name] = edges
        else:
            given = edges.edges if isinstance(edges, BucketPlan) else check_edges(edges)
            method = edges.method if isinstance(edges, BucketPlan) else "given"
            out[name] = evaluate_edges(hist, given, rule, method=method)
    return out


def case_plans(
    hist: LengthHistogram,
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
) -> dict[str, BucketPlan]:
    """The case's two published 6-bucket edge sets as plans on these data and rule: the
    greedy-searched final edges (:data:`analysis.case.CASE_EDGES`) and the geometric start of
    that search (:data:`analysis.case.CASE_GEOMETRIC_EDGES`), each covered to the longest
    length (:func:`analysis.batching.cover_edges`) and evaluated by :func:`compare_edge_sets`.

    They were fitted to the case's own 65..8,192-token data with batch size 8, so they mean
    something only beside case-like data (the report shows them for the bundled data alone).

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([100, 500, 1000, 2000, 4000, 8000])
    >>> {name: (p.n_buckets, round(p.efficiency, 3)) for name, p in case_plans(h, batch_size=2).items()}
    {'case: published (greedy)': (6, 0.78), 'case: geometric start': (6, 0.796)}
    """
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    return compare_edge_sets(
        hist,
        {
            "case: published (greedy)": cover_edges(CASE_EDGES, hist),
            "case: geometric start": cover_edges(CASE_GEOMETRIC_EDGES, hist),
        },
        rule,
    )
