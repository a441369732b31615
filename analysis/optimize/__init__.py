"""Where bucket edges go: the exact optimum for the real batch rule, and the field's rules.

:func:`optimize_edges` places ``K`` edges by ``method``: ``"optimal"`` is the exact global
minimiser of the expected padded tokens, each bucket's last short batch as it is (``floor(n /
B)`` full batches and one of ``n mod B``: what :func:`analysis.waste.expected_padding` and the
sampler count), by a DP over the distinct lengths (:mod:`analysis.optimize._kernel`; why it is
exact: :mod:`analysis.optimize._pruned`); the others are the rules the field ships
(:mod:`analysis.optimize.rules`).  :func:`sweep_bucket_counts` gives every K in one DP pass
and :func:`recommend_n_buckets` picks K by the gain rule.  Long-context data (tens of
thousands of distinct lengths) can search a candidate grid refined at full resolution
(``candidates``, :mod:`analysis.optimize._search`).  Given ``step_time`` (a fitted
:class:`~analysis.StepTimeModel`) every function minimises expected epoch *time* instead, by
the same exact DP: the per-sample weight becomes the seconds a sample adds to its batch of
``B`` (``per_token * T + (attention + working_set * B) * T**2``, a short batch at its own
size) and each bucket pays ``per_step`` per batch.  A ``K`` whose DP tables would pass 2 GiB
is refused before anything is allocated.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import pandas as pd

from analysis._validate import known_name
from analysis.batching import DEFAULT_MIN_GAIN, BatchRule, as_rule, check_edges
from analysis.lengths import LengthHistogram
from analysis.optimize._problem import StepTimeLike, _problem
from analysis.optimize._search import (
    AUTO_CANDIDATES_ABOVE,
    _check_k,
    _ends_to_edges,
    _optimal_ends,
    _use_grid,
)
from analysis.optimize.plan import BucketPlan, _plan
from analysis.optimize.rules import RULES, _baseline_edges

__all__ = [
    "AUTO_CANDIDATES_ABOVE",
    "METHODS",
    "BucketPlan",
    "StepTimeLike",
    "evaluate_edges",
    "optimize_edges",
    "recommend_n_buckets",
    "sweep_bucket_counts",
]

#: Every ``method`` :func:`optimize_edges` knows.
METHODS = ("optimal", *RULES)


def _check_method(method: str) -> None:
    known_name(method, METHODS, "method")


def optimize_edges(
    hist: LengthHistogram,
    n_buckets: int,
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    method: str = "optimal",
    edge_multiple: int = 1,
    candidates: int | str | None = "auto",
    step_time: StepTimeLike | None = None,
) -> BucketPlan:
    """Bucket edges for ``hist`` under a batch rule: the exact optimum or a field rule.

    Parameters
    ----------
    hist : LengthHistogram
        The data.
    n_buckets : int
        Number of buckets ``K`` (at least 1, at most the number of distinct lengths, or of
        possible edges with ``edge_multiple``).
    rule : BatchRule, optional
        The batch rule; or give it as ``batch_size=`` / ``max_tokens=`` (exactly one) and
        ``pad_to_multiple_of=``.
    method : {"optimal", "geometric", "equal_count", "equal_tokens", "greedy"}
        ``"optimal"``: the exact minimiser of expected padded tokens; the others: see
        :mod:`analysis.optimize.rules`.
    edge_multiple : int, default 1
        Edges are multiples of this (each observed length rounded up is a candidate edge);
        the last edge is the longest length rounded up.
    candidates : None, "auto" or int, default "auto"
        ``"optimal"`` only.  ``None``: exact DP over every candidate edge.  An int ``q``: DP
        on a grid of about ``q`` candidates, refined at full resolution around the chosen
        edges, then a lower bound on the exact optimum (a DP over the cells between
        candidates, split where its own optimum needs them) proves the plan optimal or
        replaces it by the better plan it finds, or else bounds the distance:
        ``plan.gap`` (0 and ``plan.exact`` when proven); ``"auto"``: exact up to
        :data:`AUTO_CANDIDATES_ABOVE` candidate edges, a 1024-grid above.
    step_time : StepTimeModel, optional
        Minimise the expected epoch time under this fitted model instead of padding
        (``"optimal"`` and ``"greedy"``; see the module docstring).  The plan keeps it.

    Returns
    -------
    BucketPlan

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> optimize_edges(hist, 2, batch_size=4).edges
    [0, 3, 10]
    >>> optimize_edges(hist, 2, batch_size=4, method="equal_count").edges
    [0, 3, 10]
    >>> optimize_edges(hist, 6, batch_size=4)
    Traceback (most recent call last):
    ...
    ValueError: n_buckets = 6 exceeds the 5 distinct lengths
    """
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    prob = _problem(hist, rule, edge_multiple, step_time)
    _check_method(method)
    k = _check_k(prob, n_buckets)
    if method == "optimal":
        ends, gaps = _optimal_ends(prob, [k], _use_grid(prob, candidates))
        return _plan(hist, prob, _ends_to_edges(prob, ends[k]), method, k, gaps[k])
    return _plan(hist, prob, _baseline_edges(prob, method, k), method, k)


def evaluate_edges(
    hist: LengthHistogram,
    edges: Sequence[int],
    rule: BatchRule | None = None,
    *,
    method: str = "given",
    step_time: StepTimeLike | None = None,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
) -> BucketPlan:
    """A :class:`BucketPlan` for edges you already have (a published config, say); with
    ``step_time`` its ``objective`` is the time objective of :func:`optimize_edges`.

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> plan = evaluate_edges(hist, [0, 5, 10], batch_size=4)
    >>> plan.method, plan.n_buckets, plan.useful_tokens
    ('given', 2, 125)
    """
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    prob = _problem(hist, rule, step_time=step_time)
    edges = check_edges(edges, hist)
    return _plan(hist, prob, edges, method, len(edges) - 1)


def sweep_bucket_counts(
    hist: LengthHistogram,
    n_buckets: Iterable[int] = range(1, 17),
    methods: Sequence[str] = METHODS,
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    edge_multiple: int = 1,
    candidates: int | str | None = "auto",
    step_time: StepTimeLike | None = None,
) -> pd.DataFrame:
    """Efficiency against the number of buckets for each method (a tidy frame).

    The ``"optimal"`` rows for every ``K`` come from one DP pass.  Columns: ``n_buckets``
    (requested), ``method``, ``efficiency``, ``padded_tokens``, ``edges``, ``buckets`` (after
    repeated edges collapse), ``objective`` (expected seconds with ``step_time``, which then
    places the optimal edges for time as :func:`optimize_edges` does).

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> sweep_bucket_counts(hist, [1, 2], ["optimal", "geometric"], batch_size=4)[
    ...     ["n_buckets", "method", "efficiency", "edges"]]
       n_buckets     method  efficiency       edges
    0          1    optimal    0.568539     [0, 10]
    1          1  geometric    0.568539     [0, 10]
    2          2    optimal    0.882657  [0, 3, 10]
    3          2  geometric    0.882657  [0, 3, 10]
    """
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    prob = _problem(hist, rule, edge_multiple, step_time)
    ks = [_check_k(prob, k) for k in n_buckets]
    if not ks:
        raise ValueError("n_buckets is empty")
    methods = list(methods)
    for method in methods:
        _check_method(method)
    optimal: dict[int, list[int]] = {}
    gaps: dict[int, float] = {}
    if "optimal" in methods:
        optimal, gaps = _optimal_ends(prob, sorted(set(ks)), _use_grid(prob, candidates))
    rows = []
    for k in ks:
        for method in methods:
            if method == "optimal":
                plan = _plan(hist, prob, _ends_to_edges(prob, optimal[k]), method, k, gaps[k])
            else:
                plan = _plan(hist, prob, _baseline_edges(prob, method, k), method, k)
            rows.append(
                {
                    "n_buckets": k,
                    "method": method,
                    "efficiency": plan.efficiency,
                    "padded_tokens": plan.padded_tokens,
                    "edges": plan.edges,
                    "buckets": plan.n_buckets,
                    "objective": plan.objective,
                    "gap": plan.gap if method == "optimal" else math.nan,
                }
            )
    return pd.DataFrame(rows)


def recommend_n_buckets(
    sweep: pd.DataFrame, min_gain: float = DEFAULT_MIN_GAIN, method: str = "optimal"
) -> int:
    """Smallest ``K`` after which one more bucket gains less than ``min_gain`` efficiency.

    ``sweep`` is a :func:`sweep_bucket_counts` frame; the largest ``K`` in it is returned
    when every step gains at least ``min_gain``.

    Examples
    --------
    >>> sweep = pd.DataFrame({"n_buckets": [1, 2, 3, 4], "method": ["optimal"] * 4,
    ...                       "efficiency": [0.50, 0.70, 0.705, 0.74]})
    >>> recommend_n_buckets(sweep, min_gain=0.01)
    2
    """
    if isinstance(min_gain, bool) or not (
        isinstance(min_gain, int | float) and math.isfinite(min_gain) and min_gain >= 0
    ):
        raise ValueError(f"min_gain must be a finite number >= 0, got {min_gain!r}")
    rows = sweep[sweep["method"] == method].sort_values("n_buckets")
    if rows.empty:
        raise ValueError(f"the sweep has no rows for method {method!r}")
    ks = rows["n_buckets"].tolist()
    eff = rows["efficiency"].tolist()
    for i in range(len(ks) - 1):
        if eff[i + 1] - eff[i] < min_gain:
            return int(ks[i])
    return int(ks[-1])
