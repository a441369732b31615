"""Distribution figures: right content (bars, lines, curves) checked against brute force."""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure

from analysis import LengthHistogram
from analysis.case.synthetic import case_like_histogram
from analysis.plots import (
    plot_clipping,
    plot_length_cdf,
    plot_length_histogram,
    plot_token_share,
    save_figure,
)

matplotlib.use("Agg")

SMALL = LengthHistogram.from_lengths([3, 3, 5, 8, 8, 8, 40, 41, 200, 1000, 1000])


@pytest.fixture(scope="module")
def case():
    return case_like_histogram()


def _bar_heights(fig: Figure) -> np.ndarray:
    return np.array([p.get_height() for p in fig.axes[0].patches])


def _bar_edges(fig: Figure) -> np.ndarray:
    patches = fig.axes[0].patches
    return np.array([p.get_x() for p in patches] + [patches[-1].get_x() + patches[-1].get_width()])


@pytest.mark.parametrize("log_x", [True, False])
@pytest.mark.parametrize("weight", ["samples", "tokens"])
def test_histogram_bins_match_brute_force(log_x, weight):
    fig = plot_length_histogram(SMALL, log_x=log_x, bins=12, weight=weight)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    edges = _bar_edges(fig)
    samples = SMALL.expand()
    expected, _ = np.histogram(samples, bins=edges, weights=None if weight == "samples" else samples)
    np.testing.assert_allclose(_bar_heights(fig), expected)
    assert _bar_heights(fig).sum() == (SMALL.n_samples if weight == "samples" else SMALL.total_tokens)
    assert fig.axes[0].get_xscale() == ("log" if log_x else "linear")
    # no length sits on a bin edge
    assert not np.isin(SMALL.lengths, edges).any()


def test_histogram_explicit_bins_and_labels(case):
    fig = plot_length_histogram(case, bins=[64.5, 1000.5, 4000.5, 8192.5])
    np.testing.assert_array_equal(
        _bar_heights(fig),
        [
            case.counts[case.lengths <= 1000].sum(),
            case.counts[(case.lengths > 1000) & (case.lengths <= 4000)].sum(),
            case.counts[case.lengths > 4000].sum(),
        ],
    )
    ax = fig.axes[0]
    assert "tokens" in ax.get_xlabel()
    assert "902,087 samples" in ax.get_title()
    labels = ax.get_legend_handles_labels()[1]
    assert labels[:2] == ["median 1,606", "mean 2,068"]
    # the spike at the context limit, named in the legend (no text drawn on the bars)
    assert labels[2] == "71,503 samples (7.9%)\nat the max length 8,192" and not ax.texts
    tick_labels = [ax.xaxis.get_major_formatter()(v, 0) for v in (1024, 8192)]
    assert tick_labels == ["1,024", "8,192"]


def test_cdf_quantile_lines_at_quantiles(case):
    fig = plot_length_cdf(case)
    assert len(fig.axes) == 1
    quantile_lines = [line for line in fig.axes[0].lines if line.get_label().startswith("p")]
    lines = {line.get_label().split(" = ")[0]: line for line in quantile_lines}
    assert sorted(lines) == ["p50", "p90", "p99"]
    expected = {"p50": 1606, "p90": 3539, "p99": 8192}
    for name, line in lines.items():
        assert line.get_xdata()[0] == expected[name] == case.quantile(int(name[1:]) / 100)
        assert line.get_label() == f"{name} = {expected[name]:,}"


def test_cdf_curve_and_quantiles_brute_force():
    fig = plot_length_cdf(SMALL, quantiles=(0.25, 0.5, 0.999))
    samples = SMALL.expand()
    step = fig.axes[0].lines[0]
    x, y = step.get_xdata(), step.get_ydata()
    for length, share in zip(x[1:], y[1:], strict=False):
        assert share == pytest.approx(np.mean(samples <= length))
    marks = [line for line in fig.axes[0].lines if line.get_label().startswith("p")]
    got = [m.get_xdata()[0] for m in marks]
    assert got == [int(np.quantile(samples, q, method="inverted_cdf")) for q in (0.25, 0.5, 0.999)]
    assert [m.get_label().split(" =")[0] for m in marks] == ["p25", "p50", "p99.9"]


