"""Figures about bucket edges: efficiency against the number of buckets, edges drawn on the
length histogram, and several edge sets side by side.  Inputs come from
:mod:`analysis.optimize` (sweep frames and :class:`~analysis.optimize.BucketPlan`\\ s); every
function returns a ``Figure``."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, PercentFormatter

from analysis.batching import bucket_index
from analysis.lengths import LengthHistogram

__all__ = ["METHOD_COLORS", "plot_efficiency_vs_buckets", "plot_edges_on_histogram",
           "plot_edge_sets"]

#: One colour per edge-placement method, the same in every figure.
METHOD_COLORS = {
    "optimal": "#2B6CB0", "greedy": "#DD8452", "equal_tokens": "#55A868",
    "equal_count": "#8172B2", "geometric": "#C44E52", "given": "#777777",
}
_METHOD_LABELS = {
    "optimal": "optimal (exact DP)", "greedy": "greedy search (the case)",
    "equal_tokens": "equal tokens (Lhotse, NeMo)", "equal_count": "equal count (fairseq)",
    "geometric": "geometric (tensor2tensor)",
}


def _thousands(v: float, _: object = None) -> str:
    return f"{v / 1000:g}k" if abs(v) >= 1000 else f"{v:g}"


def plot_efficiency_vs_buckets(sweep: pd.DataFrame, *, random_efficiency: float | None = None,
                               sorted_efficiency: float | None = None,
                               recommended: int | None = None, title: str | None = None) -> Figure:
    """Expected efficiency against the number of buckets, one line per method.

    ``sweep`` is a :func:`analysis.sweep_bucket_counts` frame.  Optional horizontal reference
    lines: ``random_efficiency`` (one bucket: a full shuffle) and ``sorted_efficiency`` (a
    bucket per distinct length); ``recommended`` marks a bucket count.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 100, 400))
    >>> from analysis import sweep_bucket_counts
    >>> sweep = sweep_bucket_counts(hist, range(1, 4), ("optimal", "equal_count"), batch_size=4)
    >>> len(plot_efficiency_vs_buckets(sweep).axes)
    1
    """
    fig = Figure(figsize=(7.5, 4.6))
    ax = fig.add_subplot()
    methods = list(dict.fromkeys(sweep["method"]))
    for method in methods:
        rows = sweep[sweep["method"] == method].sort_values("n_buckets")
        best = method == "optimal"
        ax.plot(rows["n_buckets"], rows["efficiency"], marker="o", ms=4 if best else 3,
                lw=2.4 if best else 1.3, color=METHOD_COLORS.get(method, "#777777"),
                ls=(0, (4, 2)) if method == "greedy" else "-",  # often on top of the optimum
                label=_METHOD_LABELS.get(method, method), zorder=4 if method == "greedy" else 3 if best else 2)
    if sorted_efficiency is not None:
        ax.axhline(sorted_efficiency, color="black", lw=1, ls="--", zorder=1)
        ax.annotate(f"sorted (a bucket per length): {sorted_efficiency:.1%}",
                    (1, sorted_efficiency), xytext=(2, -11), textcoords="offset points",
                    fontsize=8)
    if random_efficiency is not None:
        ax.axhline(random_efficiency, color="black", lw=1, ls=":", zorder=1)
        ax.annotate(f"random shuffle (one bucket): {random_efficiency:.1%}",
                    (1, random_efficiency), xytext=(14, -3), textcoords="offset points",
                    fontsize=8, va="top")
    if recommended is not None:
        ax.axvline(recommended, color=METHOD_COLORS["optimal"], lw=1, alpha=0.5)
        eff = sweep[(sweep["method"] == "optimal") & (sweep["n_buckets"] == recommended)]
        if len(eff):
            y = float(eff["efficiency"].iloc[0])
            ax.annotate(f"recommended: {recommended} buckets ({y:.1%})", (recommended, y),
                        xytext=(10, -48), textcoords="offset points", fontsize=8,
                        color=METHOD_COLORS["optimal"],
                        arrowprops={"arrowstyle": "-", "color": METHOD_COLORS["optimal"],
                                    "lw": 0.8})
    ax.set_xlabel("number of buckets")
    ax.set_ylabel("expected efficiency (useful / padded tokens)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.grid(alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, loc="lower right", bbox_to_anchor=(1.0, 0.08))
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_edges_on_histogram(hist: LengthHistogram, plan, *, bins: int = 128,
                            title: str | None = None) -> Figure:
    """The length histogram with ``plan``'s edges drawn and, per bucket, its batch size,
    share of samples and expected efficiency.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 100, 400))
    >>> from analysis import optimize_edges
    >>> fig = plot_edges_on_histogram(hist, optimize_edges(hist, 2, batch_size=4))
    >>> len(fig.axes)  # the histogram and its efficiency colour bar
    2
    """
    fig = Figure(figsize=(9, 4.4))
    ax = fig.add_subplot()
    grid = np.linspace(0, hist.max, bins + 1)
    per_bin = hist.binned(grid)
    frame = plan.to_frame()
    norm = Normalize(vmin=min(0.5, float(np.nanmin(frame["efficiency"]))), vmax=1.0)
    cmap = colormaps["RdYlGn"]
    edges = list(plan.edges)
    centers = (grid[:-1] + grid[1:]) / 2
    which = bucket_index(centers, edges)
    colors = [cmap(norm(frame["efficiency"].iloc[b])) if np.isfinite(frame["efficiency"].iloc[b])
              else "#dddddd" for b in which]
    ax.bar(grid[:-1], per_bin, width=np.diff(grid), align="edge", color=colors, lw=0)
    top = per_bin.max()
    for e in edges[1:-1]:
        ax.axvline(e, color="black", lw=1)
    n = hist.n_samples
    for b, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        row = frame.iloc[b]
        text = f"B={int(row['batch_size'])} · {row['samples'] / n:.0%} · {row['efficiency']:.0%}"
        ax.text((lo + hi) / 2, top * 1.03, text, ha="center", va="bottom", fontsize=7,
                rotation=90)
    ax.set_ylim(0, top * 1.6)
    ax.set_xlim(0, hist.max)
    ax.set_xlabel("length (tokens)")
    ax.set_ylabel(f"samples per {hist.max / bins:,.0f}-token bin")
    ax.xaxis.set_major_formatter(FuncFormatter(_thousands))
    ax.yaxis.set_major_formatter(FuncFormatter(_thousands))
    sm = fig.colorbar(_scalar_mappable(cmap, norm), ax=ax, pad=0.01, fraction=0.04)
    sm.set_label("bucket efficiency")
    ax.set_title((title or f"{plan.method} edges, {plan.n_buckets} buckets: expected efficiency "
                  f"{plan.efficiency:.1%}")
                 + "\nper bucket: batch size · share of samples · expected efficiency", fontsize=10)
    fig.tight_layout()
    return fig


def _scalar_mappable(cmap, norm):
    from matplotlib.cm import ScalarMappable

    sm = ScalarMappable(norm=norm, cmap=cmap)
    sm.set_array([])
    return sm


def plot_edge_sets(plans: Mapping[str, object], *, title: str | None = None) -> Figure:
    """Several edge sets on one length axis: a row per plan, each bucket a bar coloured by
    its expected efficiency, the plan's overall efficiency at the right.

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
    fig = Figure(figsize=(9, 0.55 * len(names) + 1.4))
    ax = fig.add_subplot()
    cmap = colormaps["RdYlGn"]
    effs = [f for p in plans.values() for f in p.to_frame()["efficiency"] if np.isfinite(f)]
    norm = Normalize(vmin=min(0.5, min(effs)), vmax=1.0)
    top = max(p.edges[-1] for p in plans.values())
    for row, name in enumerate(names):
        plan = plans[name]
        frame = plan.to_frame()
        y = len(names) - 1 - row
        for b, (lo, hi) in enumerate(zip(plan.edges[:-1], plan.edges[1:])):
            f = frame["efficiency"].iloc[b]
            ax.barh(y, hi - lo, left=lo, height=0.62,
                    color=cmap(norm(f)) if np.isfinite(f) else "#dddddd",
                    edgecolor="black", lw=0.6)
        ax.text(top * 1.01, y, f"{plan.efficiency:.1%}", va="center", fontsize=9)
    ax.set_yticks(range(len(names)), names[::-1], fontsize=9)
    ax.set_xlim(0, top * 1.09)
    ax.set_xlabel("length (tokens); bars are buckets, coloured by their efficiency; "
                  "overall efficiency at the right")
    ax.xaxis.set_major_formatter(FuncFormatter(_thousands))
    cb = fig.colorbar(_scalar_mappable(cmap, norm), ax=ax, pad=0.01, fraction=0.03)
    cb.set_label("bucket efficiency")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig
