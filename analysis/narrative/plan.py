"""Sentences about one plan: how its buckets are named (``6 optimal buckets``, written once,
here), its warnings under a token budget, and the explorer's status line."""

from __future__ import annotations

from analysis.batching import BatchRule
from analysis.optimize import BucketPlan, Floor, PlanWarning
from analysis.tables import format_bound, format_count, format_percent

__all__ = [
    "buckets_phrase",
    "describe_warning",
    "plan_warnings",
    "describe_plan_status",
    "describe_computing",
    "describe_floor_ignored",
]


def buckets_phrase(plan: BucketPlan) -> str:
    """``"6 optimal buckets"``: the plan's K and how its edges were placed (every sentence that
    names a plan's buckets says it this way).

    Examples
    --------
    >>> from analysis import LengthHistogram, optimize_edges
    >>> h = LengthHistogram.from_lengths([1, 2, 3, 9])
    >>> buckets_phrase(optimize_edges(h, 2, batch_size=2)), buckets_phrase(optimize_edges(h, 1, batch_size=2))
    ('2 optimal buckets', '1 optimal bucket')
    """
    return f"{plan.n_buckets} {plan.method} bucket{'s' if plan.n_buckets != 1 else ''}"


def _tokens(value: float) -> str:
    """A token count that may be a half (``max_tokens / 2``): ``4,096`` or ``4,095.5``."""
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def _bucket_names(buckets: tuple[tuple[int, int], ...]) -> str:
    """``(lo, hi]`` of the buckets (the first four, then how many more)."""
    names = [f"({lo:,}, {hi:,}]" for lo, hi in buckets[:4]]
    more = f" and {len(buckets) - 4} more" if len(buckets) > 4 else ""
    return ", ".join(names) + more


def describe_warning(warning: PlanWarning) -> str:
    """One line for a plan's warning (:class:`analysis.optimize.PlanWarning`).

    Examples
    --------
    >>> from analysis import LengthHistogram, optimize_edges
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> for w in optimize_edges(hist, 2, max_tokens=16).warnings:
    ...     print(describe_warning(w))
    batch size 1 in 1 of 2 buckets (3, 10] (upper edge above max_tokens / 2 = 8): its 10
    samples take a step each, filling 59.4% of the 16-token budget
    10 samples are longer than half of max_tokens 16 (8 tokens; the longest has 10), in bucket
    (3, 10]: no two fit one batch, so whatever the edges they train one per step
    """
    w, budget, m = warning, warning.budget, warning.multiple
    where = _bucket_names(w.buckets)
    longer, upper = (
        ("longer than", "upper edge")
        if m == 1
        else (f"padded to a multiple of {m:,} longer than", f"upper edge padded to a multiple of {m:,}")
    )
    if w.kind == "batch_size_one":
        its = "its" if len(w.buckets) == 1 else "their"
        return (
            f"batch size 1 in {len(w.buckets)} of {w.n_buckets} bucket{'s' if w.n_buckets != 1 else ''} "
            f"{where} ({upper} above max_tokens / 2 = {_tokens(budget / 2)}): "
            f"{its} {w.samples:,} sample{'s' if w.samples != 1 else ''} take{'s' if w.samples == 1 else ''} "
            f"a step each, filling {format_percent(w.fill, 'prose')} of the {budget:,}-token budget"
        )
    half = w.kind == "longer_than_half_budget"
    plural = "s are" if w.samples != 1 else " is"
    consequence = (
        "no two fit one batch, so whatever the edges they train one per step"
        if half
        else "each is a batch over the budget (clip them with max_len or raise max_tokens)"
    )
    top = f"has {w.longest:,}" if m == 1 else f"pads to {w.longest:,}"
    return (
        f"{w.samples:,} sample{plural} {longer} {'half of max_tokens' if half else 'max_tokens'} "
        f"{budget:,} ({_tokens(w.limit)} tokens; the longest {top}), in "
        f"bucket{'s' if len(w.buckets) != 1 else ''} {where}: {consequence}"
    )


def plan_warnings(plan: BucketPlan) -> list[str]:
    """The plan's warnings, one line each (empty without a token budget or a degenerate trait)."""
    return [describe_warning(w) for w in plan.warnings]


def describe_computing(rule: BatchRule, floor: Floor | None = None) -> str:
    """What the explorer computes in the background: ``computing the optimal edges for
    batch_size 8 in the background`` (with a floor: ``... with mixing of at least 30.0% ...``).

    Examples
    --------
    >>> describe_computing(BatchRule(batch_size=8), Floor("mixing", 0.3))
    'computing the optimal edges for batch_size 8 with mixing of at least 30.0% in the background'
    """
    meeting = "" if floor is None else f" with {floor.text}"
    return f"computing the optimal edges for {rule.text}{meeting} in the background"


def describe_floor_ignored(floor: Floor, source: str) -> str:
    """The explorer's line under edges a floor did not place (a field rule's, edited ones).

    Examples
    --------
    >>> describe_floor_ignored(Floor("mixing", 0.3), "greedy")
    'the floor (mixing of at least 30.0%) places the optimal edges only: these are greedy edges'
    """
    return f"the floor ({floor.text}) places the optimal edges only: these are {source} edges"


def describe_plan_status(
    plan: BucketPlan, source: str, provisional: str | None = None, floor: Floor | None = None
) -> str:
    """The explorer's status line: where the edges came from (``source``), the plan's
    efficiency, padded and useful tokens, its budget fill under a token budget, and the proven
    bound when the plan is not proven optimal; for a ``provisional`` plan (shown while the
    optimal edges are computed, meeting ``floor`` when given), which edges are shown meanwhile.

    Examples
    --------
    >>> from analysis import LengthHistogram, optimize_edges
    >>> plan = optimize_edges(LengthHistogram.from_lengths([1, 2, 3, 10]), 1, batch_size=2)
    >>> describe_plan_status(plan, "optimal")
    'optimal, 1 bucket: efficiency 63.16%, padded tokens 25 for 16 useful (waste 9)'
    """
    plural = "" if plan.n_buckets == 1 else "s"
    bound = (
        "" if plan.exact else f"; at most {format_bound(100 * plan.gap)}% above the optimum (proven bound)"
    )
    fill = (
        ""
        if plan.budget_fill is None
        else f", budget fill {format_percent(plan.budget_fill)} in {format_count(plan.n_batches)} steps"
    )
    numbers = (
        f"{plan.n_buckets} bucket{plural}: efficiency {format_percent(plan.efficiency)}, padded tokens "
        f"{format_count(plan.padded_tokens)} for {format_count(plan.useful_tokens)} useful "
        f"(waste {format_count(plan.waste_tokens)}){fill}{bound}"
    )
    if provisional is None:
        return f"{source}, {numbers}"
    return (
        f"{describe_computing(plan.rule, floor)}; shown meanwhile, "
        f"under that rule: {source} edges ({provisional}), {numbers}"
    )
