"""Figures of a length distribution: what do my lengths look like, and where are the tokens?

Every function takes a :class:`~analysis.lengths.LengthHistogram` and returns a
``matplotlib.figure.Figure`` made with ``Figure()`` (never pyplot).  They work on the
histogram itself (bins are summed over distinct lengths, never expanded to samples); the
statistics they print (quantiles, tail token shares, clipping) come from the histogram's
own methods.  Each takes a ``subtitle`` (a second title line) to say which lengths it
shows (for example, as in the file or clipped at ``max_len``).  No text is drawn across a
line: what a line or a marked point means is in the legend.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, PercentFormatter

from analysis.lengths import LengthHistogram
from analysis.plots._common import GREY, OKABE_ITO, bin_edges, format_count, length_axis, wants_log_axis
from analysis.tables import format_percent

__all__ = ["plot_length_histogram", "plot_length_cdf", "plot_token_share", "plot_clipping"]

_BLUE, _ORANGE, _RED = OKABE_ITO["blue"], OKABE_ITO["orange"], OKABE_ITO["vermillion"]
_QUANTILE_COLORS = [OKABE_ITO[c] for c in ("orange", "vermillion", "purple", "green", "sky_blue")]
_THOUSANDS = FuncFormatter(lambda v, _: format_count(v))
_MILLIONS = FuncFormatter(lambda v, _: f"{v / 1e6:,.0f} M" if v else "0")


def _check_hist(hist: object) -> LengthHistogram:
    if not isinstance(hist, LengthHistogram):
        raise ValueError(f"expected a LengthHistogram, got {type(hist).__name__}")
    return hist


def _log(hist: LengthHistogram, log_x: bool | None) -> bool:
    """``log_x`` as given, or (``None``) a log axis when the lengths span more than a decade."""
    return wants_log_axis(hist.min, hist.max) if log_x is None else bool(log_x)


def _title(title: str | None, default: str, subtitle: str | None) -> str:
    """The figure's title (given, or the default), with the subtitle as its second line."""
    return f"{title or default}\n{subtitle}" if subtitle else title or default


def _bin_edges(hist: LengthHistogram, bins: int | Sequence[float], log_x: bool) -> np.ndarray:
    """Bin edges at half-integers (so no integer length sits on an edge), log-spaced when
    ``log_x``; or the given edges."""
    if not isinstance(bins, int | np.integer):
        edges = np.asarray(bins, dtype=float)
        if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
            raise ValueError("bins must be a positive int or increasing bin edges")
        return edges
    if isinstance(bins, bool) or bins < 1:
        raise ValueError(f"bins must be a positive int, got {bins!r}")
    return bin_edges(hist.min, hist.max, int(bins), log_x)


def plot_length_histogram(
    hist: LengthHistogram,
    *,
    log_x: bool | None = None,
    bins: int | Sequence[float] = 60,
    weight: str = "samples",
    title: str | None = None,
    subtitle: str | None = None,
) -> Figure:
    """Histogram of sample lengths, binned on the histogram (no per-sample expansion).

    Parameters
    ----------
    hist : LengthHistogram
        The lengths.
    log_x : bool, optional
        Log length axis with log-spaced bins (equal widths on screen); default: log when the
        lengths span more than a decade, linear with equal-width bins otherwise.
    bins : int or sequence of float, default 60
        Number of bins, or explicit bin edges.
    weight : {"samples", "tokens"}
        Height of a bar: samples in the bin, or tokens they hold (where the compute goes).
    title : str, optional
        Figure title (a default names the data's size and what a bar counts).
    subtitle : str, optional
        A second title line: which lengths these are (as in the file, clipped...).

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> fig = plot_length_histogram(LengthHistogram.from_lengths([10, 20, 20, 400]))
    >>> len(fig.axes), round(sum(p.get_height() for p in fig.axes[0].patches))
    (1, 4)
    """
    hist = _check_hist(hist)
    if weight not in ("samples", "tokens"):
        raise ValueError(f"weight must be 'samples' or 'tokens', got {weight!r}")
    log_x = _log(hist, log_x)
    edges = _bin_edges(hist, bins, log_x)
    heights = hist.binned(edges, weight)
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    ax = fig.add_subplot()
    color = _BLUE if weight == "samples" else _ORANGE
    ax.bar(
        edges[:-1], heights, width=np.diff(edges), align="edge", color=color, edgecolor="white", linewidth=0.3
    )
    length_axis(ax, edges[0] * (0.95 if log_x else 1), edges[-1] * (1.03 if log_x else 1), log=log_x)
    ax.set_ylabel(f"{weight} per bin")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 2.5, 5, 10]))
    ax.yaxis.set_major_formatter(_THOUSANDS if heights.max() < 1e7 else _MILLIONS)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    p50 = hist.quantile(0.5)
    ax.axvline(float(p50), color=GREY, linestyle="--", linewidth=1, label=f"median {p50:,}")
    ax.axvline(hist.mean, color=GREY, linestyle=":", linewidth=1.2, label=f"mean {hist.mean:,.0f}")
    at_max = int(hist.counts[-1])
    if at_max >= 0.01 * hist.n_samples and hist.n_distinct > 1:  # a spike at a length limit
        share = format_percent(at_max / hist.n_samples, "prose")
        text = f"{at_max:,} samples ({share})\nat the max length {hist.max:,}"
        if weight == "tokens":
            text += f"\nhold {format_percent(at_max * hist.max / hist.total_tokens, 'prose')} of tokens"
        ax.plot([], [], ls="none", label=text)  # a legend entry without a mark: no text on the bars
    ax.legend(loc="best", framealpha=0.9, fontsize=9)
    scale = "log-spaced bins" if log_x else "equal-width bins"
    if weight == "samples":
        default = f"Sample lengths: {hist.n_samples:,} samples, {hist.total_tokens:,} tokens ({scale})"
    else:
        default = f"Where the tokens are: {hist.total_tokens:,} tokens by sample length ({scale})"
    ax.set_title(_title(title, default, subtitle), fontsize=11)
    return fig


