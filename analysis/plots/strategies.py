"""Figures comparing batching strategies (from :func:`analysis.compare_strategies` tables and
:func:`analysis.simulate` results).  Every function returns a ``Figure``; no computation here
beyond picking columns.  Strategies keep one Okabe–Ito colour each; efficiency axes stop at
100 %; a cut axis says so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.ticker import FuncFormatter, MaxNLocator, PercentFormatter

from analysis.plots._common import GREY, OKABE_ITO, format_count
from analysis.tables import format_percent

if TYPE_CHECKING:
    from analysis.simulation.epochs import SimulationResult

__all__ = ["plot_strategy_bars", "plot_randomness", "plot_padded_per_step"]

#: One colour per strategy (Okabe–Ito), the same in every figure (shaped like
#: plots.buckets.METHOD_COLORS on purpose: a palette per vocabulary, not one rule written twice).
STRATEGY_COLORS = {
    "sorted": OKABE_ITO["blue"],
    "random": OKABE_ITO["vermillion"],
    "bucketed": OKABE_ITO["green"],
    "length_grouped": OKABE_ITO["purple"],
    "token_budget": OKABE_ITO["orange"],
    "packing": OKABE_ITO["sky_blue"],
    "packing_bfd": OKABE_ITO["black"],
    "packing_first_fit": OKABE_ITO["yellow"],
    "packing_next_fit": "#999999",
}
#: Columns that are shares (shown as percentages, axes capped at 100 %).
_SHARES = {"efficiency", "composition_repeat"}
_LABELS = {
    "efficiency": "efficiency (useful / padded)",
    "steps": "optimizer steps per epoch",
    "predicted_tokens_per_s": "predicted useful tokens/s",
    "within_batch_cv": "spread: length CV inside a batch\n(higher = more varied lengths)",
    "lag1_autocorr": "lag-1 autocorrelation of step\nmean length (0 = no order pattern)",
    "composition_repeat": "batches repeated from earlier\nepochs (0 = fresh batches)",
    "tokens_per_step_cv": "CV of useful tokens per step",
    "straggler_factor": "straggler factor\n(slowest rank / mean rank)",
}


def _color(name: str) -> str:
    return STRATEGY_COLORS.get(name, "#777777")


def _value_text(column: str, value: float) -> str:
    """A bar's value: percentages for shares, integers for counts, 3 decimals otherwise."""
    if not np.isfinite(value):
        return "n/a"
    if column in _SHARES:
        return format_percent(value, "figure")
    if column in ("steps", "predicted_tokens_per_s", "batches"):
        return format_count(value)
    text = f"{value:.3f}"
    return "0.000" if float(text) == 0 else text


def _bars(ax: Axes, table: pd.DataFrame, column: str) -> None:
    """Horizontal bars of ``column`` per strategy, values written at the bar ends (inside
    the bar when a share is too close to 100 % to write beyond it)."""
    names = list(table.index)
    values = table[column].to_numpy(dtype=float)
    y = np.arange(len(names))[::-1]
    ax.barh(y, np.nan_to_num(values), color=[_color(n) for n in names], height=0.7)
    ax.set_yticks(y, names)
    finite = values[np.isfinite(values)]
    top = float(np.max(np.abs(finite))) if finite.size and np.max(np.abs(finite)) > 0 else 1.0
    share = column in _SHARES
    right = 1.0 if share else top * 1.3
    for yi, v in zip(y, values):
        text = _value_text(column, v)
        v = v if np.isfinite(v) else 0.0
        inside = share and v > 0.8
        ax.text(
            v - 0.01 if inside else max(v, 0.0) + 0.01 * right,
            yi,
            text,
            va="center",
            ha="right" if inside else "left",
            fontsize=8,
            color="white" if inside else "black",
        )
    low = min(0.0, float(finite.min()) * 1.2) if finite.size else 0.0
    ax.set_xlim(low, right)
    ax.set_xlabel(_LABELS.get(column, column))
    ax.xaxis.set_major_locator(MaxNLocator(4))
    if share:
        ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    elif top >= 10_000:
        ax.xaxis.set_major_formatter(FuncFormatter(_compact))
    else:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{round(v, 6) + 0:,g}"))
    if not finite.size:
        ax.text(
            0.5,
            0.5,
            "not measured in this run",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=9,
            color=GREY,
        )
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


def _bar_panels(table: pd.DataFrame, columns: Sequence[str]) -> tuple[Figure, list[tuple[Axes, str]]]:
    """A figure of one bar panel (:func:`_bars`) per column of ``table`` (those it has), side
    by side on one strategy axis, and each panel with its column."""
    shown = [c for c in columns if c in table.columns]
    if not shown:
        raise ValueError("none of the requested columns is in the table")
    fig = Figure(figsize=(4.2 * len(shown), 0.45 * len(table) + 1.6), layout="constrained")
    axes = fig.subplots(1, len(shown), sharey=True, squeeze=False)[0]
    engine = fig.get_layout_engine()
    assert isinstance(engine, ConstrainedLayoutEngine)  # layout="constrained" above
    engine.set(wspace=0.06)
    panels = list(zip(axes, shown))
    for ax, column in panels:
        _bars(ax, table, column)
    return fig, panels


def plot_strategy_bars(
    table: pd.DataFrame,
    columns: Sequence[str] = ("efficiency", "steps", "predicted_tokens_per_s"),
    *,
    title: str | None = None,
) -> Figure:
    """One bar panel per column of a :func:`~analysis.compare_strategies` table.

    Columns missing from ``table`` are skipped.  In the efficiency panel, a black tick marks
    the exact ``expected_efficiency`` where the table has one.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import compare_strategies
    >>> lengths = np.random.default_rng(0).integers(1, 100, 400)
    >>> table = compare_strategies(lengths, rng=np.random.default_rng(0), edges=[0, 50, 99],
    ...                            batch_size=4, epochs=1)
    >>> len(plot_strategy_bars(table).axes)
    2
    """
    fig, panels = _bar_panels(table, columns)
    for ax, column in panels:
        if column == "efficiency" and "expected_efficiency" in table.columns:
            y = np.arange(len(table))[::-1]
            exp = table["expected_efficiency"].to_numpy(dtype=float)
            ok = np.isfinite(exp)
            ax.scatter(exp[ok], y[ok], marker="|", s=300, color="black", zorder=3)
            if ok.any():
                ax.set_xlabel(_LABELS["efficiency"] + "\n| = exact expectation")
    fig.suptitle(title or "Batching strategies: padding and steps per epoch")
    return fig


def plot_randomness(
    table: pd.DataFrame,
    columns: Sequence[str] = ("within_batch_cv", "lag1_autocorr", "composition_repeat"),
    *,
    title: str | None = None,
) -> Figure:
    """The randomness metrics of a :func:`~analysis.compare_strategies` table, one panel each.

    What a strategy gives up for its padding: similar-length batches (low spread, the length CV
    inside a batch),
    a length pattern in the batch order (autocorrelation), the same batches every epoch.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import compare_strategies
    >>> table = compare_strategies(np.random.default_rng(0).integers(1, 100, 400), edges=[0, 50, 99],
    ...                            rng=np.random.default_rng(0), batch_size=4, epochs=1)
    >>> len(plot_randomness(table).axes)
    3
    """
    fig, panels = _bar_panels(table, columns)
    for ax, _ in panels:
        ax.axvline(0, color="black", lw=0.8)
    fig.suptitle(title or "What each strategy keeps of a random shuffle")
    return fig


#: At most this many segments per panel: consecutive steps beyond it are merged (their
#: tokens summed, so the shaded area stays the padding).
_MAX_SEGMENTS = 1_500


def _step_tokens(res: SimulationResult, epoch: int) -> pd.DataFrame:
    """Useful and padded tokens of each optimizer step of ``epoch`` (all ranks summed)."""
    return res.batches[res.batches["epoch"] == epoch].groupby("step")[["useful", "padded"]].sum()


