"""Sentences about the padding-mixing trade-off (notebook 02, the report's summary page and the
CLI say it the same way): what the best bucketed plan keeps at an efficiency, beside the Hugging
Face Trainer's length grouping, and what a floor chose.  They read results
(:class:`analysis.answers.tradeoff.TradeOff`, a plan's :class:`~analysis.optimize.FloorChoice`)
and compute nothing.

"Mixing" is the share of the data's length variance a batch keeps
(:mod:`analysis.padding.mixing`); the within-batch CV of the simulator is "spread".  Without a
gradient-noise model every face that shows it calls it what it is, a proxy
(:data:`MIXING_PROXY`, said here once); with one, the trade-off is read on the gradient axis,
the share of a shuffle's effective batch a plan keeps (``mixing_axis="effective_batch_share"``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from analysis.answers.frontier import FLOOR_CHECKS, Frontier
from analysis.answers.tradeoff import TradeOff
from analysis.optimize import BucketPlan
from analysis.tables import format_percent, k_range

__all__ = [
    "FRONTIER_NOTES",
    "MIXING_PROXY",
    "MIXING_PROXY_CLAUSE",
    "MIXING_WORDS",
    "frontier_sentence",
    "floor_sentence",
    "PARETO_CHECKED",
    "NOT_CHECKED",
    "named_points",
    "pareto_check_sentence",
    "unchecked_sentence",
]

#: What "mixing" means, said where no Trainer row carries the sentence.
MIXING = "mixing: the share of the data's length variance a batch keeps"
#: Why length mixing is a proxy, and what measures what it stands for: every face that shows
#: ``mixing`` without a gradient-noise model says it (the summary page, notebook 02, the CLI's
#: ``frontier`` and ``compare``, the trade-off sentence).
MIXING_PROXY = (
    "Mixing is a proxy: the share of the length variance a batch keeps stands for gradient mixing "
    "only if the gradient varies with length as the length does; a gradient-noise model of your "
    "model (--noise FILE.npz, from analysis.timing.noise.measure_gradient_noise) measures what a "
    "plan keeps of the gradient."
)
#: The same, as a clause after a figure of mixing (the CLI's ``optimize``).
MIXING_PROXY_CLAUSE = (
    "a proxy for gradient mixing: --noise FILE.npz on optimize, compare or report measures it"
)
#: The mixing axes a trade-off is read on, and how a sentence names each: what a plan "keeps
#: X of", what "all" of it is, and what the measure is.
MIXING_WORDS = {
    "mixing": ("the mixing", "all the mixing", MIXING),
    "effective_batch_share": (
        "the effective batch",
        "all of its effective batch",
        "effective batch: B_eff over the plan's mean samples per step, B_eff the size of a shuffled "
        "batch with the same gradient noise (the --noise model)",
    ),
}


#: What a frontier says when its Pareto check cleared every pair (notebook 02; the CLI says
#: nothing then).
PARETO_CHECKED = (
    "Every Pareto point was checked at every bucket count up to the most: the DP’s bounds prove that no "
    "plan of that many buckets beats it, or the floor searches at its efficiency and at its mixing find "
    "none that does."
)


#: What a frontier says where no Pareto check ran (a step-time or gradient-noise model).
NOT_CHECKED = (
    "The Pareto mark compares the points shown: with a step-time or gradient-noise model the floor "
    "searches that check it against every bucket count do not run."
)


def unchecked_sentence(unchecked: int, checks: int, unproven: Sequence[str] = ()) -> str | None:
    """What a frontier's Pareto mark does not prove (:attr:`analysis.answers.frontier.Frontier.
    unchecked`, and the points it leaves, ``unproven``): None when every pair was cleared.

    Examples
    --------
    >>> unchecked_sentence(0, 48) is None
    True
    >>> unchecked_sentence(3, 48)[:64]
    'Not proven: 3 pairs of a Pareto point and a bucket count were ne'
    >>> unchecked_sentence(3, 48, ["frontier edges, K=12", "frontier edges, K=13", "packing"])[-59:]
    'Pareto points not proven: frontier edges, K=12–13; packing.'
    >>> "was not cleared by the DP’s bounds, and no floor search ran" in unchecked_sentence(1, 0)
    True
    """
    if unchecked <= 0:
        return None
    pairs = "pair" if unchecked == 1 else "pairs"
    verb = "was" if unchecked == 1 else "were"
    if checks > 0:
        how = "neither cleared by the DP’s bounds nor searched"
        how += f" (the check runs at most {checks:,} floor searches)"
    else:
        how = "not cleared by the DP’s bounds, and no floor search ran"
        how += f" (floor_checks=0; the faces run {FLOOR_CHECKS:,})"
    text = (
        f"Not proven: {unchecked:,} {pairs} of a Pareto point and a bucket count {verb} {how}, so a plan of "
        "that many buckets may beat such a point."
    )
    return text if not unproven else f"{text} The Pareto points not proven: {named_points(unproven)}."


def pareto_check_sentence(result: Frontier) -> str:
    """What a frontier's Pareto check proved (notebook 02 under its table): every pair
    cleared (:data:`PARETO_CHECKED`; with one bucket the one plan is its row), or
    :func:`unchecked_sentence` naming the points left; with a step-time or noise model, where
    no check runs, that none ran (:data:`NOT_CHECKED`).

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram, frontier
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> res = frontier(
    ...     hist, batch_size=4, rng=np.random.default_rng(0), max_buckets=2, simulate_strategies=False,
    ...     floor_checks=48,
    ... )
    >>> pareto_check_sentence(res) == PARETO_CHECKED
    True
    """
    if result.axis == "tokens_per_s" or result.mixing_axis != "mixing":
        return NOT_CHECKED
    text = unchecked_sentence(result.unchecked, result.floor_checks, result.unproven)
    return PARETO_CHECKED if text is None else text


def named_points(labels: Sequence[str]) -> str:
    """Point labels as a sentence reads them: the bucketed ones by kind with their K range.

    Examples
    --------
    >>> named_points(["frontier edges, K=3", "packing", "frontier edges, K=4", "optimal edges, K=9"])
    'frontier edges, K=3–4; optimal edges, K=9; packing'
    """
    kinds: dict[str, list[int]] = {}
    others = []
    for label in labels:
        kind, sep, k = label.partition(", K=")
        if sep and k.isdigit():
            kinds.setdefault(kind, []).append(int(k))
        else:
            others.append(label)
    return "; ".join([*(f"{kind}, K={k_range(ks)}" for kind, ks in kinds.items()), *others])


#: What the CLI's ``frontier`` says under its table of each mixing axis (after its meaning).
FRONTIER_NOTES = {
    "mixing": "exact for sorted, random and bucketed, simulated with its SE otherwise; --all for every "
    "point, --json for all columns",
    "effective_batch_share": "exact for sorted, random and bucketed, simulated with its SE otherwise, one "
    "step's noise only (an order whose consecutive batches look alike can add their errors up: compare "
    "--noise prices W steps); mixing: the length proxy beside it; quality_time: predicted time to the "
    "same loss over a shuffle's, with --step-times; --all for every point, --json for all columns",
}


def _sooner(quality_time: float) -> str:
    """The clause ", predicted to reach the same loss 1.70× sooner than a shuffle" (or to take longer),
    from a time to quality over a shuffle's; nothing where it is not known (NaN)."""
    if not math.isfinite(quality_time) or quality_time <= 0:
        return ""
    if quality_time <= 1:
        return f", predicted to reach the same loss {1 / quality_time:.2f}× sooner than a shuffle"
    return f", predicted to take {quality_time:.2f}× a shuffle's time to reach the same loss"


def frontier_sentence(trade: TradeOff, mixing_axis: str = "mixing") -> str:
    """ "At X % efficiency, the best plan keeps Y % of the mixing; the Trainer's length grouping
    keeps Z %": ``X`` is the trade-off's target (a floor, or the Trainer's own efficiency, so both
    plans pad alike); under a token budget every efficiency is the steps' budget fill.  When a
    full shuffle (K = 1) already reaches ``X``, the sentence says so, and what the most efficient
    bucketed plan gives instead (a sentence that a full shuffle "keeps 100%" would say nothing).

    ``mixing_axis`` names what the trade-off's points keep (their ``mixing`` values read on
    that column of the frontier): ``"mixing"``, the length proxy, followed by
    :data:`MIXING_PROXY`; ``"effective_batch_share"``, the share of a shuffle's effective
    batch (a gradient-noise model's), with each plan's predicted time to the same loss over a
    shuffle's where the trade-off has it (a step-time model too).

    Examples
    --------
    >>> import textwrap
    >>> import numpy as np
    >>> from analysis import LengthHistogram, frontier
    >>> from analysis.answers.tradeoff import read_tradeoff
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 300, 600))
    >>> res = frontier(hist, batch_size=4, rng=np.random.default_rng(0), max_buckets=4, n_lambdas=2,
    ...                simulate_strategies=False, floor_checks=48)
    >>> print(textwrap.fill(frontier_sentence(read_tradeoff(res, min_efficiency=0.8)), 90))
    At 80.0% efficiency or more, the best bucketed plan (K = 4, 83.8%) keeps 14.5% of the
    mixing (mixing: the share of the data's length variance a batch keeps). Mixing is a proxy:
    the share of the length variance a batch keeps stands for gradient mixing only if the
    gradient varies with length as the length does; a gradient-noise model of your model
    (--noise FILE.npz, from analysis.timing.noise.measure_gradient_noise) measures what a plan
    keeps of the gradient.
    >>> print(textwrap.fill(frontier_sentence(read_tradeoff(res, min_efficiency=0.2)), 90))
    ... # doctest: +ELLIPSIS
    A full shuffle (K = 1, 63.3%) already reaches 20.0% efficiency and keeps all the mixing;
    the most efficient bucketed plan (K = 4, 87.4%) keeps 6.1% (mixing: the share of the
    data's length variance a batch keeps). Mixing is a proxy: ...
    """
    if mixing_axis not in MIXING_WORDS:
        raise ValueError(f"mixing_axis must be one of {sorted(MIXING_WORDS)}, got {mixing_axis!r}")
    what, everything, meaning = MIXING_WORDS[mixing_axis]
    proxy = f" {MIXING_PROXY}" if mixing_axis == "mixing" else ""
    word = "budget fill" if trade.measure == "budget_fill" else "efficiency"
    x = format_percent(trade.target, "prose")
    best, top = trade.best, trade.most_efficient
    if best is None:  # the frontier's most efficient plan is its largest K's
        text = (
            f"No bucketed plan of up to {top.n_buckets} buckets reaches {x} {word} (K = {top.n_buckets} "
            f"reaches {format_percent(top.reached, 'prose')}, keeping "
            f"{format_percent(top.mixing, 'prose')} of {what}{_sooner(top.quality_time)})"
        )
    elif best.n_buckets == 1:
        text = (
            f"A full shuffle (K = 1, {format_percent(best.reached, 'prose')}) already reaches {x} {word} "
            f"and keeps {everything}; the most efficient bucketed plan (K = {top.n_buckets}, "
            f"{format_percent(top.reached, 'prose')}) keeps {format_percent(top.mixing, 'prose')}"
            f"{_sooner(top.quality_time)}"
        )
    else:
        bound = "" if best.bound is None else f", at most {format_percent(best.bound, 'prose')} possible"
        text = (
            f"At {x} {word} or more, the best bucketed plan (K = {best.n_buckets}, "
            f"{format_percent(best.reached, 'prose')}) keeps {format_percent(best.mixing, 'prose')} of "
            f"{what}{bound}{_sooner(best.quality_time)}"
        )
    t = trade.trainer
    if t is None:
        return f"{text} ({meaning}).{proxy}"
    if not math.isfinite(t.mixing):  # batches of one sample: no spread within a batch to keep
        return (
            f"{text}; the Trainer's length grouping reaches {format_percent(t.reached, 'prose')} and has "
            f"no mixing to measure (a batch of one sample holds one length).{proxy}"
        )
    err = "" if not math.isfinite(t.mixing_se) else f" ± {format_percent(t.mixing_se, 'error')}"
    if mixing_axis == "mixing":
        return (
            f"{text}; the Trainer's length grouping keeps {format_percent(t.mixing, 'prose')}{err} at "
            f"{format_percent(t.reached, 'prose')} (lag-1 autocorrelation {t.lag1_autocorr:.2f}).{proxy}"
        )
    # one step's noise only: an order whose consecutive batches look alike can add their errors
    # up over several steps, which the per-step law of time to quality does not see
    sooner = _sooner(t.quality_time)
    if sooner:
        sooner += " were its steps' errors independent"
    return (
        f"{text}; the Trainer's length grouping, at {format_percent(t.reached, 'prose')}, keeps "
        f"{format_percent(t.mixing, 'prose')}{err} of it per step{sooner} (its batches' lengths have a lag-1 "
        f"autocorrelation of {t.lag1_autocorr:.2f}: consecutive steps alike, whose errors can add up, "
        "as the window noise over several steps measures)."
    )


def _same(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return all(math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15) for x, y in zip(a, b, strict=True))


def floor_sentence(plan: BucketPlan) -> str | None:
    """What a floor chose, whether it is proven best (or what bound is proven), and what the
    next frontier point would cost or gain, each measure named as the floor names it (None for
    a plan placed without a floor).

    Examples
    --------
    >>> import textwrap
    >>> from analysis import LengthHistogram, optimize_edges
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> print(textwrap.fill(floor_sentence(optimize_edges(hist, 2, batch_size=4, min_efficiency=0.7)), 90))
    --min-efficiency 70%: mixing 42.88% (proven the most any plan meeting it keeps); the next
    frontier point keeps 72.18% at 64.39% efficiency.

    When the plan with the most mixing already meets the floor, there is no point beyond it:

    >>> print(textwrap.fill(floor_sentence(optimize_edges(hist, 2, batch_size=4, min_efficiency=0.1)), 90))
    --min-efficiency 10%: mixing 72.18% (proven best: the plan with the most mixing meets it);
    no frontier point keeps more mixing.
    >>> print(textwrap.fill(floor_sentence(optimize_edges(hist, 3, max_tokens=24, min_mixing=0.3)), 90))
    --min-mixing 30%: budget fill 52.08% (proven best); the next frontier point reaches 57.87%
    budget fill keeping 28.19%.
    """
    f = plan.floor
    if f is None:
        return None
    word = f.axis.replace("_", " ")
    grid = "" if f.grid is None else f" among the {f.grid:,} candidate edges searched"
    head = f"{f.floor.option} {100 * f.value:g}%"  # the floor as the user gave it
    # the second axis: the length mixing, or with a noise model the effective batch (the
    # design-effect share the floor search reads, and below/above hold)
    gradient = f.mixing_axis == "effective_batch_share" and plan.gradient is not None
    kept = plan.gradient.effective_batch_share if gradient and plan.gradient is not None else plan.mixing
    second = "effective batch" if gradient else "mixing"
    on_axis = f.measure in ("mixing", "effective_batch")
    if f.searched == "hull":  # the end of the K-bucket frontier the floor asks for meets it
        what = second if not on_axis else word
        value = kept if not on_axis else f.below[0]
        end = f"the most {second}" if not on_axis else f"the best {word}"
        beyond = (
            f"no frontier point keeps more {second}" if not on_axis else f"no frontier point has more {word}"
        )
        proof = f"proven best: the plan with {end}{grid} meets it"
        return f"{head}: {what} {format_percent(value)} ({proof}); {beyond}."
    reached = (
        plan.budget_fill if f.axis == "budget_fill" and plan.budget_fill is not None else plan.efficiency
    )
    point = (reached, kept)
    if not on_axis:
        other = f.above
        proof = (
            f"proven the most any plan meeting it keeps{grid}"
            if f.exact
            else f"at most {format_percent(f.reach)} is possible{grid}"
        )
        beyond = (
            f"no frontier point keeps more {second}"
            if _same(other, point)
            else f"the next frontier point keeps {format_percent(other[1])} at "
            f"{format_percent(other[0])} {word}"
        )
        return f"{head}: {second} {format_percent(kept)} ({proof}); {beyond}."
    other = f.below
    if f.exact:
        proof = f"proven best{' on epoch time' if plan.objective_kind == 'time' else ''}{grid}"
    elif math.isfinite(f.reach):
        proof = f"at most {format_percent(f.reach)} is possible{grid}"
    else:
        proof = f"the best plan's objective is at least {f.bound:,.6g}{grid}"
    beyond = (
        f"no frontier point has more {word}"
        if _same(other, point)
        else f"the next frontier point reaches {format_percent(other[0])} {word} keeping "
        f"{format_percent(other[1])}"
    )
    return f"{head}: {word} {format_percent(reached)} ({proof}); {beyond}."