def test_token_share_figure_draws_the_curve_and_marks(case):
    # the curve's values are checked against brute force in tests/ground/test_lengths.py
    fig = plot_token_share(case)
    curve = fig.axes[0].lines[0]
    x, y = case.token_share_curve()
    np.testing.assert_array_equal(curve.get_xdata(), x)
    np.testing.assert_array_equal(curve.get_ydata(), y)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels[2] == f"longest 1% hold {100 * case.tail_token_share(0.01):.1f}% of tokens"
    marks = [line for line in fig.axes[0].lines if line.get_label().startswith("longest")]
    assert [(m.get_xdata()[0], m.get_ydata()[0]) for m in marks] == [
        (f, case.tail_token_share(f)) for f in (0.01, 0.1, 0.25)
    ]
    assert not fig.axes[0].texts  # the marks are named in the legend, not across the curve


def test_clipping_curves_match_clip_summary():
    fig = plot_clipping(SMALL, max_len=8, min_len=1)
    ax = fig.axes[0]
    samples_line, tokens_line = ax.lines[0], ax.lines[1]
    xs, ys, ts = samples_line.get_xdata(), samples_line.get_ydata(), tokens_line.get_ydata()
    for length, s, t in zip(xs, ys, ts, strict=True):
        summary = SMALL.clip_summary(int(length))
        assert s == pytest.approx(summary["share_samples_clipped"])
        assert t == pytest.approx(summary["share_tokens_removed"])
    marker = [line for line in ax.lines if line.get_label().startswith("max_len")]
    assert marker[0].get_xdata()[0] == 8
    text = marker[0].get_label()  # the exact numbers, in the legend beside the axes
    assert "5 samples clipped (45.5%)" in text and "2,241 tokens removed (96.8%)" in text


def test_clipping_default_starts_at_median(case):
    fig = plot_clipping(case, 4096)
    xs = fig.axes[0].lines[0].get_xdata()
    assert xs[0] == case.quantile(0.5) and xs[-1] == 8192
    (marker,) = [line for line in fig.axes[0].lines if line.get_label().startswith("max_len")]
    assert "77,840 samples clipped (8.6%)" in marker.get_label()


def test_no_pyplot_figures_and_save(tmp_path, case):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    figs = [
        plot_length_histogram(case),
        plot_length_cdf(case),
        plot_token_share(case),
        plot_clipping(case, 8192),
    ]
    assert plt.get_fignums() == before
    for i, fig in enumerate(figs):
        assert isinstance(fig, Figure)
        (path,) = save_figure(fig, f"f{i}", tmp_path, formats=("png",))
        assert path.stat().st_size > 10_000


@pytest.mark.parametrize(
    "bad",
    [
        lambda: plot_length_histogram([1, 2, 3]),
        lambda: plot_length_histogram(SMALL, weight="bytes"),
        lambda: plot_length_histogram(SMALL, bins=0),
        lambda: plot_length_histogram(SMALL, bins=[5, 3]),
        lambda: plot_length_cdf(SMALL, quantiles=(0.5, 1.5)),
        lambda: plot_clipping(SMALL, max_len=0),
    ],
)
def test_bad_input(bad):
    with pytest.raises(ValueError):
        bad()


@settings(max_examples=6, deadline=None)
@given(st.lists(st.integers(1, 100_000), min_size=1, max_size=40), st.booleans())
def test_any_histogram_draws_without_warnings(values, log_x):
    hist = LengthHistogram.from_lengths(values)
    figs = [
        plot_length_histogram(hist, log_x=log_x, bins=7),
        plot_length_cdf(hist, log_x=log_x),
        plot_token_share(hist),
        plot_clipping(hist, max(1, hist.max // 2), log_x=log_x),
    ]
    for fig in figs:
        fig.savefig(io.BytesIO(), format="png")  # full render: layout, ticks; warnings are errors
    assert _bar_heights(figs[0]).sum() == hist.n_samples
