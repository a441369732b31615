"""Sentences about the recommendation: the plan's answer in one line (the summary page's
headline), what it recovers of a shuffle's padding, and the K question (the K used against the K
the gain rule suggests, said once, here)."""

from __future__ import annotations

import math

import pandas as pd

from analysis.answers.recommendation import Recommendation
from analysis.batching import DEFAULT_BATCH_SIZE, DEFAULT_N_BUCKETS
from analysis.case import CASE_BATCH_SIZE, CASE_EDGES, CASE_MAX_LENGTH, CASE_MIN_LENGTH, CASE_N_SAMPLES
from analysis.narrative.budget import describe_steps
from analysis.narrative.plan import buckets_phrase
from analysis.optimize import sweep_measure
from analysis.tables import format_bound, format_count, format_percent, format_value

__all__ = [
    "describe_recommendation",
    "describe_answer",
    "describe_case",
    "describe_auto_k",
    "describe_report_auto_k",
]


def describe_recommendation(rec: Recommendation) -> str:
    """The plan's efficiency, what it recovers of a shuffle's waste, and the K question: the
    K used, and the K the gain rule suggests when it differs (said once, here).  Under a
    token budget's steps objective the sentence is about steps and how full they are
    (:func:`analysis.narrative.budget.describe_steps`), never a padding ratio of 0 / 0.

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> from analysis.answers.recommendation import recommend
    >>> rec = recommend(LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80]), 2, batch_size=2)
    >>> print(describe_recommendation(rec))  # waste per useful token 0.136 vs 0.587
        With 2 optimal buckets (batch_size 2) the expected efficiency is 88.0%, against 63.0% for a
    full shuffle: the buckets recover 76.9% of the padding a shuffle wastes. The gain rule (stop
    once one more bucket gains less than 1.0 point) suggests 5 buckets (98.8%); this plan uses 2.

    Where a shuffle wastes nothing (every batch one sample), there is nothing to recover:

    >>> rec = recommend(LengthHistogram.from_lengths([3, 5, 9]), 2, batch_size=1)
    >>> print(describe_recommendation(rec))
        With 2 optimal buckets (batch_size 1) the expected efficiency is 100.0%, against 100.0% for
    a full shuffle: a shuffle wastes no padding here, so there is none to recover. The gain rule
    (stop once one more bucket gains less than 1.0 point) suggests 1 bucket (100.0%): no K up to
    3 beats one bucket by 1.0 point; this plan uses 2.
    """
    plan = rec.plan
    if plan.objective_kind == "steps":
        one = rec.sweep[(rec.sweep["method"] == "optimal") & (rec.sweep["n_buckets"] == 1)]["budget_fill"]
        text = describe_steps(plan, rec.strategies["random"], float(one.iloc[0]) if len(one) else None)
    else:
        shuffle = rec.strategies["random"].efficiency
        waste_shuffle = 1 / shuffle - 1 if shuffle > 0 else math.inf
        waste_plan = 1 / plan.efficiency - 1
        recovered = (
            f"the buckets recover {format_percent(1 - waste_plan / waste_shuffle, 'prose')} of the "
            "padding a shuffle wastes"
            if waste_shuffle > 0
            else "a shuffle wastes no padding here, so there is none to recover"
        )
        text = (
            f"With {buckets_phrase(plan)} ({plan.rule.text}) the expected efficiency is "
            f"{format_percent(plan.efficiency, 'prose')}, against "
            f"{format_percent(shuffle, 'prose')} for a full shuffle: {recovered}."
        )
    k = rec.n_buckets_suggested
    measure = sweep_measure(rec.sweep)
    optimal = rec.sweep[rec.sweep["method"] == "optimal"].set_index("n_buckets")[measure]
    what = " of budget fill" if measure == "budget_fill" else ""
    buckets = f"{k} bucket{'s' if k != 1 else ''}"
    points = f"{100 * rec.min_gain:.1f} point{'s' if rec.min_gain != 0.01 else ''}{what}"
    up_to = int(optimal.index.max())  # the gain rule takes K = 1 only when one bucket is best: say so
    why = f": no K up to {up_to} beats one bucket by {points}" if k == 1 < len(optimal) else ""
    rule_text = f"The gain rule (stop once one more bucket gains less than {points})"
    if k == plan.n_buckets:
        return f"{text} {rule_text} suggests the same {buckets}{why}."
    suggested = format_percent(float(optimal.loc[k]), "prose")
    return f"{text} {rule_text} suggests {buckets} ({suggested}){why}; this plan uses {plan.n_buckets}."


