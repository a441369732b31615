"""Shared figure helpers: saving, the colour-blind-safe palette, length axes whose ticks
never collide, direct labels that never overlap, and the figures' number formats
(:func:`analysis.tables.format_percent` in its ``"figure"`` style, :func:`format_count`,
length ticks), which are :mod:`analysis.tables`' rules: thousands separators, percentages, never ``-0``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import numpy.typing as npt
from matplotlib import rcParams
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.text import Annotation, Text
from matplotlib.ticker import FuncFormatter, Locator, MaxNLocator, NullLocator

from analysis.tables import format_count as format_count  # re-exported: the figures' counts
from analysis.tables import format_length

__all__ = ["save_figure", "OKABE_ITO", "EFFICIENCY_CMAP", "EFFICIENCY_RANGE", "LOG_SPAN", "wants_log_axis"]


def save_figure(
    fig: Figure, name: str, figures_dir: str | Path | None, formats: Sequence[str] = ("png",)
) -> list[Path]:
    """Save ``fig`` as ``figures_dir/name.<fmt>`` for each format; return the paths.

    ``figures_dir=None`` saves nothing (a notebook shows its figures without writing them
    unless a folder is given).  The folder is created when missing.  PNGs are written at
    150 dpi; files are byte-for-byte reproducible (no dates, versions or random SVG ids).

    Examples
    --------
    >>> import tempfile
    >>> from matplotlib.figure import Figure
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     [p.name for p in save_figure(Figure(), "empty", folder, formats=("png", "svg"))]
    ['empty.png', 'empty.svg']
    >>> save_figure(Figure(), "empty", None)
    []
    """
    if figures_dir is None:
        return []
    if isinstance(formats, str):
        formats = [f for f in formats.split(",") if f]
    folder = Path(figures_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        fmt = fmt.strip().lower().lstrip(".")
        path = folder / f"{name}.{fmt}"
        with matplotlib.rc_context({"svg.hashsalt": name}):
            fig.savefig(path, dpi=150, bbox_inches="tight", metadata=_stable_metadata(fmt))
        paths.append(path)
    return paths


def _stable_metadata(fmt: str) -> dict[str, None] | None:
    """Drop creation dates and software versions so saved files are reproducible."""
    if fmt == "png":
        return {"Software": None}
    if fmt == "svg":
        return {"Date": None, "Creator": None}
    if fmt == "pdf":
        return {"CreationDate": None, "Producer": None, "Creator": None}
    return None


# ---------------------------------------------------------------------------- palette
#: The Okabe–Ito colour-blind-safe set, for categories (strategies, methods, marks).
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
#: Neutral grey for reference lines and secondary text.
GREY = "#555555"
#: The continuous colour map (colour-blind safe, perceptually uniform) for efficiencies.
EFFICIENCY_CMAP = "viridis"
#: The efficiency colour scale, fixed (0 to 100 %) so that one colour means one efficiency
#: in every figure and every report.
EFFICIENCY_RANGE = (0.0, 1.0)

#: Lengths spanning more than this ratio (max / min) get a log axis: more than a decade.
#: The one rule of every length axis (:func:`wants_log_axis`).
LOG_SPAN = 10.0


def wants_log_axis(lo: float, hi: float) -> bool:
    """Whether lengths from ``lo`` to ``hi`` span more than a decade (:data:`LOG_SPAN`): a
    log axis, on which the tail and the body both get room.

    Examples
    --------
    >>> wants_log_axis(62, 469), wants_log_axis(1_606, 160_000), wants_log_axis(0, 9)
    (False, True, False)
    """
    return hi / max(lo, 1.0) > LOG_SPAN


def bin_edges(lo: int, hi: int, bins: int, log: bool) -> np.ndarray:
    """Edges of ``bins`` bins covering integer lengths ``lo..hi`` at half-integers (no length
    sits on an edge), log-spaced when ``log``.

    Examples
    --------
    >>> bin_edges(1, 10, 3, log=False).tolist()
    [0.5, 3.5, 7.5, 10.5]
    """
    a, b = lo - 0.5, hi + 0.5
    raw = np.geomspace(max(a, 0.5), b, int(bins) + 1) if log else np.linspace(a, b, int(bins) + 1)
    edges = np.unique(np.floor(raw) + 0.5)
    edges[0], edges[-1] = min(edges[0], a), max(edges[-1], b)
    return np.unique(edges)


# ---------------------------------------------------------------------------- length axes
def _label_width_pt(text: str, size_pt: float) -> float:
    """A generous estimate of a tick label's width (DejaVu Sans digits are 0.64 em)."""
    narrow = sum(text.count(c) for c in ",.")
    return size_pt * (0.66 * (len(text) - narrow) + 0.36 * narrow)


