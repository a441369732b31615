"""Figures about bucket edges: efficiency against the number of buckets, edges drawn on the
length histogram, and several edge sets side by side.  Inputs come from
:mod:`analysis.optimize` (sweep frames and :class:`~analysis.optimize.BucketPlan`\\ s); every
function returns a ``Figure``.  Efficiencies are coloured with a colour-blind-safe map and
their axes stop at 100 %; length axes are logarithmic when the lengths span over two decades."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.collections import PolyCollection
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
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

__all__ = [
    "METHOD_COLORS",
    "plot_efficiency_vs_buckets",
    "plot_edges_on_histogram",
    "plot_edge_sets",
    "EdgesOnHistogram",
]

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
    # the legend sits above the random-shuffle line, whose label hangs below it on the right
    bottom = 0.08
    if random_efficiency is not None:
        y0, y1 = ax.get_ylim()
        bottom = max(bottom, (random_efficiency - y0) / (y1 - y0) + 0.03)
    ax.legend(fontsize=8, loc="lower right", bbox_to_anchor=(1.0, bottom))
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


#: Font size of the bucket labels drawn on the histogram.
_LABEL_SIZE = 7.5


def _edges_title(plan: Any, title: str | None) -> str:
    """The title of the edges-on-histogram figure (given or from the plan), and its key."""
    return (
        title
        or f"{plan.method} edges, {plan.n_buckets} buckets: expected efficiency "
        f"{format_percent(plan.efficiency)}"
    ) + "\nper bucket: number, batch size, share of samples, expected efficiency"


def _bin_colors(
    centers: np.ndarray, edges: list[int], effs: np.ndarray, cmap: Colormap, norm: Normalize
) -> list[Any]:
    """Each histogram bin's colour: the efficiency of the bucket its centre falls in."""
    palette = [cmap(norm(e)) if np.isfinite(e) else "#dddddd" for e in effs]  # one per bucket
    return [palette[b] for b in bucket_index(centers, edges)]


def _bucket_span(ax: Axes, edges: list[int], b: int, lo: float, hi: float) -> tuple[float, float]:
    """Bucket ``b``'s middle on screen (in data units) and its width on screen in points,
    both within the axis limits ``lo``..``hi`` (the axes' layout must be final)."""
    x0, x1 = ax.transData.transform([[max(edges[b], lo), 0], [min(edges[b + 1], hi), 0]])[:, 0]
    middle = float(ax.transData.inverted().transform([[(x0 + x1) / 2, 0]])[0, 0])
    fig = ax.get_figure(root=True)
    assert fig is not None
    return middle, float(x1 - x0) * 72.0 / fig.dpi


def _fitting_label(fig: Figure, full: str, short: str, width: float) -> str | None:
    """The bucket label that fits ``width`` points: the full one, else the short one, else none."""
    return next((t for t in (full, short) if text_size_pt(fig, t, _LABEL_SIZE)[0] + 4 <= width), None)


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
    effs = frame["efficiency"].to_numpy(dtype=float)
    colors = _bin_colors(centers, edges, effs, cmap, norm)
    ax.bar(grid[:-1], per_bin, width=np.diff(grid), align="edge", color=colors, lw=0)
    for e in edges[1:-1]:
        ax.axvline(e, color="black", lw=1)
    lo, hi = grid[0] * (0.95 if log else 1), grid[-1] * (1.03 if log else 1)
    _histogram_axes(ax, lo, hi, per_bin, log)
    _colorbar(fig, cmap, norm, ax, pad=0.01, fraction=0.04)
    ax.set_title(_edges_title(plan, title), fontsize=10)
    fig.draw_without_rendering()  # the layout first: bucket widths on screen are then final
    where = blended_transform_factory(ax.transData, ax.transAxes)
    fits = []
    for b in range(k):
        middle, width = _bucket_span(ax, edges, b, lo, hi)
        full = _bucket_label(b + 1, frame.iloc[b], hist.n_samples)
        label = _fitting_label(fig, full, f"#{b + 1}", width)
        if label is not None:
            ax.text(
                middle,
                0.98,
                label,
                transform=where,
                ha="center",
                va="top",
                fontsize=_LABEL_SIZE,
                linespacing=1.15,
            )
        fits.append(label == full)
    if tab is not None:
        _bucket_table(tab, frame, hist.n_samples)
    return fig, all(fits)