def _multiple(ratio: float) -> str:
    return f"{format_value(ratio)}×"


def describe_answer(
    rec: Recommendation, speed_ratio: float, speed_unit: str, baselines: pd.DataFrame | None = None
) -> str:
    """The answer in one line (Markdown: the numbers to act on in bold): the plan, its edges and
    rule, and what it gains against what a team would otherwise run.  With a batch size that is a
    full shuffle and sorted batches, with the expected speed-up (``speed_ratio``, measured in
    ``speed_unit``); under a token budget it is dynamic batching (``token_budget``) and packing
    (``baselines``: :func:`analysis.answers.baselines.budget_baselines`, their batches, each a
    step of one rank as the plan's, and mixing), never a shuffle whose one batch size must fit
    the longest sample.

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> from analysis.answers.recommendation import recommend
    >>> rec = recommend(LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80]), 2, batch_size=2)
    >>> print(describe_answer(rec, 1.398, "padded-token ratio"))
    Use **2 optimal buckets** with edges **[0, 4, 80]** (batch_size 2): expected efficiency
    **88.04%** against 63.00% for a full shuffle and 92.47% for sorted batches; **122** fewer padded
    tokens per epoch than a shuffle (**1.398×** fewer); expected speed-up **1.398×** (padded-token
    ratio).
    >>> rec = recommend(LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80]), 2, max_tokens=160)
    >>> base = pd.DataFrame({"batches": [4, 2], "mixing": [0.31, 0.92]}, index=["token_budget", "packing"])
    >>> print(describe_answer(rec, 1.33, "step ratio", base))
    Use **2 optimal buckets** with edges **[0, 4, 80]** (max_tokens 160): **3** steps per epoch,
    budget fill **56.25%** (useful tokens / steps × budget), keeping **7.08%** of the mixing;
    dynamic batching (token_budget) takes 4 steps keeping 31.00% of the mixing, packing takes 2
    steps keeping 92.00%; padding efficiency 87.28%.
    """
    plan, random = rec.plan, rec.strategies["random"]
    use = f"Use **{buckets_phrase(plan)}** with edges **{format_value(plan.edges)}** ({rec.rule.text})"
    if plan.objective_kind == "steps":
        text = (
            f"{use}: **{format_count(plan.n_batches)}** steps per epoch, budget fill "
            f"**{format_percent(plan.budget_fill or 0.0)}** (useful tokens / steps × budget), keeping "
            f"**{format_percent(plan.mixing)}** of the mixing"
        )
        if baselines is not None and len(baselines):
            others = [
                f"{'dynamic batching (token_budget)' if name == 'token_budget' else name} takes "
                f"{format_count(row['batches'])} steps keeping {format_percent(row['mixing'])}"
                + (" of the mixing" if i == 0 else "")
                for i, (name, row) in enumerate(baselines.iterrows())
            ]
            text += "; " + ", ".join(others)
        return f"{text}; padding efficiency {format_percent(plan.efficiency)}."
    fewer = random.padded_tokens - plan.padded_tokens
    return (
        f"{use}: expected efficiency **{format_percent(plan.efficiency)}** against "
        f"{format_percent(random.efficiency)} for a full shuffle and "
        f"{format_percent(rec.strategies['sorted'].efficiency)} for sorted batches; "
        f"**{format_count(fewer)}** fewer padded tokens per epoch than a shuffle "
        f"(**{_multiple(random.padded_tokens / plan.padded_tokens)}** fewer); "
        f"expected speed-up **{_multiple(speed_ratio)}** ({speed_unit})."
    )


