"""Figures about bucket edges: efficiency against the number of buckets, edges drawn on the
length histogram, and several edge sets side by side.  Inputs come from
:mod:`analysis.optimize` (sweep frames and :class:`~analysis.optimize.BucketPlan`\\ s); every
function returns a ``Figure``.  Efficiencies are coloured with a colour-blind-safe map and
their axes stop at 100 %; length axes are logarithmic when the lengths span over two decades."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, PercentFormatter
from matplotlib.transforms import Bbox, blended_transform_factory

from analysis.batching import bucket_index
from analysis.lengths import LengthHistogram
from analysis.plots._common import (
    EFFICIENCY_CMAP,
    OKABE_ITO,
    bin_edges,
    format_count,
    format_percent,
    length_axis,
    text_size_pt,
    wants_log_axis,
)

__all__ = ["METHOD_COLORS", "plot_efficiency_vs_buckets", "plot_edges_on_histogram", "plot_edge_sets"]

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
_PERCENT = PercentFormatter(1.0, decimals=0)


def _efficiency_colors(values: list[float]) -> tuple[Colormap, Normalize]:
    """The efficiency colour map (viridis) from the lowest finite value (at most 50 %) to 100 %."""
    finite = [v for v in values if np.isfinite(v)]
    return colormaps[EFFICIENCY_CMAP], Normalize(vmin=min([0.5, *finite]), vmax=1.0)


def _colorbar(fig: Figure, cmap: Colormap, norm: Normalize, ax: Any, **kw: Any) -> Any:
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, **kw)
    bar.set_label("bucket efficiency")
    bar.ax.yaxis.set_major_formatter(_PERCENT)
    return bar


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
    efficiency axis stops at 100 %.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 100, 400))
    >>> from analysis import sweep_bucket_counts
    >>> sweep = sweep_bucket_counts(hist, range(1, 4), ("optimal", "equal_count"), batch_size=4)
    >>> fig = plot_efficiency_vs_buckets(sweep, chosen=2)
    >>> len(fig.axes), float(fig.axes[0].get_ylim()[1])
    (1, 1.0)
    """
    fig = Figure(figsize=(7.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    methods = list(dict.fromkeys(sweep["method"]))
    for method in methods:
        rows = sweep[sweep["method"] == method].sort_values("n_buckets")
        best = method == "optimal"
        ax.plot(
            rows["n_buckets"],
            rows["efficiency"],
            marker="o",
            ms=4 if best else 3,
            lw=2.4 if best else 1.3,
            color=METHOD_COLORS.get(method, "#777777"),
            ls=(0, (4, 2)) if method == "greedy" else "-",  # often on top of the optimum
            label=_METHOD_LABELS.get(method, method),
            zorder=4 if method == "greedy" else 3 if best else 2,
        )
    if sorted_efficiency is not None:
        ax.axhline(sorted_efficiency, color="black", lw=1, ls="--", zorder=1)
        ax.annotate(
            f"sorted batches: {format_percent(sorted_efficiency)}",
            (0, sorted_efficiency),
            xycoords=("axes fraction", "data"),
            xytext=(4, -3),
            textcoords="offset points",
            fontsize=8,
            va="top",
        )
    if random_efficiency is not None:
        ax.axhline(random_efficiency, color="black", lw=1, ls=":", zorder=1)
        ax.annotate(
            f"random shuffle (one bucket): {format_percent(random_efficiency)}",
            (1, random_efficiency),
            xycoords=("axes fraction", "data"),
            xytext=(-4, -3),
            textcoords="offset points",
            fontsize=8,
            va="top",
            ha="right",
        )
    optimal = sweep[sweep["method"] == "optimal"]
    marks = [(chosen, "this report: K = {k} ({eff})", "-")]
    if recommended is not None and recommended != chosen:
        marks.append((recommended, "the gain rule suggests K = {k} ({eff})", "-."))
    for k, text, style in marks:
        if k is None:
            continue
        row = optimal[optimal["n_buckets"] == k]
        eff = format_percent(float(row["efficiency"].iloc[0])) if len(row) else "n/a"
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
                [float(row["efficiency"].iloc[0])],
                "o",
                ms=11,
                mfc="none",
                color=METHOD_COLORS["optimal"],
                mec=METHOD_COLORS["optimal"],
                mew=1.4,
                zorder=5,
            )
    lows = [float(sweep["efficiency"].min())]
    lows += [e for e in (random_efficiency,) if e is not None]
    ax.set_ylim(max(0.0, min(lows) - 0.05), 1.0)
    ax.set_xlabel("number of buckets")
    ax.set_ylabel("expected efficiency (useful / padded tokens)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_formatter(_PERCENT)
    ax.grid(alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, loc="lower right", bbox_to_anchor=(1.0, 0.08))
    if title:
        ax.set_title(title)
    return fig


def plot_edges_on_histogram(
    hist: LengthHistogram, plan: Any, *, bins: int = 96, log_x: bool | None = None, title: str | None = None
) -> Figure:
    """The length histogram with ``plan``'s edges drawn; per bucket, its number, batch size,
    share of samples and expected efficiency.

    The length axis is logarithmic (log-spaced bins) when the lengths span more than two
    decades (``log_x=None``).  A bucket is labelled on the figure only when it is wide enough
    on screen for its label; when any is not, a table of every bucket is drawn below.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 100, 400))
    >>> from analysis import optimize_edges
    >>> fig = plot_edges_on_histogram(hist, optimize_edges(hist, 2, batch_size=4))
    >>> len(fig.axes)  # the histogram and its efficiency colour bar (no table needed)
    2
    """
    log = wants_log_axis(hist.min, hist.max) if log_x is None else bool(log_x)
    fig, all_labelled = _edges_figure(hist, plan, bins, log, title, table=False)
    if not all_labelled:
        fig, _ = _edges_figure(hist, plan, bins, log, title, table=True)
    return fig


def _bucket_label(number: int, row: pd.Series, n: int) -> str:
    return (
        f"#{number}\nB={int(row['batch_size']):,}\n{format_percent(row['samples'] / n)}"
        f"\n{format_percent(row['efficiency'])}"
    )


def _edges_figure(
    hist: LengthHistogram, plan: Any, bins: int, log: bool, title: str | None, table: bool
) -> tuple[Figure, bool]:
    """The figure, and whether every bucket got its full label."""
    frame = plan.to_frame()
    edges = list(plan.edges)
    k = len(edges) - 1
    height = 4.4 + (0.2 * (k + 1) + 0.3 if table else 0.0)
    fig = Figure(figsize=(9, height), layout="constrained")
    if table:
        ax, tab = fig.subplots(2, 1, height_ratios=[4.4, height - 4.4])
    else:
        ax, tab = fig.add_subplot(), None
    grid = bin_edges(hist.min, hist.max, bins, log)
    per_bin = hist.binned(grid)
    cmap, norm = _efficiency_colors(list(frame["efficiency"]))
    centers = np.sqrt(grid[:-1] * grid[1:]) if log else (grid[:-1] + grid[1:]) / 2
    which = bucket_index(centers, edges)
    effs = frame["efficiency"].to_numpy(dtype=float)
    colors = [cmap(norm(effs[b])) if np.isfinite(effs[b]) else "#dddddd" for b in which]
    ax.bar(grid[:-1], per_bin, width=np.diff(grid), align="edge", color=colors, lw=0)
    for e in edges[1:-1]:
        ax.axvline(e, color="black", lw=1)
    lo, hi = grid[0] * (0.95 if log else 1), grid[-1] * (1.03 if log else 1)
    length_axis(ax, lo, hi, log=log)
    ax.set_ylim(0, per_bin.max() * 1.65)
    ax.set_ylabel("samples per bin" + (" (log-spaced bins)" if log else ""))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 2.5, 5, 10]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_count(v)))
    _colorbar(fig, cmap, norm, ax, pad=0.01, fraction=0.04)
    ax.set_title(
        (
            title
            or f"{plan.method} edges, {plan.n_buckets} buckets: expected efficiency "
            f"{format_percent(plan.efficiency)}"
        )
        + "\nper bucket: number, batch size, share of samples, expected efficiency",
        fontsize=10,
    )
    fig.draw_without_rendering()  # the layout first: bucket widths on screen are then final
    to_pt = 72.0 / fig.dpi
    where = blended_transform_factory(ax.transData, ax.transAxes)
    fits = []
    for b in range(k):
        x0, x1 = ax.transData.transform([[max(edges[b], lo), 0], [min(edges[b + 1], hi), 0]])[:, 0]
        width = (x1 - x0) * to_pt
        full = _bucket_label(b + 1, frame.iloc[b], hist.n_samples)
        short = f"#{b + 1}"
        for text in (full, short):
            if text_size_pt(fig, text, 7.5)[0] + 4 <= width:
                middle = ax.transData.inverted().transform([[(x0 + x1) / 2, 0]])[0, 0]
                ax.text(
                    middle, 0.98, text, transform=where, ha="center", va="top", fontsize=7.5, linespacing=1.15
                )
                break
        fits.append(text_size_pt(fig, full, 7.5)[0] + 4 <= width)
    if tab is not None:
        _bucket_table(tab, frame, hist.n_samples)
    return fig, all(fits)


