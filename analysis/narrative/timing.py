"""Sentences about time: how well a fitted step-time model matches its measurements, which
strategy is fastest under it and why the padded-token prediction departs from it, what edges
placed for time gain, and how the model did on real runs (notebook 04, the report)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from analysis.lengths import LengthHistogram
from analysis.tables import format_bound, format_percent, format_value

if TYPE_CHECKING:
    from analysis.timing.step_time import StepTimeModel

__all__ = [
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
    residual is 1.6% against a median run-to-run variation of 2.0%; the fit set per_sample, attention,
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
        f"{format_percent(model.rms_relative_residual, 'prose')} against a median run-to-run variation of "
        f"{format_percent(measured['spread'].median(), 'prose')}"
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
        f"tokens/s at {format_percent(table['efficiency'][best], 'prose')} efficiency. The "
        "padded-token prediction "
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
        f"({format_percent(efficiency['time'], 'prose')} against "
        f"{format_percent(efficiency['padding'], 'prose')} efficiency)"
        + (": on these data padding is a good proxy for time." if abs(gain) < 0.01 else ".")
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
