"""The whole trade-off in one call (``analysis.frontier``): efficiency (or tokens/s) against
mixing, for every strategy and knob, and the Pareto set a team picks a point from.

:func:`frontier` puts on one plane:

- ``bucketed``, optimal edges for ``K = 1..max_buckets`` (the exact padding optimum, one DP
  pass: :func:`analysis.optimize.optimal_plans`, on a second thread), and frontier edges: for
  each ``lambda`` of a geometric sweep the plans minimising ``padded - lambda * mixing`` for
  every ``K`` (one DP pass per ``lambda`` over matrices of bucket costs built once:
  :func:`analysis.optimize.frontier_sweep`), each Pareto-optimal among all ``K``-bucket
  plans.  Exact (:mod:`analysis.padding.waste`, :mod:`analysis.padding.mixing`).
- ``sorted`` and ``random``: exact efficiency and mixing.
- ``length_grouped`` (the Hugging Face Trainer's) for several ``gradient_accumulation_steps``
  (its megabatch is ``min(n // (4 B G), 50) * B * G`` samples), ``token_budget`` for several
  padding noises, and ``packing``: simulated epochs, with the mixing's standard error.

``lag1_autocorr`` and ``composition_repeat`` come from the simulated epochs (NaN for the
bucketed rows, which are not simulated one by one: their batch order is a uniform interleave
and their compositions are fresh draws each epoch).  With a fitted ``step_time`` model every row
gets its predicted useful tokens/s (:mod:`analysis.answers.throughput`: exact for sorted, random and
bucketed; priced batch by batch for the simulated ones) and the Pareto set is taken on
tokens/s, else on efficiency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis._validate import check_rng, positive_int
from analysis.answers.gradient_noise import strategy_noise
from analysis.answers.throughput import batch_seconds
from analysis.batching import BatchRule, as_rule, check_edges
from analysis.lengths import LengthHistogram
from analysis.optimize import (
    BucketPlan,
    Floor,
    as_floor,
    evaluate_edges,
    floor_plans,
    frontier_minima,
    frontier_sweep,
    optimal_plans,
    reuse_matrices,
)
from analysis.padding.mixing import random_mixing, sorted_mixing
from analysis.padding.waste import batch_step_tokens, budget_fill, random_padding, sorted_padding, step_tokens
from analysis.simulation.epochs import simulate, simulation_sample
from analysis.simulation.strategies import epoch_builder
from analysis.tables import column_kind, format_value, k_range
from analysis.timing.epoch import expected_epoch_time
from analysis.timing.noise import GradientNoise, check_noise, plan_noise, time_to_quality
from analysis.timing.step_time import StepTimeModel

__all__ = [
    "FRONTIER_COLUMNS",
    "PRINTED_COLUMNS",
    "Frontier",
    "frontier",
    "frontier_columns",
    "frontier_table",
]

#: The columns of :attr:`Frontier.frame`, in order.
FRONTIER_COLUMNS = (
    "strategy",
    "knob",
    "knob_value",
    "label",
    "efficiency",
    "budget_fill",
    "mixing",
    "mixing_se",
    "lag1_autocorr",
    "composition_repeat",
    "exact",
    "tokens_per_s",
    "n_buckets",
    "edges",
    "pareto",
    "effective_batch_share",
    "effective_batch_share_se",
    "quality_time",
)
#: ``length_grouped`` gradient-accumulation steps and ``token_budget`` noises swept by default.
DEFAULT_ACCUMULATION = (1, 4, 16)
DEFAULT_NOISES = (0.05, 0.1, 0.3)
#: Samples the simulated strategies run on at most (a uniform subsample of bigger data).
DEFAULT_SIMULATED_SAMPLES = 200_000
#: The frontier's one set of settings (the summary page, notebook 02, the CLI's ``frontier`` and
#: ``recommendation.json`` read the same computation: :func:`analysis.answers.tradeoff.tradeoff`):
#: bucketed K = 1..DEFAULT_MAX_BUCKETS, DEFAULT_LAMBDAS DP passes of frontier edges,
#: DEFAULT_EPOCHS simulated epochs per simulated row.
DEFAULT_MAX_BUCKETS = 32
DEFAULT_LAMBDAS = 4
DEFAULT_EPOCHS = 2
#: How a knob reads in a row's ``label``.
_SHORT = {"gradient_accumulation_steps": "G", "padding_noise": "noise"}


@dataclass(frozen=True, eq=False)
class Frontier:
    """Every strategy and knob on the efficiency-mixing plane (:func:`frontier`).

    ``frame`` has one row per point (columns :data:`FRONTIER_COLUMNS`; ``pareto`` marks the
    points no other point beats on both ``axis`` and ``mixing``); ``axis`` is
    ``"tokens_per_s"`` when a step-time model was given, else ``"budget_fill"`` under a token
    budget (useful tokens over the steps' tokens: what a token budget's edges are placed for),
    else ``"efficiency"``;
    ``simulated_samples``: the samples the simulated rows ran on (0: none simulated);
    ``mixing_axis``: the column the Pareto set takes beside ``axis``: ``"mixing"``, or with a
    gradient-noise model ``"effective_batch_share"`` (:func:`frontier`'s ``noise``);
    ``unchecked``: the pairs (Pareto point, K) that neither the Lagrangian bounds nor a floor
    search cleared (0: no plan of any ``K <= max_buckets`` that the floor search finds beats a
    Pareto point; see :func:`frontier`); ``unproven``: the labels of the Pareto points in those
    pairs (a plan of some ``K`` may beat these; the others are proven); ``floor_checks``: the
    floor searches the check was allowed (:func:`frontier`'s; 0: the Lagrangian bounds alone).
    """

    frame: pd.DataFrame
    rule: BatchRule
    axis: str
    lambdas: tuple[float, ...]
    simulated_samples: int = 0
    mixing_axis: str = "mixing"
    unchecked: int = 0
    unproven: tuple[str, ...] = ()
    floor_checks: int = 0

    @property
    def pareto(self) -> pd.DataFrame:
        """The Pareto set, from the most ``axis`` (least mixing) to the most mixing."""
        out = self.frame[self.frame["pareto"]].sort_values(
            [self.axis, self.mixing_axis], ascending=[False, True]
        )
        return out.reset_index(drop=True)

    def to_frame(self) -> pd.DataFrame:
        """A copy of :attr:`frame`."""
        return self.frame.copy()

    def table(self, short: bool = True) -> pd.DataFrame:
        """The table a face prints: :func:`frontier_table` (short: the Pareto set, one row per
        K, rows that print alike merged; else every row)."""
        return frontier_table(self, short=short)

    def shown_columns(self) -> list[str]:
        """The columns a face prints of :meth:`table` (:func:`frontier_columns`)."""
        return frontier_columns(self)

    def best(
        self,
        floor: Floor | None = None,
        *,
        min_efficiency: float | None = None,
        min_budget_fill: float | None = None,
        min_mixing: float | None = None,
        min_effective_batch: float | None = None,
    ) -> pd.Series:
        """The point with the most mixing whose efficiency (``min_efficiency``) or budget fill
        (``min_budget_fill``, under a token budget) is at least the floor, or the one with the
        most ``axis`` whose mixing is at least ``min_mixing`` (one floor, or ``floor=``, an
        :class:`analysis.optimize.Floor`); a one-line error naming the best reachable value.
        With a noise model the second axis is ``effective_batch_share`` (each row's exact or
        simulated price): ``min_effective_batch`` floors it, and an efficiency or budget-fill
        floor returns the most of it.

        Examples
        --------
        >>> import numpy as np
        >>> from analysis import LengthHistogram
        >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 200, 500))
        >>> res = frontier(hist, max_tokens=800, rng=np.random.default_rng(1), max_buckets=3,
        ...                n_lambdas=2, simulate_strategies=False)
        >>> row = res.best(min_budget_fill=0.7)
        >>> bool(row["budget_fill"] >= 0.7), row["label"]
        (True, 'frontier edges, K=3')
        """
        f = as_floor(
            floor,
            min_efficiency=min_efficiency,
            min_budget_fill=min_budget_fill,
            min_mixing=min_mixing,
            min_effective_batch=min_effective_batch,
        )
        if f is None:
            raise ValueError("give a floor: min_efficiency, min_budget_fill or min_mixing")
        if f.measure == "effective_batch" and self.mixing_axis != "effective_batch_share":
            raise ValueError("min_effective_batch needs a frontier made with a noise model (noise=)")
        if f.measure == "budget_fill" and self.rule.max_tokens is None:
            raise ValueError("min_budget_fill needs a token budget (max_tokens): give min_efficiency")
        second = self.mixing_axis if f.measure != "mixing" else "mixing"
        column = f.measure if f.measure != "effective_batch" else "effective_batch_share"
        rows = self.frame[self.frame[self.axis].notna() & self.frame[second].notna()]
        ok = rows[rows[column] >= f.value]
        if ok.empty:
            most = "the most" if f.measure in ("mixing", "effective_batch") else "the best"
            raise ValueError(f"{f.keyword} = {f.value:g} is unreachable: {most} is {rows[column].max():.4f}")
        on_axis = f.measure in ("mixing", "effective_batch")
        order = [second, self.axis] if not on_axis else [self.axis, second]
        return ok.sort_values(order, kind="mergesort").iloc[-1]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the rule, the axis, the lambdas and every row."""
        rows = []
        for row in self.frame.to_dict(orient="records"):
            rows.append({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()})
        return {"rule": self.rule.kwargs(), "axis": self.axis, "lambdas": list(self.lambdas), "rows": rows}