def plot_padded_per_step(
    results: Mapping[str, SimulationResult], *, steps: int = 150, epoch: int = 1, title: str | None = None
) -> Figure:
    """The padding of each optimizer step, compared at equal compute across strategies.

    ``results`` maps a label to a :class:`~analysis.simulate.SimulationResult`; one panel
    each.  A step is drawn as wide as its padded tokens (x: padded tokens since the start of
    ``epoch``) and as high as its padding share (padding / padded tokens), so strategies
    whose steps differ in size (a fixed batch size beside a token budget) are compared like
    with like: every panel spans the same padded tokens, and the shaded area is the padding
    spent there.  The span is the most padded tokens any strategy spends in its first
    ``steps`` steps (a strategy whose epoch ends sooner stops short); the dashed line is
    the whole epoch's padding share (``1 - efficiency``).  Beyond :data:`_MAX_SEGMENTS`
    steps in a panel, consecutive steps are merged (tokens summed), as its title says.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import simulate
    >>> lengths = np.random.default_rng(0).integers(1, 100, 400)
    >>> results = {name: simulate(lengths, name, rng=np.random.default_rng(0), batch_size=4)
    ...            for name in ("sorted", "random")}
    >>> fig = plot_padded_per_step(results)
    >>> len(fig.axes), [float(v) for v in fig.axes[0].get_ylim()]
    (2, [0.0, 1.0])
    """
    if not results:
        raise ValueError("results is empty")
    tokens = {label: _step_tokens(res, epoch) for label, res in results.items()}
    if any(t.empty for t in tokens.values()):
        raise ValueError(f"a result has no epoch {epoch}")
    span = max(float(t["padded"].iloc[:steps].sum()) for t in tokens.values())
    fig = Figure(figsize=(10, 1.9 * len(results) + 0.9), layout="constrained")
    axes = fig.subplots(len(results), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    for ax, (label, res) in zip(axes, results.items()):
        per_step = tokens[label]
        starts = np.concatenate([[0.0], np.cumsum(per_step["padded"].to_numpy(dtype=float))[:-1]])
        shown = per_step[starts < span]
        merge = max(1, -(-len(shown) // _MAX_SEGMENTS))  # steps per segment
        groups = shown.groupby(np.arange(len(shown)) // merge).sum()
        useful, padded = groups["useful"].to_numpy(dtype=float), groups["padded"].to_numpy(dtype=float)
        share = np.divide(padded - useful, padded, out=np.zeros_like(padded), where=padded > 0)
        color = _color(res.strategy)
        ax.stairs(
            share,
            np.concatenate([[0.0], np.cumsum(padded)]),
            fill=True,
            facecolor=to_rgba(color, 0.35),
            edgecolor=color,
            lw=0.8,
        )
        epoch_share = 1 - float(per_step["useful"].sum()) / float(per_step["padded"].sum())
        ax.axhline(
            epoch_share,
            ls="--",
            color="black",
            lw=1,
            label=f"epoch {epoch}: {format_percent(epoch_share, 'figure')} padding (1 − efficiency)",
        )
        merged = f", {merge:,} steps per segment" if merge > 1 else ""
        ax.set_title(
            f"{label}: {len(shown):,} of {len(per_step):,} steps, "
            f"{format_count(per_step['padded'].mean())} padded tokens per step on average{merged}",
            loc="left",
            fontsize=10,
        )
        ax.set_ylabel("padding share\nof the step")
        ax.legend(loc="upper right", fontsize=8, framealpha=0.9)
        ax.grid(alpha=0.3)
    axes[0].set_ylim(0, 1)
    axes[0].set_xlim(0, span)
    axes[0].yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    axes[-1].xaxis.set_major_formatter(FuncFormatter(_compact))
    axes[-1].set_xlabel(
        f"padded tokens since the start of epoch {epoch} (each step as wide as its padded tokens)"
    )
    fig.suptitle(
        title
        or "Padding per step at equal compute: every panel spans the same padded tokens,\n"
        "the shaded area is the padding spent on them"
    )
    return fig


def _compact(value: float, _: object = None) -> str:
    """Counts on an axis: ``0``, ``800``, ``8k``, ``25k``, ``1.2M`` (thousands from 1,000 on, so
    an axis never shows ``8,000`` beside ``16k``).

    Examples
    --------
    >>> [_compact(v) for v in (0, 800, 8_000, 16_000, 1_500, 1.2e6)]
    ['0', '800', '8k', '16k', '1.5k', '1.2M']
    """
    if abs(value) >= 1e6:
        return f"{value / 1e6:,.3g}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:,g}k"
    return format_count(value)
