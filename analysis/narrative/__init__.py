"""Sentences about the data, computed: what the notebooks and the report say about *your* file.

Fixed prose in a notebook may only say what holds for any data; every fact about the data
comes from one of these functions (pure: results in, a short Markdown string out), so a
report on someone else's file never repeats numbers of the bundled one.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from analysis.answers.recommendation import Recommendation
from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.narrative.budget import describe_steps
from analysis.optimize import evaluate_edges, sweep_measure
from analysis.padding.waste import random_padding, sorted_padding
from analysis.tables import format_bound, format_percent, format_value

if TYPE_CHECKING:
    from analysis.timing.step_time import StepTimeModel

__all__ = [
    "percent",
    "lengths_label",
    "describe_distribution",
    "describe_clipping",
    "describe_simulation",
    "describe_recommendation",
    "describe_step_time_terms",
    "describe_step_time_fit",
    "describe_predicted_throughput",
    "describe_edges_for_time",
    "describe_validation",
]

#: What each step-time term beyond padded tokens prices, in prose.
_TERM_PROSE = {
    "per_step": "the fixed per-step cost",
    "per_sample": "the per-sample cost",
    "attention": "the square of the padded length",
    "working_set": "a cost per token growing with the tokens in the batch",
}


def percent(share: float, digits: int = 1) -> str:
    """A share as a percentage for prose (``0.3612`` -> ``"36.1%"``; never ``"-0.0%"``): the
    prose convention of :func:`analysis.tables.format_percent`, 1 decimal unless asked.

    Examples
    --------
    >>> percent(0.3612), percent(-1e-12), percent(0.99996, 2), percent(0.0002)
    ('36.1%', '0.0%', '>99.99%', '<0.1%')
    """
    return format_percent(share, digits)


def lengths_label(hist: LengthHistogram, max_len: int | None, *, clipped: bool = False) -> str:
    """Which lengths a table, figure or sentence describes: ``hist`` (the lengths as in the
    file) unclipped, or (``clipped``) truncated at ``max_len`` as the trainer sees them; one
    label for both when no sample is longer than ``max_len`` (or none is given).

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([2, 5, 9])
    >>> lengths_label(h, 4)
    'unclipped, as in the file (the trainer clips at max_len = 4)'
    >>> lengths_label(h, 4, clipped=True)
    'clipped at max_len = 4, as the trainer sees them'
    >>> lengths_label(h, 9) == lengths_label(h, 9, clipped=True)
    True
    >>> lengths_label(h, 9)
    'as in the file: no sample is longer than max_len = 9, so the trainer sees them unclipped'
    """
    if max_len is None:
        return "as in the file (no max_len: the trainer sees them unclipped)"
    if hist.max <= max_len:
        return (
            f"as in the file: no sample is longer than max_len = {max_len:,}, so the trainer "
            "sees them unclipped"
        )
    if clipped:
        return f"clipped at max_len = {max_len:,}, as the trainer sees them"
    return f"unclipped, as in the file (the trainer clips at max_len = {max_len:,})"


def _lengths_clause(hist: LengthHistogram) -> str:
    return (
        f"{hist.n_samples:,} samples of {hist.min:,}..{hist.max:,} tokens (median "
        f"{hist.quantile(0.5):,}, mean {hist.mean:,.0f}); the longest 1% of samples hold "
        f"{percent(hist.tail_token_share(0.01))} of the tokens"
    )


def describe_distribution(
    hist: LengthHistogram, rule: BatchRule, zero_length_dropped: int = 0, *, max_len: int | None = None
) -> str:
    """The lengths in one sentence, and what a full shuffle and sorted batches waste (and,
    when some were, how many zero-length samples were dropped before counting).

    ``hist`` is the lengths as in the file.  With a ``max_len`` that truncates some samples,
    the sentence says which numbers are of the unclipped lengths and which of the clipped
    ones the trainer sees (the padding always is: that is what the trainer pads); the numbers
    are those of :meth:`~analysis.LengthHistogram.summary` for each.

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80])
    >>> print(describe_distribution(h, BatchRule(2)))
        8 samples of 1..80 tokens (median 4, mean 34); the longest 1% of samples hold 29.6% of the
    tokens. A full random shuffle with batch_size 2 wastes 37.0% of every padded batch here
    (expected efficiency 63.0%); sorted batches waste 7.5%.
    >>> print(describe_distribution(h, BatchRule(2), max_len=60))
        Unclipped, as in the file: 8 samples of 1..80 tokens (median 4, mean 34); the longest 1% of
    samples hold 29.6% of the tokens. Clipped at max_len = 60, as the trainer sees them: 8 samples
    of 1..60 tokens (median 4, mean 30); the longest 1% of samples hold 25.0% of the tokens. A full
    random shuffle with batch_size 2 wastes 35.4% of every padded batch here (expected efficiency
    64.6%); sorted batches waste 4.8%.
    >>> describe_distribution(h, BatchRule(2), max_len=80).split(". ")[1]  # nothing clipped
    'No sample is longer than max_len = 80: the trainer sees them unclipped'
    >>> describe_distribution(h, BatchRule(2), zero_length_dropped=1200)[-57:]
    '(1,200 zero-length samples were dropped before counting.)'
    """
    seen = hist if max_len is None else hist.clip(max_len)
    shuffle = random_padding(seen, rule).efficiency
    ordered = sorted_padding(seen, rule).efficiency
    if seen == hist:
        text = f"{_lengths_clause(hist)}."
        if max_len is not None:
            text += f" No sample is longer than max_len = {max_len:,}: the trainer sees them unclipped."
    else:
        text = (
            f"Unclipped, as in the file: {_lengths_clause(hist)}. Clipped at max_len = "
            f"{max_len:,}, as the trainer sees them: {_lengths_clause(seen)}."
        )
    text += (
        f" A full random shuffle with {rule.text} wastes {percent(1 - shuffle)} of every padded "
        f"batch here (expected efficiency {percent(shuffle)}); sorted batches waste "
        f"{percent(1 - ordered)}."
    )
    if rule.max_tokens is not None:  # one batch size must fit the longest: how full are its steps
        one = evaluate_edges(seen, [0, seen.max], rule)
        text += (
            f" Both take one batch size, {one.batch_sizes[0]:,} (the longest sample must fit the budget): "
            f"their steps are {percent(float(one.budget_fill or 0))} real tokens."
        )
    if zero_length_dropped:
        text += f" ({zero_length_dropped:,} zero-length samples were dropped before counting.)"
    return text


def describe_clipping(hist: LengthHistogram, max_len: int) -> str:
    """What truncation at ``max_len`` does to these lengths (``hist``: as in the file,
    unclipped; the shares are of its samples and tokens).

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([2, 5, 9])
    >>> describe_clipping(h, 9)
    'No sample in the file is longer than max_len = 9 (the longest has 9): clipping changes nothing.'
    >>> print(describe_clipping(h, 4))
        Of the lengths as in the file (unclipped), clipping at max_len = 4 truncates 2 samples (66.7%)
    and removes 6 tokens (37.5% of all).
    """
    s = hist.clip_summary(max_len)
    if s["samples_clipped"] == 0:
        return (
            f"No sample in the file is longer than max_len = {s['max_len']:,} (the longest has "
            f"{hist.max:,}): clipping changes nothing."
        )
    return (
        f"Of the lengths as in the file (unclipped), clipping at max_len = {s['max_len']:,} "
        f"truncates {s['samples_clipped']:,} samples ({percent(s['share_samples_clipped'])}) "
        f"and removes {s['tokens_removed']:,} tokens ({percent(s['share_tokens_removed'])} of all)."
    )


def describe_simulation(table: pd.DataFrame, epochs: int) -> str:
    """How far the simulated efficiency is from the exact expectation (a
    :func:`analysis.compare_strategies` table), and which strategies waste least.

    Examples
    --------
    >>> table = pd.DataFrame({"efficiency": [0.99, 0.6, 0.9], "expected_efficiency":
    ...                       [0.99, 0.61, float("nan")]}, index=["sorted", "random", "packing"])
    >>> print(describe_simulation(table, 3))
        Over 3 simulated epochs, the simulated efficiency is within 1.00 points of the exact
    expectation for sorted and random. Least padding: sorted (99.0%); most: random (60.0%).
    >>> table["batch_rule"] = ["batch_size 5", "batch_size 5", "max_tokens 4,096"]
    >>> text = describe_simulation(table, 3)
    >>> print(text[text.index("The strategies") :])
    The strategies ran under different batch rules (the `batch_rule` column): batch_size 5 for
    sorted and random; max_tokens 4,096 for packing. A step holds a different number of samples
    under each, so steps per epoch compare the rules as much as the padding; efficiency compares
    them like with like. Least padding: sorted (99.0%); most: random (60.0%).
    """
    both = table.dropna(subset=["expected_efficiency"])
    parts = []
    if len(both):
        gap = float((both["efficiency"] - both["expected_efficiency"]).abs().max())
        names = " and ".join(
            [", ".join(both.index[:-1]), both.index[-1]] if len(both) > 1 else list(both.index)
        )
        parts.append(
            f"Over {epochs} simulated epoch{'s' if epochs != 1 else ''}, the simulated "
            f"efficiency is within {format_bound(100 * gap)} points of the exact expectation for "
            f"{names}."
        )
    if "simulated_samples" in table.columns:
        parts.append(
            f"The data hold {table.attrs.get('population_samples', 0):,} samples: each "
            f"strategy was simulated on a uniform subsample of "
            f"{int(table['simulated_samples'].iloc[0]):,}, which leaves a standard error "
            f"of up to {format_bound(100 * float(table['efficiency_se'].max()))} points on the "
            f"simulated efficiency (the exact expectations are for the full data)."
        )
    if "batch_rule" in table.columns and table["batch_rule"].nunique() > 1:
        by_rule = table.groupby("batch_rule", sort=False).groups
        rules = "; ".join(f"{rule} for {_names(list(map(str, names)))}" for rule, names in by_rule.items())
        parts.append(
            f"The strategies ran under different batch rules (the `batch_rule` column): {rules}. "
            "A step holds a different number of samples under each, so steps per epoch compare "
            "the rules as much as the padding; efficiency compares them like with like."
        )
    efficiency = dict(zip(map(str, table.index), table["efficiency"].astype(float), strict=True))
    best, worst = max(efficiency, key=efficiency.__getitem__), min(efficiency, key=efficiency.__getitem__)
    parts.append(
        f"Least padding: {best} ({percent(efficiency[best])}); most: {worst} ({percent(efficiency[worst])})."
    )
    return " ".join(parts)


def _names(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def describe_recommendation(rec: Recommendation) -> str:
    """The plan's efficiency, what it recovers of a shuffle's waste, and the K question: the
    K used, and the K the gain rule suggests when it differs (said once, here).  Under a
    token budget's steps objective the sentence is about steps and how full they are
    (:func:`analysis.narrative.budget.describe_steps`), never a padding ratio of 0 / 0.

    Examples
    --------
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
            f"the buckets recover {percent(1 - waste_plan / waste_shuffle)} of the padding a shuffle wastes"
            if waste_shuffle > 0
            else "a shuffle wastes no padding here, so there is none to recover"
        )
        text = (
            f"With {plan.n_buckets} {plan.method} bucket{'s' if plan.n_buckets != 1 else ''} "
            f"({plan.rule.text}) the expected efficiency is {percent(plan.efficiency)}, against "
            f"{percent(shuffle)} for a full shuffle: {recovered}."
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
    suggested = percent(float(optimal.loc[k]))
    return f"{text} {rule_text} suggests {buckets} ({suggested}){why}; this plan uses {plan.n_buckets}."


def describe_step_time_terms(model: StepTimeModel) -> str:
    """Why a step-time model's prediction departs from padded tokens: a clause naming only
    the terms the model has (a fitted model may set any of them to 0).

    Examples
    --------
    >>> from analysis.timing.step_time import StepTimeModel
    >>> describe_step_time_terms(StepTimeModel(per_step=0.1, per_token=1e-3, attention=1e-6))
    'the fixed per-step cost and the square of the padded length weigh differently from padded tokens alone'
    >>> describe_step_time_terms(StepTimeModel(per_token=1e-3, tile=64))
    'lengths rounded up to the tile of 64 tokens weigh differently from padded tokens alone'
    >>> describe_step_time_terms(StepTimeModel(per_token=1e-3))
    'the model prices padded tokens alone'
    """
    parts = [prose for term, prose in _TERM_PROSE.items() if getattr(model, term) > 0]
    if model.tile > 1:
        parts.append(f"lengths rounded up to the tile of {model.tile:,} tokens")
    if not parts:
        return "the model prices padded tokens alone"
    names = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    verb = "weighs" if len(parts) == 1 and not parts[0].startswith("lengths") else "weigh"
    return f"{names} {verb} differently from padded tokens alone"


def describe_step_time_fit(model: StepTimeModel, hist: LengthHistogram) -> str:
    """How well a fitted step-time model matches its measurements, the terms the fit set to 0,
    and whether the data's lengths lie within the measured ones (or extrapolate the model).

    Examples
    --------
    >>> from analysis.timing.step_time import StepTimeModel
    >>> measured = pd.DataFrame({"batch_size": [2, 8, 2, 8], "length": [16, 16, 64, 64],
    ...                          "repeats": [3, 3, 3, 3], "spread": [0.01, 0.03, 0.02, 0.02],
    ...                          "relative_residual": [0.01, -0.01, 0.02, -0.02]})
    >>> model = StepTimeModel(per_step=1e-3, per_token=1e-5, measurements=measured)
    >>> print(describe_step_time_fit(model, LengthHistogram.from_lengths([10, 20, 40])))
        12 timed steps of 4 shapes (batch sizes 2..8, padded lengths 16..64). The fit's RMS relative
    residual is 1.6% against a median spread of repeats of 2.0%; the fit set per_sample, attention,
    working_set to 0. The data (10..40 tokens) lie within the measured lengths.
    >>> text = describe_step_time_fit(model, LengthHistogram.from_lengths([10, 100]))
    >>> print(text[text.index("The data") :])
    The data reach 100 tokens, beyond the longest measured shape: predictions for batches longer
    than 64 tokens extrapolate the model (measure your own long shapes before trusting them).
    """
    measured = model.residuals()
    zero = [str(term) for term, c in model.to_frame()["coefficient"].items() if c == 0]
    longest = int(measured["length"].max())
    text = (
        f"{int(measured['repeats'].sum()):,} timed steps of {len(measured)} shapes (batch sizes "
        f"{measured['batch_size'].min():,}..{measured['batch_size'].max():,}, padded lengths "
        f"{measured['length'].min():,}..{longest:,}). The fit's RMS relative residual is "
        f"{percent(model.rms_relative_residual)} against a median spread of repeats of "
        f"{percent(measured['spread'].median())}"
    )
    if zero:
        text += f"; the fit set {', '.join(zero)} to 0"
    if hist.max > longest:
        return (
            f"{text}. The data reach {hist.max:,} tokens, beyond the longest measured shape: "
            f"predictions for batches longer than {longest:,} tokens extrapolate the model "
            "(measure your own long shapes before trusting them)."
        )
    return f"{text}. The data ({hist.min:,}..{hist.max:,} tokens) lie within the measured lengths."


def describe_predicted_throughput(table: pd.DataFrame, model: StepTimeModel) -> str:
    """The fastest strategy under the step-time model, and where the padded-token prediction
    departs from it most (an :func:`analysis.predict_strategy_throughput` table), and why.

    Examples
    --------
    >>> from analysis.timing.step_time import StepTimeModel
    >>> table = pd.DataFrame({"efficiency": [1.0, 0.4], "tokens_per_s": [5000.0, 1500.0],
    ...                       "padded_tokens_per_s": [5000.0, 2000.0]}, index=["sorted", "random"])
    >>> print(describe_predicted_throughput(table, StepTimeModel(per_step=0.01, per_token=1e-5)))
        Under the model, **sorted** is fastest: 5,000 useful tokens/s at 100.0% efficiency. The
    padded-token prediction departs from the model most for **random** (+33.3%): there the fixed
    per-step cost weighs differently from padded tokens alone.
    """
    best = str(table["tokens_per_s"].idxmax())  # the index: strategy names
    gap = table["padded_tokens_per_s"] / table["tokens_per_s"] - 1
    worst = str(gap.abs().idxmax())
    return (
        f"Under the model, **{best}** is fastest: {table['tokens_per_s'][best]:,.0f} useful "
        f"tokens/s at {percent(table['efficiency'][best])} efficiency. The padded-token prediction "
        f"departs from the model most for **{worst}** ({gap[worst]:+.1%}): there "
        f"{describe_step_time_terms(model)}."
    )


def describe_edges_for_time(sweep: pd.DataFrame, n_buckets: int) -> str:
    """How much faster the edges optimised for time are than the edges optimised for padding
    at ``n_buckets`` (an :func:`analysis.sweep_throughput` frame), and whether padding is a
    good proxy for time on these data (the gain is under 1%).

    Examples
    --------
    >>> sweep = pd.DataFrame({"n_buckets": [2, 2], "objective": ["padding", "time"],
    ...                       "efficiency": [0.9, 0.88], "tokens_per_s": [4000.0, 4100.0]})
    >>> print(describe_edges_for_time(sweep, 2))
        With K = 2, the edges optimised for time are predicted 2.50% faster than the edges optimised
    for padding (88.0% against 90.0% efficiency).
    """
    at_k = sweep[sweep["n_buckets"] == n_buckets].set_index("objective")
    tokens_per_s, efficiency = at_k["tokens_per_s"], at_k["efficiency"]
    gain = tokens_per_s["time"] / tokens_per_s["padding"] - 1
    return (
        f"With K = {n_buckets}, the edges optimised for time are predicted "
        f"{format_value(gain, 'ratio')} faster than the edges optimised for padding "
        f"({percent(efficiency['time'])} against {percent(efficiency['padding'])} "
        "efficiency)" + (": on these data padding is a good proxy for time." if abs(gain) < 0.01 else ".")
    )


def _largest_magnitude(values: pd.Series) -> float:
    return float(values.abs().max())


def describe_validation(validation: pd.DataFrame) -> str:
    """The largest prediction errors on real training runs, per distribution, against the
    run-to-run noise and the machine's drift (the validation table of
    ``benchmarks/bench_step_time.py``).

    Examples
    --------
    >>> validation = pd.DataFrame({"distribution": ["a", "a"], "anchored_error": [0.0, -0.02],
    ...                            "step_time_error": [0.01, 0.03], "padded_error": [0.0, 0.2],
    ...                            "noise": [0.004, 0.006], "drift": [1.01, 1.01]})
    >>> print(describe_validation(validation))
        On a, the largest error over the strategies is 2.00% for the anchored step-time model, 3.00%
    unanchored, and 20.00% for padded tokens. Run-to-run noise: up to 0.60%; the session's second
    half ran 1.010 × as long as its first half, on every strategy alike.
    """
    worst_error = validation.groupby("distribution")[
        ["anchored_error", "step_time_error", "padded_error"]
    ].agg(_largest_magnitude)
    text = " ".join(
        f"On {dist}, the largest error over the strategies is {format_value(row.anchored_error, 'ratio')} "
        f"for the anchored step-time model, {format_value(row.step_time_error, 'ratio')} unanchored, "
        f"and {format_value(row.padded_error, 'ratio')} for padded tokens."
        for dist, row in worst_error.iterrows()
    )
    text += f" Run-to-run noise: up to {format_bound(100 * float(validation['noise'].max()))}%"
    if "drift" in validation:  # the interleaved benchmark: one session, in random order
        return (
            f"{text}; the session's second half ran {validation['drift'].iloc[0]:.3f} × as long "
            "as its first half, on every strategy alike."
        )
    # an older file: calibration first, then the runs
    return (
        f"{text}; the calibration shapes, timed again after the runs, took "
        f"{validation['drift_after_runs'].iloc[0]:.3f} × the model."
    )