def _row(strategy: str, knob: str, value: Any, label: str, **values: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(FRONTIER_COLUMNS, math.nan)
    out.update(strategy=strategy, knob=knob, knob_value=value, label=label, exact=True, edges=None)
    out.update(values)
    return out


def _plan_row(
    plan: BucketPlan, knob_value: Any, label: str, hist: LengthHistogram, model: Any
) -> dict[str, Any]:
    rate = math.nan
    if model is not None:
        rate = hist.total_tokens / expected_epoch_time(hist, model, "bucketed", plan.rule, edges=plan.edges)
    return _row(
        "bucketed",
        "n_buckets",
        knob_value,
        label,
        efficiency=plan.efficiency,
        budget_fill=math.nan if plan.budget_fill is None else plan.budget_fill,
        mixing=plan.mixing,
        mixing_se=0.0,
        tokens_per_s=rate,
        n_buckets=plan.n_buckets,
        edges=plan.edges,
    )


def _simulated_row(
    hist: LengthHistogram,
    strategy: str,
    rule: BatchRule,
    knob: str,
    value: Any,
    rng: np.random.Generator,
    epochs: int,
    model: StepTimeModel | None,
    **options: Any,
) -> dict[str, Any]:
    res = simulate(hist, strategy, rule, rng=rng, epochs=epochs, **options)
    e = res.epochs
    se = res.mixing_se
    later = e["composition_repeat"].iloc[1:]
    rate = math.nan
    if model is not None:  # every batch priced as throughput prices it (packed rows as packed)
        seconds = batch_seconds(model, res.batches, strategy, rule, hist.max)
        rate = res.useful_tokens / math.fsum(seconds.tolist())
    label = strategy if knob == "" else f"{strategy} {_SHORT.get(knob, knob)}={value}"
    fill = math.nan
    if rule.max_tokens is not None:  # a step holds the budget, or a lone sample beyond it
        steps = batch_step_tokens(res.batches["padded"].to_numpy(), rule.max_tokens)
        fill = float(budget_fill(res.useful_tokens, steps) or math.nan)
    return _row(
        strategy,
        knob,
        value,
        label,
        efficiency=res.efficiency,
        budget_fill=fill,
        mixing=float(e["mixing"].mean()),
        mixing_se=se,
        lag1_autocorr=float(e["lag1_autocorr"].mean()),
        composition_repeat=float(later.mean()) if later.size else math.nan,
        exact=False,
        tokens_per_s=rate,
    )


def _pareto(axis: np.ndarray, mixing: np.ndarray) -> np.ndarray:
    """Points no other beats (at least as good on both, better on one); ties all stay; a NaN
    point never is one, nor beats one."""
    ok = ~(np.isnan(axis) | np.isnan(mixing))
    a, g = axis[ok], mixing[ok]
    beaten = (
        (a[None, :] >= a[:, None])
        & (g[None, :] >= g[:, None])
        & ((a[None, :] > a[:, None]) | (g[None, :] > g[:, None]))
    ).any(axis=1)
    out = np.zeros(axis.size, bool)
    out[np.flatnonzero(ok)] = ~beaten
    return out


#: Floor searches (:func:`analysis.optimize.floor_plans`) the Pareto check of one
#: :func:`frontier` call runs at most where the faces ask for them (``floor_checks=``: the
#: summary page, notebook 02, the CLI and ``recommendation.json``), the pairs most likely beaten
#: first (a search at K = 32 on the bundled data's 952-point grid takes 0.07 s, the median of the
#: bundled data's 48, 0.18 s at most: ``benchmarks/bench_frontier.py``);
#: :attr:`Frontier.unchecked` counts the pairs left.
FLOOR_CHECKS = 48
#: Floor searches run on one set of matrices before the Pareto set is taken again.
_BATCH = 8
#: Lambda passes whose minima bound every K's plans (:func:`_lower_bounds`).
_BOUND_LAMBDAS = 24


def _lower_bounds(
    hist: LengthHistogram,
    rule: BatchRule,
    k_max: int,
    lambdas: Sequence[float],
    frame: pd.DataFrame,
    axis: str,
) -> tuple[np.ndarray, dict[int, np.ndarray], list[BucketPlan]]:
    """``(grid, low, plans)``: ``low[K][j]``, the least ``objective - grid[j] * mixing`` of any
    ``K``-bucket plan the optimiser can place (one pass per ``grid[j]`` gives every K at once,
    its minimum the DP's own: :func:`analysis.optimize.frontier_minima`), for ``grid``:
    ``lambdas`` (the sweep's: its plans are then bounded at their own K) and
    :data:`_BOUND_LAMBDAS` more spread geometrically from 1/10 of the least of them to 10 times
    the most; ``plans``: the passes' plans (each Pareto-optimal among its ``K``'s plans) that
    may beat a Pareto point of ``frame`` (an objective within ``F`` of :func:`_open_pairs` and
    the point's mixing, by the matrices' sums with a relative 1e-9 to spare) and are not
    bucketed rows of it already, the only ones evaluated."""
    lo, hi = min(lambdas), max(lambdas)
    grid = np.union1d(np.geomspace(lo / 10, hi * 10, _BOUND_LAMBDAS), np.asarray(lambdas, float))
    slack = rule.max_tokens / 4 if axis == "budget_fill" and rule.max_tokens is not None else 0.0
    points = frame.loc[frame["pareto"], [axis, "mixing"]].to_numpy(float)
    points = points[(points[:, 0] > 0) & ~np.isnan(points).any(axis=1)]
    caps = hist.total_tokens / points[:, 0] + slack
    ys = points[:, 1]
    held = {tuple(e) for e in frame.loc[frame["strategy"] == "bucketed", "edges"]}

    def wanted(edges: tuple[int, ...], objective: float, mixing: float) -> bool:
        if edges in held:
            return False
        return bool(((objective <= caps * (1 + 1e-9)) & (mixing >= ys - 1e-9 * np.maximum(ys, 1.0))).any())

    low, plans = frontier_minima(hist, rule, k_max, [float(x) for x in grid], wanted)
    return grid, low, plans


def _open_pairs(
    hist: LengthHistogram, rule: BatchRule, frame: pd.DataFrame, axis: str, bounds: Any
) -> list[tuple[float, int, float, float]]:
    """``(margin, K, axis value, mixing)`` for each Pareto point and each K that the bounds do
    not clear, the most likely beaten first: a ``K``-bucket plan beating a point at ``x`` and
    ``y`` has an objective of at most ``F = useful / x`` (the padded tokens, or the steps'
    tokens, which the steps objective passes by less than a quarter step) and mixing at least
    ``y``, so ``low[K][j] >= F - grid[j] * y`` for one ``j`` proves there is none (equality
    leaves only a plan at ``F`` and ``y`` exactly, which ties it)."""
    grid, low, _ = bounds
    slack = rule.max_tokens / 4 if axis == "budget_fill" and rule.max_tokens is not None else 0.0
    useful = hist.total_tokens
    ks = list(low)
    table = np.array([low[k] for k in ks]).reshape(len(ks), grid.size)  # a row per K
    out = []
    for x, y in frame.loc[frame["pareto"], [axis, "mixing"]].itertuples(index=False):
        if not (math.isfinite(x) and math.isfinite(y) and 0 < x <= 1 and 0 <= y <= 1):
            continue
        cap = useful / x
        margins = np.max(table - slack - (cap - grid * y), axis=1) / cap
        for i in np.flatnonzero(margins < -1e-10):  # not cleared (at 0 only the point itself, or a
            out.append((float(margins[i]), ks[i], float(x), float(y)))  # tie; a margin for floats)
    return sorted(out)


def _next_asks(
    pairs: list[tuple[float, int, float, float]], axis: str, asked: set[tuple[int, str, float]]
) -> list[tuple[int, str, float]]:
    """The floor searches the open ``pairs`` still need, one a point first (its pair most likely
    beaten: a plan that beats a point closes every pair of it), then the rest, in the pairs'
    order: each pair's floor at its ``axis`` value, then (once that did not beat the point) at
    its mixing: ``(K, measure, value)`` (a :class:`~analysis.optimize.Floor` is made only for
    the searches run)."""
    first: list[tuple[int, str, float]] = []
    rest: list[tuple[int, str, float]] = []
    seen: set[tuple[float, float]] = set()
    for _, k, x, y in pairs:
        if (k, axis, x) not in asked:
            ask = (k, axis, x)
        elif 0 < y and (k, "mixing", y) not in asked:
            ask = (k, "mixing", y)
        else:
            continue
        (rest if (x, y) in seen else first).append(ask)
        seen.add((x, y))
    return first + rest


def _beats(x: float, y: float, points: np.ndarray) -> bool:
    """Whether ``(x, y)`` beats one of ``points`` (rows of axis and mixing): at least as good on
    both, better on one by more than a relative 1e-9 (the floor search's float ties)."""
    a, g = points[:, 0], points[:, 1]
    ahead = (x > a * (1 + 1e-9)) | (y > g + 1e-9 * np.maximum(g, 1e-300))
    return bool(((x >= a) & (y >= g) & ahead).any())


def _with_beaters(
    hist: LengthHistogram, frame: pd.DataFrame, axis: str, plans: Sequence[BucketPlan], kind: str
) -> pd.DataFrame:
    """``frame`` with a ``{kind}, K=...`` row for each of ``plans`` (not already a row) that
    beats one of its Pareto points, and the Pareto set taken again."""
    held = {tuple(e) for e in frame.loc[frame["strategy"] == "bucketed", "edges"]}
    points = frame.loc[frame["pareto"], [axis, "mixing"]].to_numpy(float)
    rows = []
    for plan in plans:
        if tuple(plan.edges) in held:
            continue
        row = _plan_row(plan, plan.n_buckets, f"{kind}, K={plan.n_buckets}", hist, None)
        if _beats(row[axis], row["mixing"], points):
            held.add(tuple(plan.edges))
            rows.append(row)
    if not rows:
        return frame
    frame = pd.concat([frame, pd.DataFrame(rows)], ignore_index=True)
    frame["pareto"] = _pareto(frame[axis].to_numpy(float), frame["mixing"].to_numpy(float))
    return frame


def _checked_by_floors(
    hist: LengthHistogram,
    rule: BatchRule,
    frame: pd.DataFrame,
    axis: str,
    k_max: int,
    lambdas: Sequence[float],
    checks: int,
) -> tuple[pd.DataFrame, int, tuple[str, ...]]:
    """``frame`` with a ``floor edges, K=...`` row for each new plan the exact floor search
    (:func:`analysis.optimize.floor_plans`) finds at a Pareto point's ``axis`` and at its
    mixing, for every ``K <= k_max`` where the Lagrangian bounds (:func:`_lower_bounds`) leave
    room for a plan that beats it, and the Pareto set taken again (a point that a found plan
    beats loses its mark; a round checks the points the one before added); the pairs
    (Pareto point, K) left unchecked when ``checks`` searches ran out (0: the bounds alone), and
    the labels of their points."""
    if not lambdas:  # no sweep: around the slope from the most buckets' optimum to one bucket
        opt = frame[frame["label"].isin(["optimal edges, K=1", f"optimal edges, K={k_max}"])]
        f, g = hist.total_tokens / opt[axis].to_numpy(float), opt["mixing"].to_numpy(float)
        slope = max(abs(f[0] - f[-1]) / max(abs(g[0] - g[-1]), 1e-12), 1.0)
        lambdas = [slope / 1000, slope]
    bounds = _lower_bounds(hist, rule, k_max, lambdas, frame, axis)
    frame = _with_beaters(hist, frame, axis, bounds[2], "frontier edges")
    asked: set[tuple[int, str, float]] = set()
    spent = 0
    while True:
        asks = _next_asks(_open_pairs(hist, rule, frame, axis, bounds), axis, asked)
        if not asks or spent >= checks:
            break
        asks = asks[: min(_BATCH, checks - spent)]
        spent += len(asks)
        asked.update(asks)
        floors = [(k, Floor(measure, value)) for k, measure, value in asks]
        found = [plan for plan in floor_plans(hist, rule, floors) if plan is not None]
        frame = _with_beaters(hist, frame, axis, found, "floor edges")
    pairs = _open_pairs(hist, rule, frame, axis, bounds)
    left = _next_asks(pairs, axis, asked)
    return frame, len(left), _labels_of(frame, axis, pairs, asked)


def _labels_of(
    frame: pd.DataFrame,
    axis: str,
    pairs: list[tuple[float, int, float, float]],
    asked: set[tuple[int, str, float]],
) -> tuple[str, ...]:
    """The labels of the Pareto points with an open pair that :func:`_next_asks` would still
    search (at its ``axis`` value, or at its mixing), in the frame's order."""
    open_points = {
        (x, y)
        for _, k, x, y in pairs
        if (k, axis, x) not in asked or (0 < y and (k, "mixing", y) not in asked)
    }
    pareto = frame[frame["pareto"]]
    keep = [(x, y) in open_points for x, y in pareto[[axis, "mixing"]].itertuples(index=False)]
    return tuple(str(x) for x in pareto.loc[keep, "label"])


def _simulated_rows(
    hist: LengthHistogram,
    rule: BatchRule,
    rng: np.random.Generator,
    epochs: int,
    model: StepTimeModel | None,
    simulate_strategies: bool,
    simulate_samples: int | None,
    gradient_accumulation_steps: Sequence[int],
    padding_noises: Sequence[float],
) -> tuple[list[dict[str, Any]], int]:
    """The simulated rows (``length_grouped`` by accumulation steps, ``token_budget`` by
    noise, ``packing``) on a uniform subsample of ``simulate_samples``, and the samples they
    ran on (0: none)."""
    if not simulate_strategies:
        return [], 0
    sim = hist
    if simulate_samples is not None and hist.n_samples > simulate_samples:
        picked = rng.choice(
            hist.n_samples, size=positive_int(simulate_samples, "simulate_samples"), replace=False
        )
        sim = LengthHistogram.from_lengths(
            hist.lengths[np.searchsorted(hist.cumulative_counts(), picked, side="right")]
        )
    rows = []
    for g in gradient_accumulation_steps:
        rows.append(
            _simulated_row(
                sim,
                "length_grouped",
                rule,
                "gradient_accumulation_steps",
                int(g),
                rng,
                epochs,
                model,
                gradient_accumulation_steps=int(g),
            )
        )
    for noise in padding_noises:
        rows.append(
            _simulated_row(
                sim,
                "token_budget",
                rule,
                "padding_noise",
                float(noise),
                rng,
                epochs,
                model,
                padding_noise=float(noise),
            )
        )
    rows.append(_simulated_row(sim, "packing", rule, "", None, rng, epochs, model))
    return rows, sim.n_samples


@reuse_matrices()  # the sweep, the Pareto check's bounds and its floor searches: one set of matrices
def frontier(
    hist: LengthHistogram,
    rule: BatchRule | None = None,
    *,
    rng: np.random.Generator,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    max_buckets: int = DEFAULT_MAX_BUCKETS,
    n_lambdas: int = DEFAULT_LAMBDAS,
    epochs: int = DEFAULT_EPOCHS,
    gradient_accumulation_steps: Sequence[int] = DEFAULT_ACCUMULATION,
    padding_noises: Sequence[float] = DEFAULT_NOISES,
    step_time: StepTimeModel | None = None,
    edge_sets: Mapping[str, Sequence[int]] | None = None,
    simulate_strategies: bool = True,
    simulate_samples: int | None = DEFAULT_SIMULATED_SAMPLES,
    noise: GradientNoise | None = None,
    floor_checks: int = 0,
) -> Frontier:
    """Efficiency (tokens/s with ``step_time``) against mixing for every strategy and knob.

    Parameters
    ----------
    hist : LengthHistogram
    rule : BatchRule, optional
        Or ``batch_size=`` / ``max_tokens=`` and ``pad_to_multiple_of=``.
    rng : numpy.random.Generator
        For the simulated strategies.
    max_buckets : int, default 32
        Bucketed rows for ``K = 1..max_buckets`` (capped at the distinct lengths).
    n_lambdas : int, default 4
        DP passes of frontier edges (:func:`analysis.optimize.frontier_sweep`); 0: none.
    epochs : int, default 2
        Simulated epochs per simulated row (two, so ``composition_repeat`` is defined).
    gradient_accumulation_steps, padding_noises
        The ``length_grouped`` and ``token_budget`` knobs.
    step_time : StepTimeModel, optional
        Adds ``tokens_per_s`` and takes the Pareto set on it (edges still placed for padding).
    edge_sets : mapping of name to edges, optional
        Given bucketed plans to put on the plane (the case's edges, say); ``knob`` is ``"given"``.
    simulate_strategies : bool, default True
        False: only the exact rows (bucketed, sorted, random).
    simulate_samples : int or None, default 200,000
        The simulated strategies run on a uniform subsample (without replacement, drawn with
        ``rng``) of this many samples when the data hold more (``Frontier.simulated_samples``
        says how many ran); None: every sample.
    noise : GradientNoise, optional
        A fitted gradient-noise model: the frontier edges are placed on the gradient axis
        (``1 - ρ``: :func:`analysis.optimize.frontier_sweep` with ``noise``), every row gets
        ``effective_batch_share`` (``B_eff`` over the mean batch) and its standard error,
        exact for bucketed, sorted and random (:func:`analysis.timing.noise.plan_noise`),
        simulated for the others (:func:`analysis.answers.gradient_noise.strategy_noise`), and
        ``quality_time`` (time to the same loss over a shuffle's, with ``step_time``; NaN
        without), and the Pareto set is taken on (``axis``, ``effective_batch_share``):
        ``Frontier.mixing_axis``.  Without it those columns are NaN.
    floor_checks : int, default 0
        The Pareto check's floor searches at most (the faces run :data:`FLOOR_CHECKS`).  Every
        Pareto point is checked against every ``K <= max_buckets`` by the Lagrangian bounds of
        the DP's passes (cheap: they clear most pairs, and the passes' plans that beat a point
        join the plane as ``frontier edges``); the pairs they leave open get the exact floor
        search at the point's efficiency and at its mixing, up to ``floor_checks`` of them
        (each a fraction of a second; the plans they find that beat a point join as ``floor
        edges``).  ``Frontier.unchecked`` and ``Frontier.unproven`` say what is left open.  No
        check runs with ``step_time`` or ``noise``.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 200, 500))
    >>> res = frontier(hist, batch_size=4, rng=np.random.default_rng(1), max_buckets=4, n_lambdas=2,
    ...                simulate_strategies=False)
    >>> res.frame[["label", "exact"]].head(3)
                  label  exact
    0            sorted   True
    1            random   True
    2  optimal edges, K=1   True
    >>> bool(res.frame["pareto"].any()), res.axis
    (True, 'efficiency')
    """
    check_rng(rng)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    k_max = min(positive_int(max_buckets, "max_buckets"), hist.n_distinct)
    if isinstance(n_lambdas, bool) or not isinstance(n_lambdas, int) or n_lambdas < 0:
        raise ValueError(f"n_lambdas must be an integer >= 0, got {n_lambdas!r}")
    if isinstance(floor_checks, bool) or not isinstance(floor_checks, int) or floor_checks < 0:
        raise ValueError(f"floor_checks must be an integer >= 0, got {floor_checks!r}")
    model = step_time
    given = {name: check_edges(edges, hist) for name, edges in (edge_sets or {}).items()}
    rows = []
    for name, est, mix in (
        ("sorted", sorted_padding(hist, rule), sorted_mixing(hist, rule)),
        ("random", random_padding(hist, rule), random_mixing(hist, rule)),
    ):
        rate = math.nan if model is None else hist.total_tokens / expected_epoch_time(hist, model, name, rule)
        fill = budget_fill(hist.total_tokens, step_tokens(hist, rule, est.n_batches))
        rows.append(
            _row(
                name,
                "",
                None,
                name,
                efficiency=est.efficiency,
                budget_fill=math.nan if fill is None else fill,
                mixing=mix,
                mixing_se=0.0,
                tokens_per_s=rate,
            )
        )
    with ThreadPoolExecutor(max_workers=1) as pool:
        # the optimal edges' DP (compiled, without the GIL) on a second core while this one
        # runs the frontier's passes and the simulated strategies
        optimal = pool.submit(optimal_plans, hist, range(1, k_max + 1), rule)
        lambdas: list[float] = []
        swept: list[tuple[float, int, BucketPlan]] = []
        if n_lambdas and k_max > 1:
            lambdas, swept = frontier_sweep(hist, rule, k_max, n_lambdas, noise=noise)
        simulated = _simulated_rows(
            hist,
            rule,
            rng,
            epochs,
            model,
            simulate_strategies,
            simulate_samples,
            gradient_accumulation_steps,
            padding_noises,
        )
        plans = optimal.result()
    for k, plan in plans.items():
        rows.append(_plan_row(plan, k, f"optimal edges, K={k}", hist, model))
    for lam, k, plan in swept:
        if plan.edges != plans[k].edges:
            row = _plan_row(plan, k, f"frontier edges, K={k}", hist, model)
            row["lambda"] = lam
            rows.append(row)
    for name, edges in given.items():
        plan = evaluate_edges(hist, edges, rule, method="given")
        row = _plan_row(plan, plan.n_buckets, name, hist, model)
        row["knob"] = "given"
        rows.append(row)
    sim_rows, sim_samples = simulated
    rows.extend(sim_rows)
    frame = pd.DataFrame(rows)
    if "lambda" not in frame:
        frame["lambda"] = math.nan
    axis = "tokens_per_s" if model is not None else "efficiency" if rule.max_tokens is None else "budget_fill"
    mixing_axis = "mixing"
    if noise is not None:
        frame, mixing_axis = (
            noise_columns(frame, hist, rule, noise, step_time, rng, epochs),
            "effective_batch_share",
        )
    frame["pareto"] = _pareto(frame[axis].to_numpy(float), frame[mixing_axis].to_numpy(float))
    unchecked = 0
    unproven: tuple[str, ...] = ()
    if model is None and noise is None and k_max > 1:
        frame, unchecked, unproven = _checked_by_floors(hist, rule, frame, axis, k_max, lambdas, floor_checks)
    frame = frame[[*FRONTIER_COLUMNS, "lambda"]]
    return Frontier(
        frame,
        rule,
        axis,
        tuple(lambdas),
        simulated_samples=sim_samples,
        mixing_axis=mixing_axis,
        unchecked=unchecked,
        unproven=unproven,
        floor_checks=floor_checks,
    )


def noise_columns(
    frame: pd.DataFrame,
    hist: LengthHistogram,
    rule: BatchRule,
    noise: GradientNoise,
    step_time: StepTimeModel | None,
    rng: np.random.Generator,
    epochs: int,
) -> pd.DataFrame:
    """``frame`` with ``effective_batch_share``, its ``_se`` and ``quality_time`` filled in for
    every row: exact rows by :func:`analysis.timing.noise.plan_noise` and
    :func:`~analysis.timing.noise.time_to_quality`, simulated ones by
    :func:`_simulated_noise`."""
    check_noise(noise)
    out = frame.copy()
    priced = plan_noise(noise, hist, "random", rule)
    shuffle = (priced.effective_batch.value, priced.batch_size)
    rate = frame.loc[frame["strategy"] == "random", "tokens_per_s"]
    random_rate = float(rate.iloc[0]) if len(rate) else math.nan
    values = []
    for _, row in frame.iterrows():
        if row["exact"]:
            values.append(_exact_noise(hist, rule, noise, step_time, row["strategy"], row["edges"]))
        else:
            values.append(_simulated_noise(hist, rule, noise, row, rng, max(epochs, 2), shuffle, random_rate))
    out["effective_batch_share"] = [v[0] for v in values]
    out["effective_batch_share_se"] = [v[1] for v in values]
    out["quality_time"] = [v[2] for v in values]
    return out


def _exact_noise(
    hist: LengthHistogram,
    rule: BatchRule,
    noise: GradientNoise,
    step_time: StepTimeModel | None,
    strategy: str,
    edges: Any,
) -> tuple[float, float, float]:
    """``(share, se, quality_time)`` of a bucketed, sorted or random row, exact."""
    edges = list(edges) if strategy == "bucketed" else None
    priced = plan_noise(noise, hist, strategy, rule, edges=edges)
    size = priced.batch_size
    quality = math.nan
    if step_time is not None:
        quality = time_to_quality(noise, step_time, hist, strategy, rule, edges=edges)[0].value
    return priced.effective_batch.value / size, priced.effective_batch.se / size, quality


def _simulated_noise(
    hist: LengthHistogram,
    rule: BatchRule,
    noise: GradientNoise,
    row: pd.Series,
    rng: np.random.Generator,
    epochs: int,
    shuffle: tuple[float, float],
    random_rate: float,
) -> tuple[float, float, float]:
    """``(share, se, quality_time)`` of a simulated row: its per-step variance from
    :func:`~analysis.answers.gradient_noise.strategy_noise` (``W = 1``), ``B_eff = 1 /
    (variance / tr Σ + 1 / N)`` over the mean samples of a step of one more simulated epoch,
    the standard error by the delta method (simulation and model together); time to quality,
    as :func:`~analysis.timing.noise.time_to_quality` prices it: the random row's tokens/s
    over the row's (the epoch ratio), times the random row's steps an epoch over the row's,
    times ``(1 + B_noise / B_eff) / (1 + B_noise / B_shuffle)`` (``B_shuffle``: the random
    row's exact effective batch)."""
    strategy = str(row["strategy"])
    options: dict[str, Any] = {}
    if row["knob"] == "gradient_accumulation_steps":
        options["gradient_accumulation_steps"] = int(row["knob_value"])
    elif row["knob"] == "padding_noise":
        options["padding_noise"] = float(row["knob_value"])
    table = strategy_noise(noise, hist, [strategy], rule, rng=rng, windows=[1], epochs=epochs, **options)
    mine = table[table["strategy"] == strategy].iloc[0]
    variance, var_se = float(mine["variance"]), math.hypot(float(mine["se"]), float(mine["model_se"]))
    figures = noise.figures(hist)
    trace, scale, total = figures["trace"].value, figures["noise_scale"].value, hist.n_samples
    b_eff = 1.0 / (variance / trace + 1.0 / total)
    data, _ = simulation_sample(hist, rng)
    arr = data.expand() if isinstance(data, LengthHistogram) else np.asarray(data)
    steps = epoch_builder(arr, strategy, rule, **options).epoch(rng).sizes.size
    mean_batch = arr.size / steps
    share = b_eff / mean_batch
    part = (variance / trace) / (variance / trace + 1.0 / total)
    quality = math.nan
    rate = float(row["tokens_per_s"])
    if math.isfinite(rate) and math.isfinite(random_rate):
        b_ref, b_random = shuffle
        steps_ratio = (1 + scale / b_eff) / (1 + scale / b_ref) if math.isfinite(scale) else b_ref / b_eff
        quality = random_rate / rate * (mean_batch / b_random) * steps_ratio
    return share, share * part * var_se / variance if variance > 0 else 0.0, quality


#: The cells the short table compares (:func:`frontier_table`): two rows merge when these print
#: alike (``efficiency``, ``budget_fill`` and ``mixing`` to 2 decimals of a percent, tokens/s to
#: the token).
PRINTED_COLUMNS = ("efficiency", "budget_fill", "tokens_per_s", "mixing")


def _printed(row: pd.Series) -> tuple[str, ...]:
    return tuple(format_value(row[c], column_kind(c)) for c in PRINTED_COLUMNS if c in row.index)


def _one_per_k(pareto: pd.DataFrame) -> pd.DataFrame:
    """The Pareto rows with, of the optimiser's bucketed rows (``knob == "n_buckets"``), only
    the first of each K in the Pareto order: the one with the most ``axis`` (the least mixing
    given up for it comes first on a tie); other rows (given edge sets, other strategies) all."""
    placed = (pareto["strategy"] == "bucketed") & (pareto["knob"] == "n_buckets")
    first = ~pareto[placed].duplicated("n_buckets")
    keep = ~placed
    keep[first.index[first.to_numpy()]] = True
    return pareto[keep]


def _merged(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (in order) with each run of consecutive optimiser's bucketed rows whose
    :data:`PRINTED_COLUMNS` print alike merged into its first, labelled with its K range
    (``frontier edges, K=28–32``; ``bucketed, K=...`` where the runs' kinds differ)."""
    placed = ((rows["strategy"] == "bucketed") & (rows["knob"] == "n_buckets")).to_numpy()
    groups: list[list[int]] = []
    for i in range(len(rows)):
        prev = groups[-1][-1] if groups else -1
        if placed[i] and prev >= 0 and placed[prev] and _printed(rows.iloc[i]) == _printed(rows.iloc[prev]):
            groups[-1].append(i)
        else:
            groups.append([i])
    out = rows.iloc[[g[0] for g in groups]].copy()
    labels = []
    for g in groups:
        part = rows.iloc[g]
        if len(g) == 1:
            labels.append(str(part["label"].iloc[0]))
            continue
        kinds = {str(x).partition(", K=")[0] for x in part["label"]}
        kind = kinds.pop() if len(kinds) == 1 else "bucketed"
        labels.append(f"{kind}, K={k_range(part['n_buckets'].astype(int).tolist())}")
    out["label"] = labels
    return out.reset_index(drop=True)


def frontier_table(result: Frontier, *, short: bool = True) -> pd.DataFrame:
    """The frontier as a face prints it (the CLI's ``frontier``, notebook 02), a view of
    :attr:`Frontier.frame`, which keeps every row.

    ``short`` (the default): the Pareto set (:attr:`Frontier.pareto`, the most ``axis`` first)
    with one row per K of the optimiser's bucketed rows, the one with the most ``axis`` of that
    K's Pareto rows (the plan nearest that K's padding optimum that no point beats; the
    trade-off along one K is in the full table and the figure), and the runs of those rows that
    print alike (:data:`PRINTED_COLUMNS`, as :func:`analysis.tables.format_value` writes them)
    merged into one labelled with its K range.  Other strategies' rows and given edge sets are
    never merged.  ``short=False``: every row of the frame, in its order.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 200, 500))
    >>> res = frontier(hist, batch_size=4, rng=np.random.default_rng(1), max_buckets=4, n_lambdas=2,
    ...                simulate_strategies=False)
    >>> table = frontier_table(res)
    >>> bool(table["n_buckets"].dropna().is_unique), len(frontier_table(res, short=False)) == len(res.frame)
    (True, True)
    """
    if not short:
        return result.frame.reset_index(drop=True)
    return _merged(_one_per_k(result.pareto))


def frontier_columns(result: Frontier) -> list[str]:
    """The columns of :func:`frontier_table` a face prints (the CLI's ``frontier``, notebook
    02): the label, the padding efficiency and the plane's axis (the budget fill under a token
    budget, predicted tokens/s), the second axis with its SE (and the length mixing beside the
    effective batch), the time to quality when known, the simulated rows' order figures.

    Examples
    --------
    >>> frame = pd.DataFrame(columns=list(FRONTIER_COLUMNS))
    >>> frontier_columns(Frontier(frame, BatchRule(max_tokens=800), "budget_fill", ()))[:5]
    ['label', 'efficiency', 'budget_fill', 'mixing', 'mixing_se']
    >>> frontier_columns(Frontier(frame, BatchRule(batch_size=8), "efficiency", ()))[:4]
    ['label', 'efficiency', 'mixing', 'mixing_se']
    """
    first = ["efficiency", "budget_fill"] if result.rule.max_tokens is not None else ["efficiency"]
    if result.axis == "tokens_per_s":
        first.append("tokens_per_s")
    second = [result.mixing_axis, f"{result.mixing_axis}_se"]
    if result.mixing_axis != "mixing":
        second.append("mixing")
        if result.frame["quality_time"].notna().any():
            second.append("quality_time")
    return ["label", *first, *second, "lag1_autocorr", "composition_repeat", "exact"]
