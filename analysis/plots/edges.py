"""The length histogram with a plan's bucket edges drawn: each bin coloured by the expected
efficiency of its bucket (one fixed scale, 0 to 100 %), each edge's value printed above the
axes, each bucket labelled with its number, batch size, share of samples and efficiency.
One implementation, :class:`EdgesOnHistogram`, serves both faces: the figure
:func:`plot_edges_on_histogram` returns (notebook 03, the report) and the explorer's live
figure, redrawn in place for every plan.  Also the efficiency colour scale the bucket
figures share."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.collections import PolyCollection
from matplotlib.colorbar import Colorbar
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.table import Cell
from matplotlib.text import Annotation, Text
from matplotlib.ticker import FuncFormatter, MaxNLocator, PercentFormatter
from matplotlib.transforms import Bbox, blended_transform_factory

from analysis.batching import bucket_index
from analysis.lengths import LengthHistogram
from analysis.optimize import BucketPlan
from analysis.plots._common import (
    EFFICIENCY_CMAP,
    EFFICIENCY_RANGE,
    bin_edges,
    format_count,
    length_axis,
    text_size_pt,
    text_sizes_pt,
    wants_log_axis,
)
from analysis.tables import format_length, format_percent

__all__ = ["plot_edges_on_histogram", "EdgesOnHistogram"]

PERCENT = PercentFormatter(1.0, decimals=0)


def efficiency_colors() -> tuple[Colormap, Normalize]:
    """The efficiency colour map (viridis) on its fixed scale, :data:`EFFICIENCY_RANGE`: the
    same colour is the same efficiency in every figure and every report."""
    return colormaps[EFFICIENCY_CMAP], Normalize(*EFFICIENCY_RANGE)


def colorbar(fig: Figure, cmap: Colormap, norm: Normalize, ax: Axes, **kw: Any) -> Colorbar:
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, **kw)
    bar.set_label("bucket efficiency")
    bar.ax.yaxis.set_major_formatter(PERCENT)
    return bar


def plot_edges_on_histogram(
    hist: LengthHistogram,
    plan: BucketPlan,
    *,
    bins: int = 96,
    log_x: bool | None = None,
    title: str | None = None,
) -> Figure:
    """The length histogram with ``plan``'s edges drawn and their values printed above the
    axes; per bucket, its number, batch size, share of samples and expected efficiency.

    The length axis is logarithmic (log-spaced bins) when the lengths span more than a
    decade (``log_x=None``).  Bins are coloured on the fixed 0 to 100 % efficiency scale.
    Edge values sit in up to two rows, never overlapping; a bucket is labelled only when it
    is wide enough on screen for its label.  When a bucket label or an edge value has no
    room, a table of every bucket (its lengths, so every edge) is drawn below.  The
    figure is an :class:`EdgesOnHistogram` for saving (its layout not fixed), shown once.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram, optimize_edges
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 100, 400))
    >>> fig = plot_edges_on_histogram(hist, optimize_edges(hist, 2, batch_size=4))
    >>> len(fig.axes)  # the histogram and its efficiency colour bar (no table needed)
    2
    >>> [t.get_text() for t in fig.axes[0].texts if t.get_text()[0] != "#"]  # the edge
    ['50']
    """
    drawn = EdgesOnHistogram(hist, bins=bins, log_x=log_x, live=False)
    drawn.show(plan, title)
    if not drawn.all_labelled:
        drawn = EdgesOnHistogram(hist, bins=bins, log_x=log_x, live=False, table_rows=len(plan.edges) - 1)
        drawn.show(plan, title)
    return drawn.figure


def _bucket_label(number: int, row: pd.Series, n: int) -> str:
    return (
        f"#{number}\nB={int(row['batch_size']):,}\n{format_percent(row['samples'] / n, 'figure')}"
        f"\n{format_percent(row['efficiency'], 'figure')}"
    )


#: Font size of the bucket labels drawn on the histogram, and of the edge values above it.
_LABEL_SIZE = 7.5
#: The edge values' rows above the axes: offset of the first from the top spine, the
#: distance between rows and the least gap between two values of a row (points).
_VALUE_OFFSET, _VALUE_ROW, _VALUE_GAP, _VALUE_ROWS = 3.0, 10.0, 4.0, 2
#: The title's distance from the axes: room for the rows of edge values.
_TITLE_PAD = _VALUE_OFFSET + _VALUE_ROWS * _VALUE_ROW + 2.0


def _edges_title(plan: BucketPlan | None, title: str | None) -> str:
    """The title of the edges-on-histogram figure (given or from the plan), and its key."""
    if not title:
        assert plan is not None  # the live figure's first title is a placeholder
        title = (
            f"{plan.method} edges, {plan.n_buckets} buckets: expected efficiency "
            f"{format_percent(plan.efficiency, 'figure')}"
        )
    return (
        title + "\nper bucket: number, batch size, share of samples, expected efficiency; "
        "edges in tokens above"
    )


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


def _histogram_axes(ax: Axes, lo: float, hi: float, per_bin: np.ndarray, log: bool) -> None:
    """The axes of the length histogram: length axis, headroom for the labels, count ticks."""
    length_axis(ax, lo, hi, log=log)
    ax.set_ylim(0, per_bin.max() * 1.65)
    ax.set_ylabel("samples per bin" + (" (log-spaced bins)" if log else ""))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 2.5, 5, 10]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_count(v)))


class EdgesOnHistogram:
    """The edges-on-histogram figure of one histogram: :meth:`show` draws a plan by updating
    the figure's artists in place (bar colours, edge lines, labels, colour scale, title).

    Two uses.  The explorer's live figure (``live=True``, the default) is kept and redrawn
    for every plan, never rebuilt (a redraw takes tens of milliseconds where a new figure
    takes hundreds): its layout is fixed once, at construction, at 100 dpi, and the parts no
    plan changes (axes, ticks, axis labels) are rendered once and kept (:meth:`render`).
    The figure :func:`plot_edges_on_histogram` returns (``live=False``) keeps its
    constrained layout (for saving; default dpi) and may have room for a table of
    ``table_rows`` buckets below the histogram, drawn by :meth:`show`.  A bucket too narrow
    for its full label gets its number only (or nothing); ``all_labelled`` says whether
    every bucket of the plan shown got its full label.

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

    def __init__(
        self,
        hist: LengthHistogram,
        *,
        bins: int = 96,
        log_x: bool | None = None,
        live: bool = True,
        table_rows: int = 0,
    ) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        log = wants_log_axis(hist.min, hist.max) if log_x is None else bool(log_x)
        self.n_samples = hist.n_samples
        self.live = bool(live)
        self.all_labelled = True
        height = 4.4 + (0.2 * (table_rows + 1) + 0.3 if table_rows else 0.0)
        self.figure = Figure(figsize=(9, height), dpi=100 if live else None, layout="constrained")
        # backend_agg ships no stubs: its draw, copy_from_bbox... are unannotated in matplotlib
        self._canvas: Any = FigureCanvasAgg(self.figure) if live else None
        self._table: Axes | None = None
        if table_rows:
            self.ax, self._table = self.figure.subplots(2, 1, height_ratios=[4.4, height - 4.4])
        else:
            self.ax = self.figure.add_subplot()
        ax = self.ax
        grid = bin_edges(hist.min, hist.max, bins, log)
        per_bin = hist.binned(grid)
        self._centers = np.sqrt(grid[:-1] * grid[1:]) if log else (grid[:-1] + grid[1:]) / 2
        self._bars: list[Artist]
        if live:  # one collection of the bins (one draw call), recoloured by each plan
            bars = PolyCollection(
                [[(a, 0.0), (a, h), (z, h), (z, 0.0)] for a, z, h in zip(grid[:-1], grid[1:], per_bin)],
                facecolors="#dddddd",
                linewidths=0,
            )
            ax.add_collection(bars, autolim=False)
            self._bars = [bars]
        else:  # a bar per bin: the same pixels, and a saved SVG lists every bin as its own path
            self._bars = list(
                ax.bar(grid[:-1], per_bin, width=np.diff(grid), align="edge", color="#dddddd", lw=0)
            )
        self._lo, self._hi = grid[0] * (0.95 if log else 1), grid[-1] * (1.03 if log else 1)
        _histogram_axes(ax, self._lo, self._hi, per_bin, log)
        cmap, norm = efficiency_colors()
        self.colorbar = colorbar(self.figure, cmap, norm, ax, pad=0.01, fraction=0.04)
        self._where = blended_transform_factory(ax.transData, ax.transAxes)
        self._lines: list[Line2D] = []
        self._labels: list[Text] = []
        self._values: list[Annotation] = []
        self._widths: dict[str, float] = {}  # an edge value's width in points, by its text
        ax.set_title(_edges_title(None, " "), fontsize=10, pad=_TITLE_PAD)
        if live:
            self.figure.draw_without_rendering()
            self.figure.set_layout_engine("none")  # the layout stays: a redraw only renders
        self._background: Any = None

    def _pools(self, k: int) -> None:
        """At least ``k - 1`` edge lines and values and ``k`` labels (hidden until used)."""
        while len(self._lines) < k - 1:
            self._lines.append(self.ax.axvline(0, color="black", lw=1, visible=False))
            value = self.ax.annotate(
                "",
                (0, 1),
                xycoords=self._where,
                xytext=(0, _VALUE_OFFSET),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=_LABEL_SIZE,
                annotation_clip=False,
                visible=False,
            )
            value.set_in_layout(False)  # the title's pad keeps the room: live and saved alike
            self._values.append(value)
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

    def show(self, plan: BucketPlan, title: str | None = None) -> None:
        """Draw ``plan``: its edges, each bin coloured by its bucket's efficiency, the bucket
        labels, the title (given, or from the plan) and, where there is room, the table."""
        frame = plan.to_frame()
        edges = list(plan.edges)
        k = len(edges) - 1
        effs = frame["efficiency"].to_numpy(dtype=float)
        cmap, norm = efficiency_colors()
        colors = _bin_colors(self._centers, edges, effs, cmap, norm)
        if self.live:
            self._bars[0].set(facecolor=colors)
        else:
            for patch, color in zip(self._bars, colors, strict=True):
                patch.set(facecolor=color)
        self._pools(k)
        for i, line in enumerate(self._lines):
            line.set_visible(i < k - 1)
            if i < k - 1:
                line.set_xdata([edges[i + 1], edges[i + 1]])
        self.ax.set_title(_edges_title(plan, title), fontsize=10, pad=_TITLE_PAD)
        if not self.live:
            self.figure.draw_without_rendering()  # the layout first: bucket widths are then final
        fits = []
        for b, text in enumerate(self._labels):
            label = None
            if b < k:
                middle, width = _bucket_span(self.ax, edges, b, self._lo, self._hi)
                full = _bucket_label(b + 1, frame.iloc[b], self.n_samples)
                label = _fitting_label(self.figure, full, f"#{b + 1}", width)
                text.set_x(middle)
                text.set_text(label or "")
                fits.append(label == full)
            text.set_visible(label is not None)
        values_shown = self._show_values(edges[1:-1])
        self.all_labelled = all(fits) and values_shown
        if self._table is not None:
            for table in list(self._table.tables):
                table.remove()
            _bucket_table(self._table, frame, self.n_samples)

    def _show_values(self, inner: list[int]) -> bool:
        """Print each interior edge's value above the axes, centred on its line: in the first
        row where it keeps a gap to the value before it; a value with no room in any row is
        left out.  Whether every value is shown."""
        fig = self.figure
        to_pt = 72.0 / fig.dpi
        ends = [-np.inf] * _VALUE_ROWS  # where each row's last value ends, in points
        shown = True
        for i, note in enumerate(self._values):
            if i >= len(inner):
                note.set_visible(False)
                continue
            text = format_length(inner[i])
            x = float(self.ax.transData.transform([[inner[i], 0]])[0, 0]) * to_pt
            if text not in self._widths:  # measured once: a redraw of the explorer stays fast
                self._widths[text] = text_size_pt(fig, text, _LABEL_SIZE)[0]
            width = self._widths[text]
            row = next((r for r in range(_VALUE_ROWS) if x - width / 2 >= ends[r] + _VALUE_GAP), None)
            note.set_visible(row is not None)
            if row is None:
                shown = False
                continue
            ends[row] = x + width / 2
            note.set_text(text)
            note.xy = (inner[i], 1.0)
            note.xyann = (0.0, _VALUE_OFFSET + row * _VALUE_ROW)
        return shown

    def edge_values(self) -> list[str]:
        """The edge values printed now, left to right."""
        return [note.get_text() for note in self._values if note.get_visible()]

    def edge_positions(self) -> list[int]:
        """The interior edges drawn now."""
        return [int(np.asarray(line.get_xdata())[0]) for line in self._lines if line.get_visible()]

    def labels(self) -> list[str]:
        """The bucket labels drawn now, left to right."""
        return [text.get_text() for text in self._labels if text.get_visible()]

    def _changing(self) -> list[Artist]:
        """The artists a plan changes (and the spines, which the bars would cover)."""
        spines: list[Artist] = list(self.ax.spines.values())
        return [*self._bars, *spines, *self._lines, *self._labels, *self._values, self.ax.title]

    def render(self) -> np.ndarray:
        """Render the figure now and return its pixels (RGBA, ``(height, width, 4)``).

        The parts no plan changes (axes, ticks, axis labels) are rendered once and kept;
        each call restores them and draws only :meth:`_changing` on top (blitting), which
        gives the pixels of a full draw at a fraction of its cost.
        """
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        if self._canvas is None:
            self._canvas = FigureCanvasAgg(self.figure)
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