def describe_ranks(world_size: int, batches: int | None = None) -> str:
    """What ``world_size`` data-parallel ranks change in the summary's counts: an optimizer step
    takes one batch per rank; ``batches`` (a token budget's plan, whose steps the page counts in
    batches, one rank's step each): at least ``batches / world_size`` optimizer steps.

    Examples
    --------
    >>> print(describe_ranks(4, 300))
    4 data-parallel ranks (--world-size 4): an optimizer step takes 4 batches, one per rank. The
    steps counted on this page are batches, each one rank's step: the plan's 300 are at least 75
    optimizer steps per epoch (notebook 02 simulates the ranks, and its table counts optimizer
    steps).
    >>> describe_ranks(2)
    '2 data-parallel ranks (--world-size 2): an optimizer step takes 2 batches, one per rank.'
    """
    text = (
        f"{world_size:,} data-parallel ranks (--world-size {world_size}): an optimizer step takes "
        f"{world_size:,} batches, one per rank."
    )
    if batches is not None:
        text += (
            f" The steps counted on this page are batches, each one rank's step: the plan's "
            f"{format_count(batches)} are at least {format_count(-(-batches // world_size))} optimizer "
            "steps per epoch (notebook 02 simulates the ranks, and its table counts optimizer steps)."
        )
    return text


def describe_case() -> str:
    """What "the case" is, in one line (the summary page, the CLI's help): the training run this
    workbench comes from, whose batch size and K are the defaults.

    Examples
    --------
    >>> print(describe_case())
        The case is the LLM training run this workbench comes from (902,087 samples of 65..8,192
    tokens): it trained with batch size 8 and published 6-bucket edges; the defaults here
    (batch_size 8, K = 6) are its settings, not a choice made for your data.
    """
    k = len(CASE_EDGES) - 1
    defaults = (
        "are its settings, not a choice made for your data"
        if (DEFAULT_BATCH_SIZE, DEFAULT_N_BUCKETS) == (CASE_BATCH_SIZE, k)
        else "differ from its settings"
    )
    return (
        f"The case is the LLM training run this workbench comes from ({format_count(CASE_N_SAMPLES)} "
        f"samples of {format_count(CASE_MIN_LENGTH)}..{format_count(CASE_MAX_LENGTH)} tokens): it "
        f"trained with batch size {CASE_BATCH_SIZE} and published {k}-bucket edges; the defaults here "
        f"(batch_size {DEFAULT_BATCH_SIZE}, K = {DEFAULT_N_BUCKETS}) {defaults}."
    )


def describe_auto_k(rec: Recommendation, max_buckets: int) -> str:
    """Which K ``--buckets auto`` took, and why (the gain of one more bucket, or the largest K
    swept: ``--max-buckets`` or the data's distinct lengths).

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> from analysis.answers.recommendation import recommend
    >>> rec = recommend(LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80]), 1, batch_size=2)
    >>> print(describe_auto_k(rec, 16))
        --buckets auto took K = 5: one more bucket gains 0.72 points of efficiency, less than
    --min-gain 0.01 (the gain rule over K = 1..8)
    """
    k = rec.n_buckets_suggested
    measure = sweep_measure(rec.sweep)
    optimal = rec.sweep[rec.sweep["method"] == "optimal"].set_index("n_buckets")[measure]
    rule = f"--min-gain {rec.min_gain:g}"
    if k + 1 in optimal.index:
        gain = 100 * float(optimal.loc[k + 1] - optimal.loc[k])
        return (
            f"--buckets auto took K = {k}: one more bucket gains {format_bound(gain, upper=False)} points "
            f"of {measure.replace('_', ' ')}, less than {rule} (the gain rule over "
            f"K = 1..{int(optimal.index.max())})"
        )
    limit = f"--max-buckets {max_buckets}" if max_buckets <= k else "the data's distinct lengths"
    return f"--buckets auto took K = {k}: the largest K swept ({limit}), each bucket gaining at least {rule}"


def describe_report_auto_k(n_buckets: int, min_gain: float, max_buckets: int) -> str:
    """Which K ``report --buckets auto`` took (the settings of ``recommendation.json``).

    Examples
    --------
    >>> print(describe_report_auto_k(6, 0.01, 16))
    --buckets auto took K = 6: the gain rule's K (--min-gain 0.01 over K = 1..16)
    """
    rule = f"--min-gain {min_gain:g} over K = 1..{max_buckets}"
    return f"--buckets auto took K = {n_buckets}: the gain rule's K ({rule})"