def _histogram_axes(ax: Axes, lo: float, hi: float, per_bin: np.ndarray, log: bool) -> None:
    """The axes of the length histogram: length axis, headroom for the labels, count ticks."""
    length_axis(ax, lo, hi, log=log)
    ax.set_ylim(0, per_bin.max() * 1.65)
    ax.set_ylabel("samples per bin" + (" (log-spaced bins)" if log else ""))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 2.5, 5, 10]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_count(v)))


class EdgesOnHistogram:
    """The figure of :func:`plot_edges_on_histogram` kept alive for one histogram: each
    :meth:`show` redraws it for another plan by updating its artists in place (bar colours,
    edge lines, labels, colour scale, title), never building a new figure (the explorer's
    figure: a redraw takes tens of milliseconds where a new figure takes hundreds).

    The layout is fixed once, at construction, and the parts no plan changes (axes, ticks,
    axis labels) are rendered once and kept (:meth:`render`).  A bucket too narrow for its full label gets
    its number only (or nothing); unlike :func:`plot_edges_on_histogram` no table is added
    below (the explorer shows the per-bucket table beside the figure).

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram, optimize_edges
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 100, 400))
    >>> live = EdgesOnHistogram(hist)
    >>> fig = live.figure
    >>> live.show(optimize_edges(hist, 3, batch_size=4))
    >>> live.edge_positions(), live.figure is fig
    ([33, 68], True)
    >>> live.png()[:4]
    b'\\x89PNG'
    """

    def __init__(self, hist: LengthHistogram, *, bins: int = 96, log_x: bool | None = None) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        log = wants_log_axis(hist.min, hist.max) if log_x is None else bool(log_x)
        self.n_samples = hist.n_samples
        self.figure = Figure(figsize=(9, 4.4), dpi=100, layout="constrained")
        # backend_agg ships no stubs: its draw, copy_from_bbox... are unannotated in matplotlib
        self._canvas: Any = FigureCanvasAgg(self.figure)
        self.ax = ax = self.figure.add_subplot()
        grid = bin_edges(hist.min, hist.max, bins, log)
        per_bin = hist.binned(grid)
        self._centers = np.sqrt(grid[:-1] * grid[1:]) if log else (grid[:-1] + grid[1:]) / 2
        # one collection of the bins (one draw call), recoloured by each plan
        self._bars = PolyCollection(
            [[(a, 0.0), (a, h), (z, h), (z, 0.0)] for a, z, h in zip(grid[:-1], grid[1:], per_bin)],
            facecolors="#dddddd",
            linewidths=0,
        )
        ax.add_collection(self._bars, autolim=False)
        self._lo, self._hi = grid[0] * (0.95 if log else 1), grid[-1] * (1.03 if log else 1)
        _histogram_axes(ax, self._lo, self._hi, per_bin, log)
        cmap, norm = _efficiency_colors([])
        self._colorbar = _colorbar(self.figure, cmap, norm, ax, pad=0.01, fraction=0.04)
        self._where = blended_transform_factory(ax.transData, ax.transAxes)
        self._lines: list[Line2D] = []
        self._labels: list[Text] = []
        ax.set_title(_edges_title(None, " "), fontsize=10)
        self.figure.draw_without_rendering()
        self.figure.set_layout_engine("none")  # the layout stays: a redraw only renders
        self._background: Any = None

    def _pools(self, k: int) -> None:
        """At least ``k - 1`` edge lines and ``k`` labels (hidden until used)."""
        while len(self._lines) < k - 1:
            self._lines.append(self.ax.axvline(0, color="black", lw=1, visible=False))
        while len(self._labels) < k:
            self._labels.append(
                self.ax.text(
                    0,
                    0.98,
                    "",
                    transform=self._where,
                    ha="center",
                    va="top",
                    fontsize=_LABEL_SIZE,
                    linespacing=1.15,
                    visible=False,
                )
            )

    def show(self, plan: Any, title: str | None = None) -> None:
        """Draw ``plan`` (a :class:`~analysis.optimize.BucketPlan`): its edges, each bin
        coloured by its bucket's efficiency, the bucket labels and the title."""
        frame = plan.to_frame()
        edges = list(plan.edges)
        k = len(edges) - 1
        effs = frame["efficiency"].to_numpy(dtype=float)
        cmap, norm = _efficiency_colors(list(effs))
        self._colorbar.mappable.set_clim(norm.vmin, norm.vmax)
        self._colorbar.ax.yaxis.set_major_formatter(_PERCENT)  # a new scale resets the formatter
        self._bars.set_facecolor(_bin_colors(self._centers, edges, effs, cmap, norm))
        self._pools(k)
        for i, line in enumerate(self._lines):
            line.set_visible(i < k - 1)
            if i < k - 1:
                line.set_xdata([edges[i + 1], edges[i + 1]])
        for b, text in enumerate(self._labels):
            label = None
            if b < k:
                middle, width = _bucket_span(self.ax, edges, b, self._lo, self._hi)
                full = _bucket_label(b + 1, frame.iloc[b], self.n_samples)
                label = _fitting_label(self.figure, full, f"#{b + 1}", width)
                text.set_x(middle)
                text.set_text(label or "")
            text.set_visible(label is not None)
        self.ax.set_title(_edges_title(plan, title), fontsize=10)

    def edge_positions(self) -> list[int]:
        """The interior edges drawn now."""
        return [int(np.asarray(line.get_xdata())[0]) for line in self._lines if line.get_visible()]

    def labels(self) -> list[str]:
        """The bucket labels drawn now, left to right."""
        return [text.get_text() for text in self._labels if text.get_visible()]

    def _changing(self) -> list[Artist]:
        """The artists a plan changes (and the spines, which the bars would cover)."""
        spines: list[Artist] = list(self.ax.spines.values())
        return [self._bars, *spines, *self._lines, *self._labels, self.ax.title, self._colorbar.ax]

    def render(self) -> np.ndarray:
        """Render the figure now and return its pixels (RGBA, ``(height, width, 4)``).

        The parts no plan changes (axes, ticks, axis labels) are rendered once and kept;
        each call restores them and draws only :meth:`_changing` on top (blitting), which
        gives the pixels of a full draw at a fraction of its cost.
        """
        canvas = self._canvas
        if self._background is None:
            canvas.draw()  # a full draw places the title above the axes...
            title_at = self.ax.title.get_position()
            changing = [a for a in self._changing() if a.get_visible()]
            for artist in changing:
                artist.set_visible(False)
            canvas.draw()
            self._background = canvas.copy_from_bbox(self.figure.bbox)
            for artist in changing:
                artist.set_visible(True)
            self.ax.title.set_position(title_at)  # ...which hidden spines would move
        canvas.restore_region(self._background)
        for artist in self._changing():
            self.figure.draw_artist(artist)
        return np.asarray(canvas.buffer_rgba())

    def png(self) -> bytes:
        """The figure as PNG at 100 dpi (:meth:`render`; fast compression, no software tag)."""
        from matplotlib.image import imsave

        buf = io.BytesIO()
        no_software: Any = {"Software": None}  # None drops the key (the stub wants str values)
        imsave(buf, self.render(), format="png", metadata=no_software, pil_kwargs={"compress_level": 1})
        return buf.getvalue()


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