# The table's font size at most and at least, and the least room either side of a cell's text
# (points; below the least size, on axes too narrow for any readable table, texts may cross).
_TABLE_SIZE = 8.0
_TABLE_SIZE_MIN = 4.0
_TABLE_MARGIN = 3.0


def _table_layout(ax: Axes, cells: list[list[str]]) -> tuple[float, list[float]]:
    """The font size and column widths (shares of ``ax``'s width) at which every text of
    ``cells`` (rows of strings) fits its column with ``_TABLE_MARGIN`` points either side
    (besides the cell's own pad, ``Cell.PAD`` of its width on the aligned side): each column
    takes a share of the room as its longest text needs, at ``_TABLE_SIZE`` where the texts fit
    the axes' width, else at a font smaller in proportion."""
    fig = ax.get_figure(root=True)
    assert fig is not None, "the axes belong to a figure"
    room = ax.bbox.width * 72.0 / fig.dpi
    columns = [list(column) for column in zip(*cells, strict=True)]
    longest = [max(w for w, _ in text_sizes_pt(fig, column, _TABLE_SIZE)) for column in columns]
    margins = 2.0 * _TABLE_MARGIN * len(columns)
    fits = _TABLE_SIZE * (room * (1.0 - Cell.PAD) - margins) / sum(longest)
    fontsize = min(_TABLE_SIZE, max(_TABLE_SIZE_MIN, fits))
    need = [(w * fontsize / _TABLE_SIZE + 2.0 * _TABLE_MARGIN) / (1.0 - Cell.PAD) for w in longest]
    return fontsize, [w / sum(need) for w in need]