class LengthLocator(Locator):
    """Length ticks that never collide: powers of two on a log axis (every second, third...
    power when the labels would touch), round numbers on a linear one, as many as the axis
    has room for at draw time."""

    def __init__(self, log: bool) -> None:
        self.log = log

    def __call__(self) -> Sequence[float]:
        assert self.axis is not None, "the locator is set on an axis before it is called"
        vmin, vmax = self.axis.get_view_interval()
        return self.tick_values(vmin, vmax)

    def _room(self) -> tuple[float, float]:
        """Axis length and tick label size, in points."""
        # Installed by length_axis on an Axes' x axis, so a real Axis inside a Figure.
        assert isinstance(self.axis, Axis)
        axes, fig = self.axis.axes, self.axis.get_figure(root=True)
        assert fig is not None
        size = FontProperties(size=rcParams["xtick.labelsize"]).get_size_in_points()
        return axes.bbox.width * 72.0 / fig.dpi, size

    def _fits(self, ticks: Sequence[float], vmin: float, vmax: float) -> bool:
        if len(ticks) < 2:
            return True
        length, size = self._room()
        if self.log:
            pos = (np.log(ticks) - np.log(vmin)) / (np.log(vmax) - np.log(vmin)) * length
        else:
            pos = (np.asarray(ticks) - vmin) / (vmax - vmin) * length
        widths = [_label_width_pt(format_length(t), size) for t in ticks]
        return all(
            b - a >= (wa + wb) / 2 + 1.2 * size
            for a, b, wa, wb in zip(pos[:-1], pos[1:], widths[:-1], widths[1:])
        )

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        vmin, vmax = sorted((float(vmin), float(vmax)))
        if self.log:
            vmin = max(vmin, 0.5)
            k0, k1 = int(np.ceil(np.log2(vmin) - 1e-9)), int(np.floor(np.log2(vmax) + 1e-9))
            exps = list(range(k0, k1 + 1))
            if len(exps) < 3:  # a narrow range: powers of two and their 1.5x
                ticks = sorted(
                    t for k in range(k0 - 1, k1 + 1) for t in (2.0**k, 1.5 * 2.0**k) if vmin <= t <= vmax
                )
                if self._fits(ticks, vmin, vmax):
                    return ticks
            for stride in range(1, max(len(exps), 1) + 1):
                ticks = [2.0**k for k in exps if k % stride == 0]
                if self._fits(ticks, vmin, vmax):
                    return ticks
            return [2.0 ** exps[len(exps) // 2]] if exps else []
        for nbins in range(10, 0, -1):
            ticks = [
                t
                for t in MaxNLocator(nbins, steps=[1, 2, 2.5, 5, 10]).tick_values(vmin, vmax)
                if vmin - 1e-9 <= t <= vmax + 1e-9
            ]
            if self._fits(ticks, vmin, vmax):
                return ticks
        return ticks[:1]


def length_axis(ax: Axes, lo: float, hi: float, *, log: bool, label: str = "sample length (tokens)") -> None:
    """The x axis of lengths in tokens: log or linear, ticks that fit, thousands separators."""
    if log:
        ax.set_xscale("log")
        lo = max(lo, 0.5)
    ax.xaxis.set_major_locator(LengthLocator(log))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_length(v)))
    ax.set_xlim(lo, hi)
    if log:
        label = label[:-1] + ", log scale)" if label.endswith(")") else label + " (log scale)"
    ax.set_xlabel(label)


# ---------------------------------------------------------------------------- direct labels
def text_size_pt(fig: Figure, text: str, fontsize: float) -> tuple[float, float]:
    """Width and height in points of ``text`` drawn at ``fontsize`` (measured with Agg)."""
    ((width, height),) = text_sizes_pt(fig, [text], fontsize)
    return width, height


def text_sizes_pt(fig: Figure, texts: Sequence[str], fontsize: float) -> list[tuple[float, float]]:
    """:func:`text_size_pt` of each of ``texts`` (one renderer for all)."""
    # backend_agg ships no stubs and RendererAgg.__init__ is unannotated in matplotlib itself.
    renderer = RendererAgg(  # type: ignore[no-untyped-call]
        int(fig.bbox.width) or 1, int(fig.bbox.height) or 1, fig.dpi
    )
    out = []
    for text in texts:
        probe = Text(0, 0, text, fontsize=fontsize)
        probe.set_figure(fig)
        box = probe.get_window_extent(renderer)
        out.append((box.width * 72.0 / fig.dpi, box.height * 72.0 / fig.dpi))
    return out


def _overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float], pad: float) -> bool:
    return not (a[2] + pad <= b[0] or b[2] + pad <= a[0] or a[3] + pad <= b[1] or b[3] + pad <= a[1])


