"""Figures about bucket edges: efficiency against the number of buckets and several edge sets
side by side (the edges drawn on the length histogram are :mod:`analysis.plots.edges`).  Inputs come from
:mod:`analysis.optimize` (sweep frames and :class:`~analysis.optimize.BucketPlan`\\ s); every
function returns a ``Figure``.  Efficiencies are coloured with a colour-blind-safe map and
their axes stop at 100 %; length axes are logarithmic when the lengths span more than a decade."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import blended_transform_factory

from analysis.lengths import LengthHistogram
from analysis.optimize import BucketPlan, sweep_measure
from analysis.plots._common import (
    OKABE_ITO,
    length_axis,
    wants_log_axis,
)
from analysis.plots.edges import PERCENT, colorbar, efficiency_colors
from analysis.tables import format_percent

__all__ = ["METHOD_COLORS", "plot_efficiency_vs_buckets", "plot_edge_sets"]

#: One colour per edge-placement method (Okabe–Ito), the same in every figure.
METHOD_COLORS = {
    "optimal": OKABE_ITO["blue"],
    "greedy": OKABE_ITO["orange"],
    "equal_tokens": OKABE_ITO["green"],
    "equal_count": OKABE_ITO["purple"],
    "geometric": OKABE_ITO["vermillion"],
    "given": "#777777",
}
_METHOD_LABELS = {
    "optimal": "optimal (exact DP)",
    "greedy": "greedy search (the case)",
    "equal_tokens": "equal tokens (Lhotse, NeMo)",
    "equal_count": "equal count (fairseq)",
    "geometric": "geometric (tensor2tensor)",
}


def plot_efficiency_vs_buckets(
    sweep: pd.DataFrame,
    *,
    random_efficiency: float | None = None,
    sorted_efficiency: float | None = None,
    recommended: int | None = None,
    chosen: int | None = None,
    title: str | None = None,
) -> Figure:
    """Expected efficiency against the number of buckets, one line per method.

    ``sweep`` is a :func:`analysis.sweep_bucket_counts` frame.  Optional horizontal reference
    lines: ``random_efficiency`` (one bucket: a full shuffle) and ``sorted_efficiency`` (sorted
    batches, cut from the sorted samples).  ``chosen`` marks the bucket count the report uses;
    ``recommended`` the one a gain rule suggests (marked apart only when they differ).  The
    efficiency axis stops at 100 %; every line is named in the legend beside the axes, none
    by a text drawn on it.  A sweep of a token budget's steps objective draws what it
    optimised, the budget fill (:func:`analysis.optimize.sweep_measure`: every K may pad
    nothing there); its one reference line is K = 1's fill, that of a shuffle and of sorted
    batches alike (one batch size), and the efficiency arguments are not drawn.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 100, 400))
    >>> from analysis import sweep_bucket_counts
    >>> sweep = sweep_bucket_counts(hist, range(1, 4), ("optimal", "equal_count"), batch_size=4)
    >>> fig = plot_efficiency_vs_buckets(sweep, chosen=2)
    >>> len(fig.axes), float(fig.axes[0].get_ylim()[1]), list(fig.axes[0].texts)
    (1, 1.0, [])
    """
    fig = Figure(figsize=(9.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    measure = sweep_measure(sweep)  # budget_fill for a token budget's steps objective
    if measure == "budget_fill":  # a shuffle and sorted batches share one batch size: K = 1's steps
        one = sweep[(sweep["method"] == "optimal") & (sweep["n_buckets"] == 1)]["budget_fill"]
        random_efficiency = float(one.iloc[0]) if len(one) else None
        sorted_efficiency = None
    methods = list(dict.fromkeys(sweep["method"]))
    for method in methods:
        rows = sweep[sweep["method"] == method].sort_values("n_buckets")
        best = method == "optimal"
        ax.plot(
            rows["n_buckets"],
            rows[measure],
            clip_on=False,  # a line at 100 % stays whole on the top spine
            marker="o",
            ms=4 if best else 3,
            lw=2.4 if best else 1.3,
            color=METHOD_COLORS.get(method, "#777777"),
            ls=(0, (4, 2)) if method == "greedy" else "-",  # often on top of the optimum
            label=_METHOD_LABELS.get(method, method),
            zorder=4 if method == "greedy" else 3 if best else 2,
        )
    # the reference lines, named in the legend (no text drawn across a line)
    for value, what, style in (
        (sorted_efficiency, "sorted batches", "--"),
        (
            random_efficiency,
            "random or sorted (one batch size)"
            if measure == "budget_fill"
            else "random shuffle (one bucket)",
            ":",
        ),
    ):
        if value is not None:
            label = f"{what}: {format_percent(value, 'figure')}"
            ax.axhline(value, color="black", lw=1, ls=style, zorder=1, label=label)
    optimal = sweep[sweep["method"] == "optimal"]
    marks = [(chosen, "this report: K = {k} ({eff})", "-")]
    if recommended is not None and recommended != chosen:
        marks.append((recommended, "the gain rule suggests K = {k} ({eff})", "-."))
    for k, text, style in marks:
        if k is None:
            continue
        row = optimal[optimal["n_buckets"] == k]
        eff = format_percent(float(row[measure].iloc[0]), "figure") if len(row) else "n/a"
        ax.axvline(
            k,
            color=METHOD_COLORS["optimal"],
            lw=1.2,
            ls=style,
            alpha=0.7,
            label=text.format(k=k, eff=eff),
            zorder=1,
        )
        if len(row):
            ax.plot(
                [k],
                [float(row[measure].iloc[0])],
                "o",
                ms=11,
                mfc="none",
                color=METHOD_COLORS["optimal"],
                mec=METHOD_COLORS["optimal"],
                mew=1.4,
                zorder=5,
            )
    lows = [float(sweep[measure].min())]
    lows += [e for e in (random_efficiency,) if e is not None]
    ax.set_ylim(max(0.0, min(lows) - 0.05), 1.0)
    ax.set_xlabel("number of buckets")
    ax.set_ylabel(
        "budget fill (useful tokens / steps × max_tokens)"
        if measure == "budget_fill"
        else "expected efficiency (useful / padded tokens)"
    )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_formatter(PERCENT)
    ax.grid(alpha=0.3)
    ax.set_axisbelow(True)
    # the legend beside the axes: it covers no line
    fig.legend(*ax.get_legend_handles_labels(), fontsize=8, loc="outside right upper", frameon=False)
    if title:
        ax.set_title(title)
    return fig


def plot_edge_sets(
    plans: Mapping[str, BucketPlan],
    *,
    hist: LengthHistogram | None = None,
    log_x: bool | None = None,
    title: str | None = None,
) -> Figure:
    """Several edge sets on one length axis: a row per plan, each bucket a bar coloured by
    its expected efficiency, the plan's overall efficiency at the right.

    The length axis is logarithmic when the lengths span more than a decade
    (``log_x=None``; from ``hist`` when given, else from the edges themselves).

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 100, 400))
    >>> from analysis import evaluate_edges, optimize_edges
    >>> plans = {"optimal": optimize_edges(hist, 2, batch_size=4),
    ...          "halves": evaluate_edges(hist, [0, 50, hist.max], batch_size=4)}
    >>> len(plot_edge_sets(plans).axes)  # the rows and the colour bar
    2
    """
    names = list(plans)
    top = max(p.edges[-1] for p in plans.values())
    inner = [e for p in plans.values() for e in p.edges[1:] if e > 0]
    lo = hist.min if hist is not None else max(1.0, min(inner) / 2)
    log = wants_log_axis(lo, top) if log_x is None else bool(log_x)
    left = lo * 0.8 if log else 0.0
    fig = Figure(figsize=(9, 0.55 * len(names) + 1.6), layout="constrained")
    ax = fig.add_subplot()
    cmap, norm = efficiency_colors()
    right = blended_transform_factory(ax.transAxes, ax.transData)
    for row, name in enumerate(names):
        plan = plans[name]
        effs = plan.to_frame()["efficiency"].to_numpy(dtype=float)
        y = len(names) - 1 - row
        for b, (a, z) in enumerate(zip(plan.edges[:-1], plan.edges[1:])):
            start = max(a, left)  # the bar starts at the axis when the axis starts later
            ax.barh(
                y,
                z - start,
                left=start,
                height=0.62,
                color=cmap(norm(effs[b])) if np.isfinite(effs[b]) else "#dddddd",
                edgecolor="black",
                lw=0.6,
            )
        ax.text(1.01, y, format_percent(plan.efficiency, "figure"), transform=right, va="center", fontsize=9)
    ax.set_yticks(range(len(names)), names[::-1], fontsize=9)
    length_axis(ax, left, top * (1.05 if log else 1.0), log=log, label="length (tokens)")
    colorbar(fig, cmap, norm, ax, pad=0.07, fraction=0.03)
    note = "bars are buckets, coloured by their expected efficiency; the plan's at the right"
    ax.set_title(f"{title}\n{note}" if title else note, fontsize=10)
    return fig
