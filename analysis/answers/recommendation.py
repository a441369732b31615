"""The recommendation a design review reads: a plan, the strategies beside it, and K.

:func:`recommend` is the one definition every face uses (the report, the CLI, notebook 03);
:func:`recommend_for_time` is its counterpart under a fitted step-time model (notebook 04 and
the report's ``recommendation.json`` both call it, so they show the same numbers);
:func:`compare_edge_sets` puts several edge sets (the optimum, a published config...) side by
side on the same data; :func:`case_plans` is that for the case's two published edge sets (the
"case, for reference" sections of notebooks 02 and 03).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from analysis.answers.throughput import predict_strategy_throughput, sweep_throughput
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
    Floor,
    FloorChoice,
    as_floor,
    evaluate_edges,
    optimize_edges,
    recommend_n_buckets,
    sweep_bucket_counts,
)
from analysis.padding.waste import WasteEstimate, random_padding, sorted_padding, strategy_table
from analysis.timing.proportional import predict_from_reference
from analysis.timing.step_time import STEP_TIME_TERMS, StepTimeModel

__all__ = [
    "Recommendation",
    "recommend",
    "TimeRecommendation",
    "recommend_for_time",
    "compare_edge_sets",
    "case_plans",
]

#: Simulated epochs for the strategies without an exact expected time, and the largest K of
#: the time-against-padding sweep (notebook 04's defaults, and the report's).
DEFAULT_TIME_EPOCHS = 3
DEFAULT_TIME_MAX_BUCKETS = 8


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

    @property
    def floor(self) -> FloorChoice | None:
        """The frontier floor the plan was placed by (None: the padding optimum)."""
        return self.plan.floor

    def strategy_table(self) -> pd.DataFrame:
        """The exact strategy table: random, sorted, bucketed (a row each)."""
        return strategy_table(dict(self.strategies))

    def predicted_tokens_per_s(self, tokens_per_s: float, reference_strategy: str) -> dict[str, float]:
        """Useful tokens/s of each strategy, given ``reference_strategy`` measured at
        ``tokens_per_s`` (:func:`analysis.timing.proportional.predict_from_reference`)."""
        names = list(self.strategies)
        rates = predict_from_reference(
            names,
            [est.efficiency for est in self.strategies.values()],
            reference=reference_strategy,
            reference_tokens_per_s=tokens_per_s,
        )
        return dict(zip(names, rates.tolist(), strict=True))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the plan, the strategies, the efficiency (and, under a token budget, the budget
        fill) for each K, the suggested K."""
        optimal = self.sweep[self.sweep["method"] == "optimal"]
        return {
            "n_buckets": self.plan.n_buckets,
            "plan": self.plan.to_dict(),
            "strategies": {name: est.to_dict() for name, est in self.strategies.items()},
            "optimal_efficiency_by_n_buckets": {
                str(int(k)): float(e) for k, e in zip(optimal["n_buckets"], optimal["efficiency"])
            },
            "optimal_budget_fill_by_n_buckets": None
            if self.plan.budget_fill is None
            else {str(int(k)): float(f) for k, f in zip(optimal["n_buckets"], optimal["budget_fill"])},
            "n_buckets_suggested": int(self.n_buckets_suggested),
            "min_gain": float(self.min_gain),
        }