def _segment_hits_box(
    p: tuple[float, float], q: tuple[float, float], box: tuple[float, float, float, float]
) -> bool:
    """Whether the segment ``p``-``q`` passes through ``box`` (Liang–Barsky clipping)."""
    t0, t1 = 0.0, 1.0
    dx, dy = q[0] - p[0], q[1] - p[1]
    for edge_p, edge_q in (
        (-dx, p[0] - box[0]),
        (dx, box[2] - p[0]),
        (-dy, p[1] - box[1]),
        (dy, box[3] - p[1]),
    ):
        if edge_p == 0:
            if edge_q < 0:
                return False
            continue
        t = edge_q / edge_p
        if edge_p < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return False
    return True


def _segments_cross(
    a: tuple[float, float], b: tuple[float, float], c: tuple[float, float], d: tuple[float, float]
) -> bool:
    def side(p: tuple[float, float], q: tuple[float, float], r: tuple[float, float]) -> float:
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])

    return (side(a, b, c) * side(a, b, d) < 0) and (side(c, d, a) * side(c, d, b) < 0)


def _on_screen(ax: Axes, xs: npt.ArrayLike, ys: npt.ArrayLike, to_pt: float) -> np.ndarray:
    """The finite points ``(xs, ys)`` (data coordinates) of ``ax`` on screen, in points."""
    xy = np.column_stack([np.asarray(xs, float), np.asarray(ys, float)])
    xy = xy[np.isfinite(xy).all(axis=1)]
    return ax.transData.transform(xy) * to_pt if xy.size else np.zeros((0, 2))


def _point_boxes(
    ax: Axes, points: tuple[npt.ArrayLike, npt.ArrayLike] | None, half: float, to_pt: float
) -> list[tuple[float, float, float, float]]:
    """Boxes (points on screen, ``half`` either side) around the finite ``points`` of ``ax``."""
    centres = np.zeros((0, 2)) if points is None else _on_screen(ax, *points, to_pt)
    return [(x - half, y - half, x + half, y + half) for x, y in centres]


def _line_segments(
    ax: Axes, lines: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]], to_pt: float
) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """The segments (points on screen) of the polylines ``lines`` (data coordinates) of
    ``ax`` between consecutive finite vertices."""
    out = []
    for xs, ys in lines:
        screen = _on_screen(ax, xs, ys, to_pt)
        out += [
            ((float(a[0]), float(a[1])), (float(b[0]), float(b[1]))) for a, b in zip(screen[:-1], screen[1:])
        ]
    return out


def _grown(box: tuple[float, float, float, float], pad: float) -> tuple[float, float, float, float]:
    return (box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad)


