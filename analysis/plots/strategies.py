"""Figures comparing batching strategies (from :func:`analysis.compare_strategies` tables and
:func:`analysis.simulate` results).  Every function returns a ``Figure``; no computation here
beyond picking columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

__all__ = ["plot_strategy_bars", "plot_randomness", "plot_tradeoff", "plot_padded_per_step"]

#: One colour per strategy, the same in every figure.
STRATEGY_COLORS = {
    "sorted": "#4C72B0", "random": "#C44E52", "bucketed": "#55A868",
    "length_grouped": "#8172B2", "token_budget": "#CCB974", "packing": "#64B5CD",
}
_LABELS = {
    "efficiency": "efficiency (useful / padded)",
    "steps": "optimizer steps per epoch",
    "predicted_tokens_per_s": "predicted useful tokens/s",
    "within_batch_cv": "length CV inside a batch\n(higher = more mixed batches)",
    "lag1_autocorr": "lag-1 autocorrelation of batch\nmean length (0 = no order pattern)",
    "composition_repeat": "batches repeated from earlier\nepochs (0 = fresh batches)",
    "tokens_per_step_cv": "CV of useful tokens per step",
    "straggler_factor": "straggler factor\n(slowest rank / mean rank)",
}


def _color(name: str) -> str:
    return STRATEGY_COLORS.get(name, "#777777")


def _bars(ax, table: pd.DataFrame, column: str, fmt: str) -> None:
    """Horizontal bars of ``column`` per strategy, values written at the bar ends."""
    names = list(table.index)
    values = table[column].to_numpy(dtype=float)
    y = np.arange(len(names))[::-1]
    ax.barh(y, np.nan_to_num(values), color=[_color(n) for n in names], height=0.7)
    ax.set_yticks(y, names)
    top = np.nanmax(np.abs(values)) if np.isfinite(values).any() else 1.0
    for yi, v in zip(y, values):
        text = "n/a" if not np.isfinite(v) else format(v, fmt)
        ax.text((v if np.isfinite(v) else 0) + 0.01 * top, yi, text, va="center", fontsize=8)
    ax.set_xlim(min(0.0, np.nanmin(values) * 1.2 if np.isfinite(values).any() else 0.0), top * 1.25)
    ax.set_xlabel(_LABELS.get(column, column))
    ax.xaxis.set_major_locator(MaxNLocator(4))
    if top >= 10_000:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g}k" if v else "0"))
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


def plot_strategy_bars(table: pd.DataFrame,
                       columns: Sequence[str] = ("efficiency", "steps", "predicted_tokens_per_s"),
                       *, title: str | None = None) -> Figure:
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
    columns = [c for c in columns if c in table.columns]
    if not columns:
        raise ValueError("none of the requested columns is in the table")
    fig = Figure(figsize=(4.2 * len(columns), 0.45 * len(table) + 1.6), layout="constrained")
    axes = fig.subplots(1, len(columns), sharey=True, squeeze=False)[0]
    fmts = {"efficiency": ".3f", "steps": ",.0f", "predicted_tokens_per_s": ",.0f"}
    for ax, column in zip(axes, columns):
        _bars(ax, table, column, fmts.get(column, ".3g"))
        if column == "efficiency" and "expected_efficiency" in table.columns:
            y = np.arange(len(table))[::-1]
            exp = table["expected_efficiency"].to_numpy(dtype=float)
            ok = np.isfinite(exp)
            ax.scatter(exp[ok], y[ok], marker="|", s=300, color="black", zorder=3)
            if ok.any():
                ax.set_xlabel(_LABELS["efficiency"] + "\n| = exact expectation")
    fig.suptitle(title or "Batching strategies: padding and steps per epoch")
    return fig


def plot_randomness(table: pd.DataFrame,
                    columns: Sequence[str] = ("within_batch_cv", "lag1_autocorr",
                                              "composition_repeat"),
                    *, title: str | None = None) -> Figure:
    """The randomness metrics of a :func:`~analysis.compare_strategies` table, one panel each.

    What a strategy gives up for its padding: similar-length batches (low within-batch CV),
    a length pattern in the batch order (autocorrelation), the same batches every epoch.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import compare_strategies
    >>> lengths = np.random.default_rng(0).integers(1, 100, 400)
    >>> table = compare_strategies(lengths, rng=np.random.default_rng(0), edges=[0, 50, 99],
    ...                            batch_size=4, epochs=1)
    >>> len(plot_randomness(table).axes)
    3
    """
    columns = [c for c in columns if c in table.columns]
    if not columns:
        raise ValueError("none of the requested columns is in the table")
    fig = Figure(figsize=(4.2 * len(columns), 0.45 * len(table) + 1.6), layout="constrained")
    axes = fig.subplots(1, len(columns), sharey=True, squeeze=False)[0]
    for ax, column in zip(axes, columns):
        _bars(ax, table, column, ".3f")
        ax.axvline(0, color="black", lw=0.8)
    fig.suptitle(title or "What each strategy keeps of a random shuffle")
    return fig


def plot_tradeoff(table: pd.DataFrame, *, randomness: str = "within_batch_cv",
                  title: str | None = None) -> Figure:
    """Efficiency against one randomness metric, a labelled point per strategy.

    Up and right is better on both counts; the strategies trace the trade-off.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import compare_strategies
    >>> lengths = np.random.default_rng(0).integers(1, 100, 400)
    >>> table = compare_strategies(lengths, rng=np.random.default_rng(0), edges=[0, 50, 99],
    ...                            batch_size=4, epochs=1)
    >>> plot_tradeoff(table).axes[0].get_ylabel()
    'efficiency (useful / padded)'
    """
    for column in ("efficiency", randomness):
        if column not in table.columns:
            raise ValueError(f"the table has no {column!r} column")
    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    ax = fig.subplots()
    markers = "osD^vP*X"
    for i, (name, row) in enumerate(table.iterrows()):
        x, y = float(row[randomness]), float(row["efficiency"])
        ax.scatter(x, y, s=90, color=_color(str(name)), marker=markers[i % len(markers)],
                   zorder=3, label=str(name), edgecolors="black", linewidths=0.5)
    ax.legend(loc="lower left", fontsize=9, title="strategy")
    ax.set_xlabel(_LABELS.get(randomness, randomness).replace("\n", " "))
    ax.set_ylabel("efficiency (useful / padded)")
    ax.set_ylim(min(0.0, float(table["efficiency"].min()) - 0.05), 1.05)
    ax.grid(alpha=0.3)
    ax.set_title(title or "Padding against randomness")
    return fig


def plot_padded_per_step(results: Mapping[str, object], *, steps: int = 150, epoch: int = 1,
                         title: str | None = None) -> Figure:
    """Padded tokens per optimizer step over the first ``steps`` steps of an epoch.

    ``results`` maps a label to a :class:`~analysis.simulate.SimulationResult`; one panel
    per result, shared axes, with the epoch's mean padded tokens per step as a dashed line.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import simulate
    >>> lengths = np.random.default_rng(0).integers(1, 100, 400)
    >>> results = {name: simulate(lengths, name, rng=np.random.default_rng(0), batch_size=4)
    ...            for name in ("sorted", "random")}
    >>> len(plot_padded_per_step(results).axes)
    2
    """
    if not results:
        raise ValueError("results is empty")
    fig = Figure(figsize=(10, 1.9 * len(results) + 0.8), layout="constrained")
    axes = fig.subplots(len(results), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    for ax, (label, res) in zip(axes, results.items()):
        frame = res.batches[res.batches["epoch"] == epoch]
        per_step = frame.groupby("step")["padded"].sum()
        shown = per_step.iloc[:steps]
        ax.step(shown.index, shown.to_numpy(), where="mid", lw=0.8, color=_color(res.strategy))
        ax.axhline(per_step.mean(), ls="--", color="black", lw=1,
                   label=f"epoch mean {per_step.mean():,.0f}")
        ax.set_ylabel("padded tokens")
        ax.set_title(f"{label}", loc="left", fontsize=10)
        ax.legend(loc="upper right", fontsize=8)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[-1].set_xlabel(f"optimizer step (first {min(steps, len(per_step))} of epoch {epoch})")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title or "Padded tokens per step: what each step costs")
    return fig