def _bucket_table(ax: Axes, frame: pd.DataFrame, n: int) -> None:
    """Every bucket as a row: its lengths, batch size, samples and expected efficiency."""
    ax.axis("off")
    rows = [
        [
            f"#{b + 1}",
            f"{int(r['lower_edge']) + 1:,} to {int(r['upper_edge']):,}",
            f"{int(r['batch_size']):,}",
            f"{int(r['samples']):,}",
            format_percent(r["samples"] / n),
            format_percent(r["efficiency"]),
        ]
        for b, (_, r) in enumerate(frame.iterrows())
    ]
    cols = ["bucket", "lengths (tokens)", "batch size", "samples", "share of samples", "expected efficiency"]
    table = ax.table(
        cellText=rows,
        colLabels=cols,
        loc="upper center",
        cellLoc="right",
        colLoc="right",
        bbox=Bbox.from_bounds(0.0, 0.0, 1.0, 1.0),
    )
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    for cell in table.get_celld().values():
        cell.set_linewidth(0.3)


def plot_edge_sets(
    plans: Mapping[str, Any],
    *,
    hist: LengthHistogram | None = None,
    log_x: bool | None = None,
    title: str | None = None,
) -> Figure:
    """Several edge sets on one length axis: a row per plan, each bucket a bar coloured by
    its expected efficiency, the plan's overall efficiency at the right.

    The length axis is logarithmic when the lengths span more than two decades
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
    cmap, norm = _efficiency_colors([f for p in plans.values() for f in p.to_frame()["efficiency"]])
    right = blended_transform_factory(ax.transAxes, ax.transData)
    for row, name in enumerate(names):
        plan = plans[name]
        effs = plan.to_frame()["efficiency"].to_numpy(dtype=float)
        y = len(names) - 1 - row
        for b, (a, z) in enumerate(zip(plan.edges[:-1], plan.edges[1:])):
            a = max(a, left)
            ax.barh(
                y,
                z - a,
                left=a,
                height=0.62,
                color=cmap(norm(effs[b])) if np.isfinite(effs[b]) else "#dddddd",
                edgecolor="black",
                lw=0.6,
            )
        ax.text(1.01, y, format_percent(plan.efficiency), transform=right, va="center", fontsize=9)
    ax.set_yticks(range(len(names)), names[::-1], fontsize=9)
    length_axis(ax, left, top * (1.05 if log else 1.0), log=log, label="length (tokens)")
    _colorbar(fig, cmap, norm, ax, pad=0.07, fraction=0.03)
    note = "bars are buckets, coloured by their expected efficiency; the plan's at the right"
    ax.set_title(f"{title}\n{note}" if title else note, fontsize=10)
    return fig
