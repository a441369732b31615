"""Figures for the step-time model and the throughput it predicts (from
:class:`analysis.StepTimeModel`, :func:`analysis.predict_strategy_throughput`,
:func:`analysis.answers.throughput.sweep_throughput` and the benchmark's validation table).  Every
function returns a ``Figure``; no computation here beyond picking columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter, PercentFormatter

from analysis.plots._common import GREY, OKABE_ITO, format_count, length_axis
from analysis.tables import format_percent
from analysis.timing.step_time import StepTimeModel

__all__ = [
    "plot_step_time_fit",
    "plot_predicted_throughput",
    "plot_time_vs_padding_edges",
    "plot_measured_vs_predicted",
]

# Okabe-Ito: the step-time model, the padded-token model, measurements.
_MODEL, _PADDED, _MEASURED = OKABE_ITO["blue"], OKABE_ITO["orange"], OKABE_ITO["black"]
_ANCHORED = OKABE_ITO["sky_blue"]
_PERCENT = PercentFormatter(1.0, decimals=0)  # axis ticks: whole percentages, alike
_KTOK = FuncFormatter(lambda v, _: f"{v / 1000:,.3g}k" if v else "0")
#: Batch sizes are a continuous, ordered quantity: a perceptually uniform map.
_BATCH_CMAP = "viridis"


def plot_step_time_fit(model: StepTimeModel, *, title: str | None = None) -> Figure:
    """Measured step times against the fitted model, and the relative residuals by length.

    Left: each measured shape's median time (dots, colour = batch size) and the model's
    curve for each batch size, on log axes.  Right: relative residual per shape against
    padded length, with the spread of the repeats (the noise) as a grey band.

    Examples
    --------
    >>> truth = StepTimeModel(per_step=0.02, per_token=2e-6, attention=1e-9)
    >>> frame = pd.DataFrame([(b, n) for b in (1, 8) for n in (64, 512, 2048)] * 2,
    ...                      columns=["batch_size", "length"])
    >>> frame["seconds"] = truth.predict(frame["batch_size"], frame["length"])
    >>> len(plot_step_time_fit(StepTimeModel.fit(frame)).axes)
    3
    """
    res = model.residuals()
    sizes = np.sort(res["batch_size"].unique())
    lo, hi = float(res["length"].min()), float(res["length"].max())
    fig = Figure(figsize=(10, 4), layout="constrained")
    left, right = fig.subplots(1, 2)
    cmap = colormaps[_BATCH_CMAP]
    smallest, largest = float(sizes.min()), float(max(sizes.max(), sizes.min() + 1))
    norm = LogNorm(smallest, largest)
    for b in sizes:
        rows = res[res["batch_size"] == b]
        color = cmap(0.9 * norm(float(b)))
        left.scatter(rows["length"], rows["seconds"], color=color, s=18, zorder=3)
        grid = np.geomspace(rows["length"].min(), rows["length"].max(), 60)
        left.plot(grid, model.predict(b, grid), color=color, lw=1)
    left.set_yscale("log")
    length_axis(left, lo / 1.25, hi * 1.25, log=True, label="padded length L (tokens)")
    left.set_ylabel("step time (s, log scale)")
    left.set_title("measured (dots) and fitted model (lines)", fontsize=10)
    bar = fig.colorbar(
        ScalarMappable(cmap=cmap, norm=LogNorm(smallest, largest / 0.9)), ax=left, label="batch size B"
    )
    if sizes.size <= 8:  # less than a decade or few sizes: tick each measured size, plainly
        bar.set_ticks([float(b) for b in sizes])
        bar.ax.minorticks_off()
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_count(v)))
    bar.ax.yaxis.set_minor_formatter(NullFormatter())
    order = res.sort_values("length")
    right.fill_between(
        order["length"],
        -order["spread"],
        order["spread"],
        color="#BBBBBB",
        alpha=0.5,
        step="mid",
        label="run-to-run variation of repeats (noise)",
        lw=0,
    )
    right.scatter(
        res["length"], res["relative_residual"], color=_MODEL, s=14, zorder=3, label="relative residual"
    )
    right.axhline(0, color=GREY, lw=0.8)
    length_axis(right, lo / 1.25, hi * 1.25, log=True, label="padded length L (tokens)")
    right.yaxis.set_major_formatter(_PERCENT)
    right.set_ylabel("(measured − model) / measured")
    right.legend(fontsize=8, loc="best")
    right.set_title(
        f"RMS relative residual {format_percent(model.rms_relative_residual, 'figure')}", fontsize=10
    )
    if title:
        fig.suptitle(title)
    return fig


def plot_predicted_throughput(table: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Predicted useful tokens/s per strategy: the step-time model beside padded tokens.

    ``table`` is a :func:`~analysis.predict_strategy_throughput` frame; simulated rows get
    an error bar of two standard errors.  Right: efficiency (at most 100 %).

    Examples
    --------
    >>> table = pd.DataFrame({"tokens_per_s": [9e3, 6e3], "tokens_per_s_se": [0.0, 50.0],
    ...                       "padded_tokens_per_s": [9e3, 5e3], "efficiency": [0.99, 0.6]},
    ...                      index=pd.Index(["sorted", "random"], name="strategy"))
    >>> len(plot_predicted_throughput(table).axes)
    2
    """
    names = list(table.index)
    y = np.arange(len(names))[::-1]
    fig = Figure(figsize=(10, 0.55 * len(names) + 1.6), layout="constrained")
    ax, eff_ax = fig.subplots(1, 2, sharey=True, width_ratios=[2, 1])
    h = 0.38
    model_tps = table["tokens_per_s"].to_numpy(float)
    padded_tps = table["padded_tokens_per_s"].to_numpy(float)
    se = table["tokens_per_s_se"] if "tokens_per_s_se" in table else pd.Series(0.0, index=table.index)
    err = 2 * se.fillna(0).to_numpy(float)
    ax.barh(y + h / 2, model_tps, h, color=_MODEL, xerr=err, label="step-time model")
    ax.barh(y - h / 2, padded_tps, h, color=_PADDED, label="padded tokens (old model)")
    top = float(np.nanmax([model_tps.max(), padded_tps.max()]))
    for yi, a, b, e in zip(y, model_tps, padded_tps, err, strict=True):
        ax.text(a + e + 0.01 * top, yi + h / 2, format_count(a), va="center", fontsize=8)
        ax.text(b + 0.01 * top, yi - h / 2, format_count(b), va="center", fontsize=8)
    ax.set_yticks(y, names)
    ax.set_xlim(0, top * 1.22)
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.xaxis.set_major_formatter(_KTOK)
    ax.set_xlabel("predicted useful tokens/s")
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.01), ncols=2, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    eff = table["efficiency"].to_numpy(float)
    eff_ax.barh(y, eff, 0.6, color="#999999")
    for yi, e in zip(y, eff, strict=True):
        eff_ax.text(
            min(e, 1.0) - 0.02,
            yi,
            format_percent(e, "figure"),
            va="center",
            ha="right",
            fontsize=8,
            color="white",
        )
    eff_ax.set_xlim(0, 1)
    eff_ax.xaxis.set_major_formatter(_PERCENT)
    eff_ax.set_xlabel("efficiency (useful / padded)")
    if title:
        fig.suptitle(title)
    return fig