def recommend(
    hist: LengthHistogram,
    n_buckets: int | Literal["auto"] = DEFAULT_N_BUCKETS,
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    method: str = DEFAULT_METHOD,
    max_buckets: int = DEFAULT_MAX_BUCKETS,
    min_gain: float = DEFAULT_MIN_GAIN,
    methods: Iterable[str] = ("optimal",),
    min_efficiency: float | None = None,
    min_budget_fill: float | None = None,
    min_mixing: float | None = None,
    floor: Floor | None = None,
) -> Recommendation:
    """The plan for ``n_buckets`` buckets by ``method``, the exact padding of a full shuffle,
    sorted batches and the plan, and the K the gain rule suggests (the smallest K after
    which one more bucket gains less than ``min_gain``; :func:`analysis.optimize.recommend_n_buckets`)
    from one DP pass over ``K = 1..max_buckets``.  Under a token budget the plans minimise the
    steps' tokens (:func:`analysis.optimize_edges`' default there) and the gain rule reads their
    ``budget_fill``; ``plan.warnings`` names any bucket of batch size 1.

    ``methods`` are the methods swept for every K into ``sweep`` (it must hold
    ``"optimal"``, which the gain rule reads); ``methods=analysis.METHODS`` adds the field's
    rules beside the optimum, the frame notebook 03 draws. ``n_buckets="auto"`` takes the K the
    gain rule suggests (from the same sweep: one pass).  A floor (``floor=``, an
    :class:`analysis.optimize.Floor`, or one of ``min_efficiency``, ``min_budget_fill`` under a
    token budget, ``min_mixing``) places the plan's edges at the best plan meeting it instead
    (:func:`analysis.optimize_edges`): ``rec.floor`` says which floor it used, whether the plan
    is proven best, the proven bound and the hull vertices around it.

    Examples
    --------
    >>> rec = recommend(LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80]),
    ...                 n_buckets=2, batch_size=2)
    >>> rec.plan.edges, rec.plan.batch_sizes, list(rec.strategies)
    ([0, 4, 80], [2, 2], ['random', 'sorted', 'bucketed'])
    >>> rec.n_buckets_suggested
    5
    >>> recommend(LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80]), "auto",
    ...           batch_size=2).plan.n_buckets
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
    ks = range(1, min(max_buckets, hist.n_distinct) + 1)
    sweep = sweep_bucket_counts(hist, ks, methods, rule)
    suggested = recommend_n_buckets(sweep, min_gain)
    k = suggested if n_buckets == "auto" else n_buckets
    wanted = as_floor(
        floor, min_efficiency=min_efficiency, min_budget_fill=min_budget_fill, min_mixing=min_mixing
    )
    plan = optimize_edges(hist, k, rule, method=method, floor=wanted)
    strategies = {
        "random": random_padding(hist, rule),
        "sorted": sorted_padding(hist, rule),
        "bucketed": plan.estimate,
    }
    return Recommendation(plan, strategies, sweep, suggested, min_gain)


def _json_float(value: object) -> float | None:
    """A float for JSON: NaN (an undefined standard error) becomes ``None``."""
    out = float(value)  # type: ignore[arg-type]
    return out if np.isfinite(out) else None


@dataclass(frozen=True)
class TimeRecommendation:
    """What a fitted step-time model says about the data (notebook 04's results): the plan
    whose edges minimise expected time for ``n_buckets`` buckets, the predicted tokens/s of
    every strategy (an :func:`analysis.predict_strategy_throughput` frame, ``bucketed`` on the
    time plan's edges), and the optimal edges of both objectives for every K (an
    :func:`analysis.sweep_throughput` frame)."""

    model: StepTimeModel
    plan: BucketPlan
    strategies: pd.DataFrame
    sweep: pd.DataFrame
    epochs: int
    world_size: int

    @property
    def n_buckets(self) -> int:
        """Buckets of the time plan (the K of :meth:`at_k`)."""
        return self.plan.n_buckets

    def at_k(self) -> pd.DataFrame:
        """The sweep's two rows at ``n_buckets``, indexed by ``objective`` (``padding``, ``time``):
        ``edges``, ``efficiency``, ``seconds`` (of an epoch), ``tokens_per_s``."""
        return self.sweep[self.sweep["n_buckets"] == self.n_buckets].set_index("objective")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the model's coefficients, the edges of both objectives at K with their
        expected epoch time, and every strategy's predicted tokens/s (NaN as ``None``)."""
        coefficients = self.model.to_frame()["coefficient"]
        edges: dict[str, dict[str, Any]] = {
            str(objective): {
                "edges": [int(e) for e in row["edges"]],
                "efficiency": float(row["efficiency"]),
                "seconds": float(row["seconds"]),
                "tokens_per_s": float(row["tokens_per_s"]),
            }
            for objective, row in self.at_k().iterrows()
        }
        columns = ["batch_rule", "exact", "batches", "efficiency", "seconds", "tokens_per_s"]
        columns += ["tokens_per_s_se", "padded_tokens_per_s"]
        strategies = {
            str(name): {
                c: row[c] if c == "batch_rule" else bool(row[c]) if c == "exact" else _json_float(row[c])
                for c in columns
            }
            for name, row in self.strategies.iterrows()
        }
        return {
            "model": {
                "coefficients": {term: float(coefficients[term]) for term in STEP_TIME_TERMS},
                "tile": int(self.model.tile),
                "rms_relative_residual": _json_float(self.model.rms_relative_residual),
            },
            "n_buckets": self.n_buckets,
            "time_plan": self.plan.to_dict(),
            "edges_by_objective": edges,
            "time_gain": float(edges["time"]["tokens_per_s"] / edges["padding"]["tokens_per_s"] - 1),
            "strategies": strategies,
            "epochs": self.epochs,
            "world_size": self.world_size,
        }


def recommend_for_time(
    hist: LengthHistogram,
    model: StepTimeModel,
    n_buckets: int = DEFAULT_N_BUCKETS,
    rule: BatchRule | None = None,
    *,
    rng: np.random.Generator,
    epochs: int = DEFAULT_TIME_EPOCHS,
    world_size: int = 1,
    max_buckets: int = DEFAULT_TIME_MAX_BUCKETS,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
) -> TimeRecommendation:
    """Notebook 04's results in one call: the edges that minimise expected time under
    ``model`` for ``n_buckets`` buckets (``optimize_edges(..., step_time=model)``), every
    strategy's predicted tokens/s with ``bucketed`` on those edges
    (:func:`analysis.predict_strategy_throughput`, ``epochs`` simulated epochs drawn from
    ``rng`` where no exact time exists), and both objectives' optimal edges for
    ``K = 1..max(max_buckets, n_buckets)`` (:func:`analysis.sweep_throughput`).

    Examples
    --------
    >>> hist = LengthHistogram.from_counts([10, 20, 200, 400], [30, 30, 20, 20])
    >>> model = StepTimeModel(per_step=0.5, per_token=1e-3, attention=1e-5)
    >>> rec = recommend_for_time(hist, model, 2, batch_size=4, max_buckets=2, rng=np.random.default_rng(0))
    >>> rec.plan.edges, rec.at_k()["edges"].tolist()
    ([0, 200, 400], [[0, 20, 400], [0, 200, 400]])
    >>> rec.strategies.loc[["sorted", "bucketed"], "tokens_per_s"].round(1).tolist()
    [196.7, 149.5]
    >>> round(rec.to_dict()["time_gain"], 4)
    0.0539
    """
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    plan = optimize_edges(hist, n_buckets, rule, step_time=model)
    strategies = predict_strategy_throughput(
        hist, model, rule, edges=plan.edges, rng=rng, epochs=epochs, world_size=world_size
    )
    sweep = sweep_throughput(hist, model, range(1, max(max_buckets, n_buckets) + 1), rule)
    return TimeRecommendation(model, plan, strategies, sweep, epochs, world_size)


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