def _bucket_table(ax: Axes, frame: pd.DataFrame, n: int) -> None:
    """Every bucket as a row: its lengths, batch size, samples and expected efficiency (each
    column as wide as its longest text, the font smaller where the axes hold less: see
    :func:`_table_layout`)."""
    ax.axis("off")
    rows = [
        [
            f"#{b + 1}",
            f"{int(r['lower_edge']) + 1:,} to {int(r['upper_edge']):,}",
            f"{int(r['batch_size']):,}",
            f"{int(r['samples']):,}",
            format_percent(r["samples"] / n, "figure"),
            format_percent(r["efficiency"], "figure"),
        ]
        for b, (_, r) in enumerate(frame.iterrows())
    ]
    cols = ["bucket", "lengths (tokens)", "batch size", "samples", "share of samples", "expected efficiency"]
    fontsize, widths = _table_layout(ax, [cols, *rows])
    table = ax.table(
        cellText=rows,
        colLabels=cols,
        colWidths=widths,
        loc="upper center",
        cellLoc="right",
        colLoc="right",
        bbox=Bbox.from_bounds(0.0, 0.0, 1.0, 1.0),
    )
    table.auto_set_font_size(False)
    table.set_fontsize(fontsize)
    for cell in table.get_celld().values():
        cell.set_linewidth(0.3)