def plot_length_cdf(
    hist: LengthHistogram,
    quantiles: Sequence[float] = (0.5, 0.9, 0.99),
    *,
    log_x: bool | None = None,
    title: str | None = None,
    subtitle: str | None = None,
) -> Figure:
    """Cumulative share of samples at or below each length, with quantiles marked.

    Each quantile ``q`` gets a dashed vertical line at ``hist.quantile(q)`` labelled
    ``"p50 = 1,606"`` (the line's label, so tests and legends can find it).  The length
    axis is logarithmic when the lengths span more than a decade (``log_x=None``).

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> fig = plot_length_cdf(LengthHistogram.from_lengths([1, 2, 3, 4]), quantiles=(0.5,))
    >>> [(l.get_label(), l.get_xdata()[0]) for l in fig.axes[0].lines if l.get_label()[0] == "p"]
    [('p50 = 2', 2)]
    """
    hist = _check_hist(hist)
    qs = [float(q) for q in quantiles]
    if any(not 0 < q <= 1 for q in qs):
        raise ValueError(f"quantiles must be in (0, 1], got {tuple(quantiles)!r}")
    log_x = _log(hist, log_x)
    cdf = hist.cumulative_counts() / hist.n_samples
    x = np.concatenate([[hist.min - 0.5], hist.lengths])
    y = np.concatenate([[0.0], cdf])
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    ax = fig.add_subplot()
    ax.step(x, y, where="post", color=_BLUE, linewidth=1.6, label="share of samples <= length")
    lo, hi = (hist.min - 0.5) * (0.9 if log_x else 1), hist.max * (1.15 if log_x else 1.03)
    length_axis(ax, lo, hi, log=log_x)
    ax.set_ylim(0, 1.0)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylabel("samples at or below length")
    ax.grid(alpha=0.3)
    colors = _QUANTILE_COLORS
    for i, q in enumerate(qs):
        value = int(hist.quantile(q))
        name = f"p{100 * q:g}"
        color = colors[i % len(colors)]
        ax.axvline(value, color=color, linestyle="--", linewidth=1.2, label=f"{name} = {value:,}")
        ax.plot([lo, value], [q, q], color=color, linestyle=":", linewidth=1)
        ax.plot([value], [q], "o", color=color, markersize=5)
    ax.legend(loc="lower right", frameon=True, framealpha=0.9, fontsize=9)
    ax.set_title(_title(title, "Cumulative distribution of sample lengths", subtitle), fontsize=11)
    return fig


