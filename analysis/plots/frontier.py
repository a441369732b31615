"""The padding-mixing frontier: efficiency (or tokens/s) against mixing for every strategy and
knob (an :func:`analysis.frontier` frame), the Pareto frontier drawn, the chosen point and the
case's point labelled.  Strategies keep their Okabe–Ito colours and get a marker each (readable
in grey too); mixing is on a log axis (a heavy tail leaves the best-padded plans a tiny share of
the variance), with a mixing of exactly 0 (sorted batches) drawn on the axis's left edge and
said so in its label, and labelled the proxy it is.  With a gradient-noise model the other axis
is the share of the effective batch a plan keeps (``mixing_axis="effective_batch_share"``), on a
linear axis with its standard errors as bars."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.cbook import pts_to_poststep
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, PercentFormatter

from analysis.plots._common import GREY, format_count, place_labels
from analysis.plots.strategies import STRATEGY_COLORS
from analysis.tables import format_percent

__all__ = ["MIXING_AXIS_LABELS", "plot_frontier"]

_MARKERS = {
    "sorted": "s",
    "random": "X",
    "bucketed": "o",
    "length_grouped": "D",
    "token_budget": "^",
    "packing": "P",
}
_NAMES = {
    "bucketed": "bucketed, optimal edges (K = 1, 2, ...)",
    "length_grouped": "length_grouped (HF Trainer), by grad. accumulation",
    "token_budget": "token_budget (AllenNLP), by padding noise",
}


def _x_floor(frame: pd.DataFrame) -> float:
    """The log axis's left edge: below the least positive mixing but sorted batching's (which is
    ~0 and drawn on the edge), and at least 0.01 %."""
    mixing = frame.loc[frame["strategy"] != "sorted", "mixing"].to_numpy(float)
    positive = mixing[mixing > 0]
    low = float(positive.min()) if positive.size else 1e-3
    return float(max(10.0 ** (float(np.floor(np.log10(low))) - 0.3), 1e-4))


def _error_bars(ax: Any, f: pd.DataFrame, axis: str, se: str) -> None:
    """Horizontal bars of one standard error where ``se`` is positive."""
    has = f[np.isfinite(f[se].to_numpy(float)) & (f[se].to_numpy(float) > 0)]
    if not has.empty:
        ax.errorbar(
            has["mixing"],
            has[axis],
            xerr=has[se],
            fmt="none",
            ecolor=GREY,
            elinewidth=0.8,
            capsize=2,
            zorder=2,
        )


def _share_limits(values: np.ndarray) -> tuple[float, float]:
    """A linear share axis around ``values``: up to at least 100 % (a shuffle), a margin each side."""
    low, high = float(np.nanmin(values)), max(1.0, float(np.nanmax(values)))
    pad = 0.06 * (high - low) or 0.02
    return low - pad, high + pad


#: The mixing axes (the frontier's column) and their labels.
MIXING_AXIS_LABELS = {
    "mixing": "mixing: share of the data's length variance a batch keeps (log; a proxy for gradient mixing)",
    "effective_batch_share": "share of the effective batch kept (B_eff / B, B: mean samples per step)",
}

#: The y axes that are shares, and their labels.
_SHARE_LABELS = {
    "efficiency": "efficiency (useful / padded)",
    "budget_fill": "budget fill (useful / steps x max_tokens)",
}


def plot_frontier(
    frame: pd.DataFrame,
    *,
    axis: str = "efficiency",
    marks: Mapping[str, str] | None = None,
    title: str | None = None,
    mixing_axis: str = "mixing",
) -> Figure:
    """Efficiency (``axis="budget_fill"``: the steps' fill of a token budget;
    ``"tokens_per_s"``: predicted tokens/s; :attr:`analysis.Frontier.axis`) against mixing: a marked curve
    per strategy along its knob, the frontier-edge plans as small rings, the Pareto frontier
    as a black staircase (a black square around its point where one point beats every other),
    and ``marks`` (caption -> a row's ``label``: ``{"chosen": ...,
    "case": ...}``) ringed and named (the first with a star).

    ``mixing_axis`` is the frontier's column drawn against ``axis``: ``"mixing"`` (the length
    proxy, log axis) or ``"effective_batch_share"`` (``B_eff / B`` from a gradient-noise model,
    linear, with bars of ``effective_batch_share_se`` where the frame has it).

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram, frontier
    >>> hist = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 300, 600))
    >>> res = frontier(hist, batch_size=4, rng=np.random.default_rng(0), max_buckets=4, n_lambdas=2,
    ...                simulate_strategies=False)
    >>> fig = plot_frontier(res.frame, marks={"chosen": "optimal edges, K=3", "full shuffle": "random"})
    >>> fig.axes[0].get_xscale(), fig.axes[0].get_ylabel()
    ('log', 'efficiency (useful / padded)')
    """
    if mixing_axis not in MIXING_AXIS_LABELS:
        raise ValueError(f"mixing_axis must be one of {sorted(MIXING_AXIS_LABELS)}, got {mixing_axis!r}")
    for column in (axis, mixing_axis, "strategy", "label", "pareto"):
        if column not in frame.columns:
            raise ValueError(f"the frame has no {column!r} column")
    gradient = mixing_axis != "mixing"
    if gradient:  # drawn where mixing is: the code below reads "mixing"
        frame = frame.assign(mixing=frame[mixing_axis])
    f = frame[np.isfinite(frame[axis].to_numpy(float)) & np.isfinite(frame["mixing"].to_numpy(float))]
    floor = -np.inf if gradient else _x_floor(f)
    fig = Figure(figsize=(7.6, 6.2), layout="constrained")
    ax = fig.subplots()
    ax.set_xscale("linear" if gradient else "log")
    if gradient and f"{mixing_axis}_se" in f.columns:
        _error_bars(ax, f, axis, f"{mixing_axis}_se")
    handles = []
    # the lambda passes' plans and the floor search's: points, not steps along K
    is_frontier = f["label"].str.startswith(("frontier edges", "floor edges"))
    rings = f[is_frontier]
    if not rings.empty:
        ax.scatter(
            np.maximum(rings["mixing"], floor),
            rings[axis],
            s=14,
            facecolors="none",
            edgecolors=STRATEGY_COLORS["bucketed"],
            linewidths=0.7,
            alpha=0.8,
            zorder=2,
        )
        handles.append(
            Line2D(
                [],
                [],
                ls="",
                marker="o",
                mfc="none",
                color=STRATEGY_COLORS["bucketed"],
                label="bucketed, frontier edges (each lambda; floor searches)",
            )
        )
    rest = f[~is_frontier & (f["knob"] != "given")]
    lines: list[tuple[Any, Any]] = []  # the polylines drawn, which the labels keep clear of
    for name, group in rest.groupby("strategy", sort=False):
        g = group.sort_values("knob_value") if group["knob_value"].notna().all() else group
        color, marker = STRATEGY_COLORS.get(str(name), GREY), _MARKERS.get(str(name), "o")
        alone = len(g) == 1
        ax.plot(
            np.maximum(g["mixing"], floor),
            g[axis],
            color=color,
            marker=marker,
            ms=8 if alone else 6,
            lw=1.2,
            mec="black",
            mew=0.4,
            zorder=4 if alone else 3,
            clip_on=False,
        )
        label = _NAMES.get(str(name), str(name))
        if not gradient and str(name) == "sorted" and float(g["mixing"].min()) < floor:
            label += f" (mixing {format_percent(float(g['mixing'].min()), 'figure')}: on the left edge)"
        handles.append(Line2D([], [], color=color, marker=marker, mec="black", mew=0.4, label=label))
        lines.append((np.maximum(g["mixing"], floor), g[axis]))
    pareto = f[f["pareto"]].sort_values("mixing")
    if not pareto.empty:
        px, py = np.maximum(pareto["mixing"], floor).to_numpy(float), pareto[axis].to_numpy(float)
        steps_x, steps_y = pts_to_poststep(px, py)  # the staircase's vertices, as ax.step draws them
        lines.append((steps_x, steps_y))
        if len(pareto) > 1:
            ax.step(px, py, where="post", color="black", lw=1.0, ls="--", zorder=4, alpha=0.8)
            handles.append(Line2D([], [], color="black", ls="--", label="Pareto frontier"))
        else:  # one point beats every other: a staircase of one point draws nothing, so it is ringed
            ax.scatter(
                px,
                py,
                s=260,
                marker="s",
                facecolors="none",
                edgecolors="black",
                lw=1.0,
                zorder=4,
                clip_on=False,
            )
            label = f"Pareto frontier: {pareto['label'].iloc[0]} alone (it beats every other point)"
            handles.append(Line2D([], [], ls="", marker="s", ms=11, mfc="none", color="black", label=label))
    xs, ys, texts = [], [], []
    merged: dict[str, list[str]] = {}
    for text, name in (marks or {}).items():
        merged.setdefault(name, []).append(text)
    for n, (name, captions) in enumerate(merged.items()):
        text = " = ".join(captions)
        hit = f[f["label"] == name]
        if hit.empty and (frame["label"] == name).any():
            continue  # a point with nothing to draw (no mixing: batches of one sample)
        if hit.empty:
            raise ValueError(f"no row labelled {name!r} in the frame")
        x, y = max(float(hit["mixing"].iloc[0]), floor), float(hit[axis].iloc[0])
        ax.scatter(
            [x],
            [y],
            s=150,
            marker="*" if n == 0 else "D",
            facecolors="none",
            edgecolors="black",
            linewidths=1.4,
            zorder=5,
        )
        xs.append(x)
        ys.append(y)
        value = format_count(y) + " tok/s" if axis == "tokens_per_s" else format_percent(y, "figure")
        head = name if text in name else f"{text}: {name}"
        kept = format_percent(float(hit["mixing"].iloc[0]), "figure")
        texts.append(f"{head}\n{value}, {'B_eff / B ' if gradient else 'mixing '}{kept}")
    if gradient:
        ax.set_xlim(*_share_limits(f["mixing"].to_numpy(float)))
    else:
        ax.set_xlim(floor, 1.15)
    if axis in _SHARE_LABELS:
        ax.set_ylim(max(0.0, float(f[axis].min()) - 0.05), 1.0)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        ax.set_ylabel(_SHARE_LABELS[axis])
    else:
        ax.set_ylabel("predicted useful tokens/s")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_count(v)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_percent(v, "figure")))
    ax.set_xlabel(MIXING_AXIS_LABELS[mixing_axis])
    ax.grid(alpha=0.3, which="both")
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    default = "the effective batch" if gradient else "mixing"
    ax.set_title(title or f"Padding against {default}: every strategy and knob")
    if texts:
        shown = f[is_frontier | (f["knob"] != "given")]  # the points drawn (the marks are labelled)
        drawn = (np.maximum(shown["mixing"].to_numpy(float), floor), shown[axis].to_numpy(float))
        for note in place_labels(ax, np.array(xs), np.array(ys), texts, fontsize=8, avoid=drawn, lines=lines):
            note.set_bbox({"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 1.0})
    return fig