def place_labels(
    ax: Axes,
    xs: Sequence[float] | npt.NDArray[np.floating[Any]],
    ys: Sequence[float] | npt.NDArray[np.floating[Any]],
    labels: Sequence[str],
    *,
    fontsize: float = 9,
    marker_pt: float = 7.0,
    color: str = "black",
    avoid: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
    lines: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]] = (),
) -> list[Annotation]:
    """Label each point ``(xs[i], ys[i])`` with ``labels[i]`` next to it: the nearest spot
    (sixteen directions, growing distance) that overlaps no other label or point and stays
    inside the axes; a thin leader line joins a label set further off.  Leader lines cross
    no label or other line when that is possible; labels never overlap unless the axes have
    no free spot at all.  ``avoid``: the other points drawn, ``(xs, ys)`` in data
    coordinates, that no label may cover either (a smaller marker: ``marker_pt / 2``);
    ``lines``: the polylines drawn, ``(xs, ys)`` in data coordinates, that no label crosses
    where a spot clear of them is free (else it may: a line under a label is read through
    its translucent box, a point under it is hidden)."""
    fig = ax.get_figure(root=True)
    assert fig is not None, "the axes belong to a figure"
    fig.draw_without_rendering()  # the layout first: positions on screen are then final
    to_pt = 72.0 / fig.dpi
    pts = ax.transData.transform(np.column_stack([xs, ys])) * to_pt
    box = ax.bbox
    inside = (box.x0 * to_pt + 4, box.y0 * to_pt + 4, box.x1 * to_pt - 4, box.y1 * to_pt - 4)
    markers = [(x - marker_pt, y - marker_pt, x + marker_pt, y + marker_pt) for x, y in pts]
    obstacles = [*markers, *_point_boxes(ax, avoid, marker_pt / 2, to_pt)]
    segments = _line_segments(ax, lines, to_pt)
    sizes = text_sizes_pt(fig, labels, fontsize)
    angles = np.deg2rad(np.arange(0, 360, 22.5))
    radii = (11, 18, 26, 38, 52, 70, 95, 125, 160, 200)

    def candidates(i: int) -> Any:  # (offset, alignment, radius, box), nearest first
        (x, y), (w, h) = pts[i], sizes[i]
        for radius in radii:
            for angle in angles:
                dx, dy = np.cos(angle), np.sin(angle)
                ox, oy = radius * dx, radius * dy * 0.8
                sx = 0 if abs(dx) < 0.3 else int(np.sign(dx))
                sy = 0 if abs(dy) < 0.3 else int(np.sign(dy))
                left = x + ox if sx > 0 else x + ox - w if sx < 0 else x + ox - w / 2
                bottom = y + oy if sy > 0 else y + oy - h if sy < 0 else y + oy - h / 2
                cand = (left, bottom, left + w, bottom + h)
                if (
                    inside[0] <= cand[0]
                    and cand[2] <= inside[2]
                    and inside[1] <= cand[1]
                    and cand[3] <= inside[3]
                ):
                    yield (ox, oy), (sx, sy), radius, cand

    # each label's spots clear of the points drawn, and of these the ones no line crosses
    free = [
        [c for c in candidates(i) if not any(_overlaps(c[3], t, 3.0) for t in obstacles)]
        for i in range(len(pts))
    ]
    clear = [
        [c for c in spots if not any(_segment_hits_box(a, b, _grown(c[3], 1.5)) for a, b in segments)]
        for spots in free
    ]

    def plan(order: Sequence[int]) -> tuple[float, dict[int, Any]]:
        """Place the labels in ``order``; the cost counts crossing leaders, then distance."""
        placed: list[tuple[float, float, float, float]] = []
        leaders: list[tuple[tuple[float, float], tuple[float, float]]] = []
        choices, cost = {}, 0.0
        for i in order:
            x, y = pts[i]
            others = [m for j, m in enumerate(markers) if j != i]

            def clean(
                anchor: tuple[float, float],
                radius: float,
                cand: tuple[float, float, float, float],
                x: float = x,
                y: float = y,
                others: list[tuple[float, float, float, float]] = others,
            ) -> bool:
                if any(_segment_hits_box(a, b, cand) for a, b in leaders):
                    return False
                if radius < 18:
                    return True
                return not (
                    any(_segment_hits_box((x, y), anchor, t) for t in (*placed, *others))
                    or any(_segments_cross((x, y), anchor, a, b) for a, b in leaders)
                )

            found = [c for c in clear[i] if not any(_overlaps(c[3], t, 3.0) for t in placed)]
            if not found:  # every spot clear of the lines taken: one across a line
                cost += 500.0
                found = [c for c in free[i] if not any(_overlaps(c[3], t, 3.0) for t in placed)]
            choice = next((c for c in found if clean((x + c[0][0], y + c[0][1]), c[2], c[3])), None)
            if choice is None:
                cost += 1_000.0  # a crossing leader (or, worse, no free spot at all)
                choice = (
                    found[0]
                    if found
                    else (
                        (11.0, 0.0),
                        (1, 0),
                        11,
                        (x + 11, y - sizes[i][1] / 2, x + 11 + sizes[i][0], y + sizes[i][1] / 2),
                    )
                )
                cost += 0.0 if found else 100_000.0
            (ox, oy), _, radius, cand = choice
            cost += radius
            placed.append(cand)
            if radius >= 18:
                leaders.append(((x, y), (x + ox, y + oy)))
            choices[i] = choice
        return cost, choices

    n = len(pts)
    crowding = [
        min((float(np.hypot(*(pts[i] - pts[j]))) for j in range(n) if j != i), default=0.0) for i in range(n)
    ]
    orders = [
        list(range(n)),
        list(range(n))[::-1],
        sorted(range(n), key=lambda i: crowding[i]),
        sorted(range(n), key=lambda i: pts[i][0]),
        sorted(range(n), key=lambda i: -pts[i][1]),
    ]
    _, choices = min((plan(order) for order in orders), key=lambda result: result[0])
    out = []
    for i, (xd, yd, text) in enumerate(zip(xs, ys, labels)):
        (ox, oy), (sx, sy), radius, _ = choices[i]
        ha = "left" if sx > 0 else "right" if sx < 0 else "center"
        va = "bottom" if sy > 0 else "top" if sy < 0 else "center"
        arrow = (
            {"arrowstyle": "-", "color": GREY, "lw": 0.7, "shrinkA": 0, "shrinkB": marker_pt}
            if radius >= 18
            else None
        )
        note = ax.annotate(
            text,
            (xd, yd),
            xytext=(ox, oy),
            textcoords="offset points",
            ha=ha,
            va=va,
            fontsize=fontsize,
            color=color,
            arrowprops=arrow,
            annotation_clip=False,
        )
        note.set_in_layout(False)
        out.append(note)
    return out