def plot_time_vs_padding_edges(sweep: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Edges optimised for padding against edges optimised for time, over ``K``.

    ``sweep`` is a :func:`~analysis.answers.throughput.sweep_throughput` frame.  Left: predicted
    tokens/s against the number of buckets; right: the efficiency of the same edges (at most
    100 %).

    Examples
    --------
    >>> sweep = pd.DataFrame({"n_buckets": [1, 1, 2, 2], "objective": ["padding", "time"] * 2,
    ...                       "tokens_per_s": [5e3, 5e3, 7e3, 7.5e3],
    ...                       "efficiency": [0.5, 0.5, 0.8, 0.78]})
    >>> len(plot_time_vs_padding_edges(sweep).axes)
    2
    """
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    tps_ax, eff_ax = fig.subplots(1, 2, sharex=True)
    styles = {
        "padding": (_PADDED, "s", "edges minimising padding"),
        "time": (_MODEL, "o", "edges minimising expected time"),
    }
    for objective, (color, marker, label) in styles.items():
        rows = sweep[sweep["objective"] == objective].sort_values("n_buckets")
        tps_ax.plot(rows["n_buckets"], rows["tokens_per_s"], marker=marker, color=color, label=label)
        eff_ax.plot(rows["n_buckets"], rows["efficiency"], marker=marker, color=color, label=label)
    tps_ax.set_ylabel("predicted useful tokens/s (step-time model)")
    tps_ax.yaxis.set_major_formatter(_KTOK)
    eff_ax.set_ylabel("efficiency (useful / padded)")
    eff_ax.set_ylim(top=min(1.0, float(sweep["efficiency"].max()) + 0.02))
    # the decimals the range needs: efficiencies within a point of each other (a budget that
    # leaves most batches at one sample) would otherwise tick "100%, 100%, 99%, 99%"
    eff_ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=None))
    for ax in (tps_ax, eff_ax):
        ax.set_xlabel("number of buckets K")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    tps_ax.legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    return fig


def plot_measured_vs_predicted(
    validation: pd.DataFrame, *, target: float = 0.05, title: str | None = None
) -> Figure:
    """Prediction error per strategy and distribution, step-time model beside padded tokens.

    ``validation`` is the benchmark's table (``data/step_time_validation.csv``): columns
    ``distribution``, ``strategy``, ``step_time_error``, ``padded_error``, ``noise`` and,
    when present, ``anchored_error`` (the step-time prediction scaled by the measured sorted
    run, as the padded-token one is).  A grey band marks ``±target``; black ticks the
    run-to-run noise where it was measured.

    Examples
    --------
    >>> v = pd.DataFrame({"distribution": ["a", "a"], "strategy": ["sorted", "random"],
    ...                   "step_time_error": [0.01, -0.03], "padded_error": [0.0, -0.2],
    ...                   "noise": [0.01, float("nan")]})
    >>> len(plot_measured_vs_predicted(v).axes)
    1
    """
    dists = list(dict.fromkeys(validation["distribution"]))
    n_rows = validation.groupby("distribution").size().max()
    series = [
        ("step_time_error", _MODEL, "step-time model"),
        ("anchored_error", _ANCHORED, "step-time model, anchored on sorted"),
        ("padded_error", _PADDED, "padded tokens (anchored on sorted)"),
    ]
    series = [s for s in series if s[0] in validation.columns]
    fig = Figure(figsize=(4.6 * len(dists), 0.7 * n_rows + 2.0), layout="constrained")
    axes = fig.subplots(1, len(dists), squeeze=False, sharex=True)[0]
    h = 0.8 / len(series)
    errors = validation[[s[0] for s in series]].to_numpy(float)
    lim = max(0.1, float(np.nanmax(np.abs(errors))) * 1.15)
    for ax, dist in zip(axes, dists, strict=True):
        rows = validation[validation["distribution"] == dist]
        y = np.arange(len(rows))[::-1]
        ax.axvspan(-target, target, color="#DDDDDD", lw=0, label=f"±{target:.0%} target")
        for i, (column, color, label) in enumerate(series):
            ax.barh(y + 0.4 - h * (i + 0.5), rows[column], h, color=color, label=label)
        noise = rows["noise"].to_numpy(float)
        has = np.isfinite(noise)
        if has.any():
            ax.errorbar(
                np.zeros(has.sum()),
                y[has],
                xerr=noise[has],
                fmt="none",
                ecolor=_MEASURED,
                capsize=3,
                lw=1,
                label="run-to-run noise",
            )
        ax.axvline(0, color=GREY, lw=0.8)
        ax.set_yticks(y, rows["strategy"])
        ax.set_xlim(-lim, lim)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.xaxis.set_major_formatter(_PERCENT)
        ax.set_xlabel("(predicted − measured) / measured tokens/s")
        ax.set_title(dist, fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title)
    return fig
