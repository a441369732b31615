"""Sentences about a token budget: a plan's steps of an epoch and how full they are, under the
steps objective.

A plan of one sample per batch pads nothing, so padding ratios say nothing there (a shuffle's
waste is 0 and "what the buckets recover" is 0 / 0); the steps and the budget fill do.
"""

from __future__ import annotations

from analysis.narrative.plan import buckets_phrase
from analysis.optimize import BucketPlan
from analysis.padding.waste import WasteEstimate
from analysis.tables import format_percent

__all__ = ["describe_steps"]


def _steps(n: int) -> str:
    return f"{n:,} step{'s' if n != 1 else ''}"


def describe_steps(plan: BucketPlan, shuffle: WasteEstimate, shuffle_fill: float | None = None) -> str:
    """The steps of an epoch under ``plan`` and how full they are (``budget_fill``), its padding
    efficiency beside, against a full shuffle (``shuffle``, one batch size for every sample:
    :func:`analysis.padding.waste.random_padding`; ``shuffle_fill``, its budget fill, when known), and
    why the buckets save no step when they save none.

    Examples
    --------
    >>> from analysis import LengthHistogram, optimize_edges
    >>> from analysis.padding.waste import random_padding
    >>> h = LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80])
    >>> plan = optimize_edges(h, 2, max_tokens=160)
    >>> print(describe_steps(plan, random_padding(h, plan.rule)))
        With 2 optimal buckets (max_tokens 160) an epoch takes 3 steps whose tokens are 56.2% real
    (budget fill; padding efficiency 87.3%), against 4 steps for a full shuffle, whose one batch size
    (2) must fit the longest sample: the buckets take 25.0% fewer steps.
    >>> h = LengthHistogram.from_lengths([6, 7, 9])
    >>> plan = optimize_edges(h, 2, max_tokens=10)
    >>> print(describe_steps(plan, random_padding(h, plan.rule), 22 / 30))
        With 2 optimal buckets (max_tokens 10) an epoch takes 3 steps whose tokens are 73.3% real
    (budget fill; padding efficiency 100.0%), against 3 steps (73.3%) for a full shuffle, whose one
    batch size (1) must fit the longest sample: the buckets save no step, since every sample is
    longer than half the budget and no two share a batch whatever the edges.
    """
    fill = "" if shuffle_fill is None else f" ({format_percent(shuffle_fill, 'prose')})"
    if plan.n_batches < shuffle.n_batches:
        saved = (
            f"the buckets take {format_percent(1 - plan.n_batches / shuffle.n_batches, 'prose')} fewer steps"
        )
    elif max(plan.batch_sizes) == 1:
        saved = (
            "the buckets save no step, since every sample is longer than half the budget and no "
            "two share a batch whatever the edges"
        )
    else:
        saved = "the buckets save no step: no split of these lengths lets a batch hold more samples"
    return (
        f"With {buckets_phrase(plan)} ({plan.rule.text}) an epoch takes {_steps(plan.n_batches)} "
        "whose tokens are "
        f"{format_percent(plan.budget_fill or 0.0, 'prose')} real (budget fill; padding efficiency "
        f"{format_percent(plan.efficiency, 'prose')}), against {_steps(shuffle.n_batches)}{fill} for a full "
        f"shuffle, whose one batch size ({shuffle.batch_sizes[0]:,}) must fit the longest sample: {saved}."
    )