def plot_token_share(
    hist: LengthHistogram,
    marks: Sequence[float] = (0.01, 0.1, 0.25),
    *,
    title: str | None = None,
    subtitle: str | None = None,
) -> Figure:
    """Share of all tokens held by the longest x % of samples (a Lorenz-style curve).

    The further the curve bows above the diagonal, the more the tokens (and the padding a
    long sample forces on its batch-mates) concentrate in the tail.  Each fraction in
    ``marks`` is a marked point named in the legend with ``hist.tail_token_share(fraction)``
    (the legend sits below the diagonal, where the curve never goes).

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> fig = plot_token_share(LengthHistogram.from_lengths([1, 1, 1, 7]), marks=(0.25,))
    >>> line = fig.axes[0].lines[0]
    >>> line.get_xdata().tolist(), line.get_ydata().tolist()
    ([0.0, 0.25, 1.0], [0.0, 0.7, 1.0])
    """
    hist = _check_hist(hist)
    x, y = hist.token_share_curve()
    fig = Figure(figsize=(6.2, 4.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(x, y, color=_ORANGE, linewidth=2, label="this data")
    ax.plot([0, 1], [0, 1], color=GREY, linestyle="--", linewidth=1, label="all samples the same length")
    ax.fill_between(x, x, y, color=_ORANGE, alpha=0.12, linewidth=0)
    for f, marker in zip(marks, itertools.cycle("osD^v")):
        share = hist.tail_token_share(f)
        label = f"longest {100 * f:g}% hold {format_percent(share, 'prose')} of tokens"
        ax.plot([f], [share], marker, color=_RED, markersize=6, label=label)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_xlabel("longest samples (share of samples, longest first)")
    ax.set_ylabel("share of all tokens they hold")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", frameon=False, fontsize=9)
    ax.set_title(_title(title, "Where the tokens are: the tail's share", subtitle), fontsize=11)
    return fig


def plot_clipping(
    hist: LengthHistogram,
    max_len: int,
    *,
    min_len: int | None = None,
    log_x: bool | None = None,
    title: str | None = None,
    subtitle: str | None = None,
) -> Figure:
    """What truncating samples at a maximum length would cut, for every choice of it.

    Two curves over candidate ``max_len`` values: the share of samples that would be
    clipped, and the share of tokens removed.  The chosen ``max_len`` is marked with the
    exact numbers from ``hist.clip_summary(max_len)``, in the legend beside the axes.  The
    axis starts at ``min_len`` (default: the median length; clipping shorter than that is
    rarely a real option); it is logarithmic when the lengths shown span more than a decade
    (``log_x=None``).  ``hist`` is the unclipped lengths (clipping clipped ones cuts nothing).

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> fig = plot_clipping(LengthHistogram.from_lengths([2, 5, 9]), max_len=4)
    >>> [label.splitlines() for label in fig.axes[0].get_legend_handles_labels()[1]]
    ... # doctest: +NORMALIZE_WHITESPACE
    [['samples clipped'], ['tokens removed'],
     ['max_len = 4:', '2 samples clipped (66.7%)', '6 tokens removed (37.5%)']]
    """
    hist = _check_hist(hist)
    summary = hist.clip_summary(max_len)
    max_len = int(summary["max_len"])
    lengths, samples, tokens = hist.clipping_curve()
    start = hist.quantile(0.5) if min_len is None else int(min_len)
    show = lengths >= start
    if show.sum() < 2:
        show[-2:] = True
    lengths, samples, tokens = lengths[show], samples[show], tokens[show]
    fig = Figure(figsize=(9.5, 3.8), layout="constrained")
    ax = fig.add_subplot()
    ax.step(lengths, samples, where="post", color=_BLUE, linewidth=1.6, label="samples clipped")
    ax.plot(lengths, tokens, color=_ORANGE, linewidth=1.6, label="tokens removed")
    if log_x is None:
        log_x = wants_log_axis(min(int(lengths[0]), max_len), max(hist.max, max_len))
    lo = min(int(lengths[0]), max_len) * (0.95 if log_x else 1)
    hi = max(hist.max, max_len) * (1.05 if log_x else 1.02)
    length_axis(ax, lo, hi, log=log_x, label="max_len: samples longer than this are truncated to it (tokens)")
    ax.set_ylabel("share of the data")
    ax.set_ylim(0, max(float(samples[0]), float(tokens[0])) * 1.05 or 1.0)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.grid(alpha=0.3)
    text = (
        f"max_len = {max_len:,}:\n{summary['samples_clipped']:,} samples clipped "
        f"({format_percent(summary['share_samples_clipped'], 'prose')})\n"
        f"{summary['tokens_removed']:,} tokens removed "
        f"({format_percent(summary['share_tokens_removed'], 'prose')})"
    )
    ax.axvline(max_len, color=_RED, linestyle="--", linewidth=1.2, label=text)
    # beside the axes, from their top down: under the title, which a long second line may widen
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False, fontsize=9)
    ax.set_title(_title(title, "What truncation at max_len would cut", subtitle), fontsize=11)
    return fig
