"""Figures for real distributions: on a synthetic heavy tail reaching 423,350 tokens
and on a narrow distribution, every figure is drawn with Agg and checked as a reader sees it:
tick labels, bucket labels and edge values never overlap, length axes are logarithmic
exactly when the lengths span more than a decade, no text is drawn across a line,
efficiency axes stop at 100 % and the efficiency colour bar is fixed at 0 to 100 %, colours
come from the colour-blind-safe sets, a cut axis says so, and no text shows ``-0`` or a
float count."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.table import Table
from matplotlib.text import Text

import analysis
from analysis import LengthHistogram, plots
from analysis.answers.recommendation import compare_edge_sets
from analysis.optimize import recommend_n_buckets
from analysis.plots._common import OKABE_ITO, _segment_hits_box

HEAVY_MAX = 423_350
ALLOWED_CMAPS = {"viridis", "cividis"}


def heavy_tail(seed: int = 0, n: int = 12_000) -> LengthHistogram:
    """Log-normal body plus a Pareto tail, unclipped, longest sample 423,350 tokens."""
    rng = np.random.default_rng(seed)
    body = rng.lognormal(np.log(500), 1.0, size=n - n // 25)
    tail = 4_000 * (1 + rng.pareto(1.1, size=n // 25))
    lengths = np.clip(np.concatenate([body, tail]).round(), 1, HEAVY_MAX).astype(np.int64)
    lengths[np.argmax(lengths)] = HEAVY_MAX
    return LengthHistogram.from_lengths(lengths)


def narrow() -> LengthHistogram:
    """Lengths 62..469 (less than a decade apart), like a math word-problem set."""
    rng = np.random.default_rng(1)
    return LengthHistogram.from_lengths(np.clip(rng.normal(170, 60, 6_000).round(), 62, 469))


def all_figures(hist: LengthHistogram, n_buckets: int = 6) -> dict[str, Figure]:
    rule = {"batch_size": 8}
    plan = analysis.optimize_edges(hist, n_buckets, **rule)
    sweep = analysis.sweep_bucket_counts(hist, range(1, 9), **rule)
    table = analysis.compare_strategies(
        hist, rng=np.random.default_rng(0), edges=plan.edges, epochs=1, **rule
    )
    results = {
        s: analysis.simulate(hist, s, rng=np.random.default_rng(0), edges=plan.edges, **rule)
        for s in ("sorted", "random", "bucketed")
    }
    sets = compare_edge_sets(
        hist,
        {
            "optimal": plan,
            "equal tokens": analysis.optimize_edges(hist, n_buckets, method="equal_tokens", **rule),
        },
        **rule,
    )
    return {
        "length_histogram": plots.plot_length_histogram(hist),
        "token_histogram": plots.plot_length_histogram(hist, weight="tokens"),
        "cdf": plots.plot_length_cdf(hist),
        "token_share": plots.plot_token_share(hist),
        "clipping": plots.plot_clipping(hist, int(hist.quantile(0.99))),
        "strategy_bars": plots.plot_strategy_bars(table),
        "randomness": plots.plot_randomness(table),
        "padded_per_step": plots.plot_padded_per_step(results),
        "efficiency_vs_buckets": plots.plot_efficiency_vs_buckets(
            sweep,
            random_efficiency=float(sweep["efficiency"].min()),
            chosen=n_buckets,
            recommended=recommend_n_buckets(sweep),
        ),
        "optimal_edges": plots.plot_edges_on_histogram(hist, plan),
        "edge_sets": plots.plot_edge_sets(sets, hist=hist),
    }


LENGTH_AXIS_FIGURES = ["length_histogram", "token_histogram", "cdf", "clipping", "optimal_edges", "edge_sets"]
#: The figures of analysis.plots.distribution, .buckets and .edges (strategies' are tested
#: with their module).
NO_TEXT_ON_A_LINE = [
    "length_histogram",
    "token_histogram",
    "cdf",
    "token_share",
    "clipping",
    "efficiency_vs_buckets",
    "optimal_edges",
    "edge_sets",
]


def drawn(figs: dict[str, Figure]) -> dict[str, Figure]:
    for fig in figs.values():
        FigureCanvasAgg(fig).draw()
    return figs


@pytest.fixture(scope="module")
def heavy():
    return heavy_tail()


@pytest.fixture(scope="module")
def heavy_figures(heavy):
    return drawn(all_figures(heavy))


@pytest.fixture(scope="module")
def narrow_figures():
    return drawn(all_figures(narrow()))


@pytest.fixture(params=["heavy", "narrow"])
def figures(request, heavy_figures, narrow_figures):
    return heavy_figures if request.param == "heavy" else narrow_figures


def boxes(texts, renderer):
    """The texts' own boxes (an annotation's leader line left out)."""
    return [Text.get_window_extent(t, renderer) for t in texts if t.get_visible() and t.get_text()]


def assert_disjoint(bbs, what):
    for a, b in itertools.combinations(bbs, 2):
        assert not a.overlaps(b), f"{what}: {a} overlaps {b}"


def test_heavy_tail_is_what_it_claims(heavy):
    assert heavy.max == HEAVY_MAX and heavy.max / heavy.min > 1e4


def test_every_figure_is_a_plain_figure(figures):
    assert len(figures) == 11
    assert all(type(f) is Figure for f in figures.values())


def test_tick_labels_never_overlap(figures):
    for name, fig in figures.items():
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                assert_disjoint(boxes(axis.get_majorticklabels(), renderer), f"{name} ticks")


def visible_tick_texts(ax, axis):
    lo, hi = sorted(axis.get_view_interval())
    return [
        t.get_text() for t, v in zip(axis.get_majorticklabels(), axis.get_majorticklocs()) if lo <= v <= hi
    ]


def test_no_two_ticks_of_an_axis_read_the_same(figures):
    for name, fig in figures.items():
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                texts = [t for t in visible_tick_texts(ax, axis) if t]
                assert len(texts) == len(set(texts)), f"{name}: {texts}"


def test_efficiencies_a_point_apart_get_the_decimals_they_need():
    """Under a token budget that leaves most batches at one sample (arena_hard at 16,384
    tokens) both objectives' efficiencies lie within 98.6..100 %: whole-percent ticks read
    "100%, 100%, 99%, 99%"."""
    sweep = pd.DataFrame(
        {
            "n_buckets": [k for k in range(1, 9) for _ in range(2)],
            "objective": ["padding", "time"] * 8,
            "tokens_per_s": np.linspace(8220, 8270, 16),
            "efficiency": np.r_[
                1.0, 1.0, 1.0, 0.997, 1.0, 0.993, 1.0, 0.991, 1.0, 0.99, 1.0, 0.986, 1.0, 0.987, 1.0, 0.986
            ],
        }
    )
    fig = drawn({"time": plots.plot_time_vs_padding_edges(sweep)})["time"]
    eff = fig.axes[1]
    texts = [t for t in visible_tick_texts(eff, eff.yaxis) if t]
    assert len(texts) >= 3 and len(texts) == len(set(texts)), texts
    assert eff.get_ylim()[1] <= 1.0


def test_log_length_axis_exactly_over_a_decade(heavy_figures, narrow_figures):
    for name in LENGTH_AXIS_FIGURES:
        assert heavy_figures[name].axes[0].get_xscale() == "log", name
        assert narrow_figures[name].axes[0].get_xscale() == "linear", name
    assert plots.LOG_SPAN == 10
    assert plots.wants_log_axis(1, 11) and not plots.wants_log_axis(5, 49)


def test_clipping_axis_of_a_tail_one_decade_past_the_median_is_log():
    """The reported case: the clipping plot from a median of 1,606 to a longest of 160,000
    (two decades exactly) had a linear axis."""
    lengths = np.r_[np.full(500, 1_000), np.full(500, 1_606), np.arange(1_607, 160_001, 500), 160_000]
    fig = plots.plot_clipping(LengthHistogram.from_lengths(lengths), 8_192)
    assert fig.axes[0].get_xscale() == "log"
    assert plots.plot_clipping(narrow(), 300).axes[0].get_xscale() == "linear"


def test_heavy_tail_length_ticks_reach_the_tail(heavy_figures):
    ax = heavy_figures["length_histogram"].axes[0]
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert len(ticks) >= 4 and max(ticks) >= 65_536
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})*", t.get_text()) for t in ax.get_xticklabels() if t.get_text())


def test_efficiency_axes_stop_at_100_percent(figures):
    assert figures["efficiency_vs_buckets"].axes[0].get_ylim()[1] <= 1.0
    bars = figures["strategy_bars"].axes[0]
    assert "efficiency" in bars.get_xlabel() and bars.get_xlim()[1] <= 1.0
    for name in ("optimal_edges", "edge_sets"):
        colorbar = figures[name].axes[1]
        assert max(colorbar.get_ylim()) <= 1.0


def test_efficiency_colour_bar_is_fixed_at_0_to_100_percent(heavy):
    """One colour is one efficiency in every report: a plan at 35 % and one at 91 % (and the
    live figure after either) share the scale."""
    low, high = (analysis.optimize_edges(heavy, k, batch_size=8) for k in (1, 16))
    assert low.efficiency < 0.5 < 0.85 < high.efficiency
    figs = [plots.plot_edges_on_histogram(heavy, plan) for plan in (low, high)]
    figs += [plots.plot_edge_sets({"one": low, "sixteen": high}, hist=heavy)]
    for fig in figs:
        FigureCanvasAgg(fig).draw()
        assert_fixed_colour_bar(fig)
    live = plots.EdgesOnHistogram(heavy)
    for plan in (low, high):
        live.show(plan)
        live.render()
        assert_fixed_colour_bar(live.figure)


def assert_fixed_colour_bar(fig):
    (bar,) = [ax for ax in fig.axes if ax.get_ylabel() == "bucket efficiency"]
    assert tuple(bar.get_ylim()) == (0.0, 1.0)
    ticks = [t.get_text() for t in bar.get_yticklabels()]
    assert ticks[0] == "0%" and ticks[-1] == "100%", ticks


def _mappables(fig):
    for ax in fig.axes:
        yield from ax.images
        yield from ax.collections
    yield from (a for a in fig.get_children() if hasattr(a, "get_cmap"))


def test_colormaps_are_colour_blind_safe(figures):
    found = set()
    for fig in figures.values():
        for artist in _mappables(fig):
            if getattr(artist, "get_array", lambda: None)() is not None:
                found.add(artist.get_cmap().name)
        for ax in fig.axes:
            for child in ax.get_children():
                if hasattr(child, "colorbar") and child.colorbar is not None:
                    found.add(child.colorbar.cmap.name)
    for name in ("optimal_edges", "edge_sets"):
        found.add(
            figures[name].axes[1].collections[0].get_cmap().name
            if figures[name].axes[1].collections
            else "viridis"
        )
    assert found <= ALLOWED_CMAPS, found


def _neutral(color: str) -> bool:
    r, g, b = color[1:3], color[3:5], color[5:7]
    return r == g == b


def test_category_colours_are_okabe_ito(figures):
    allowed = {c.lower() for c in OKABE_ITO.values()}
    for name in (
        "length_histogram",
        "token_histogram",
        "cdf",
        "token_share",
        "clipping",
        "strategy_bars",
        "randomness",
        "padded_per_step",
        "efficiency_vs_buckets",
    ):
        for ax in figures[name].axes:
            colors = [to_hex(line.get_color()) for line in ax.lines]
            colors += [to_hex(p.get_facecolor()) for p in ax.patches if p.get_visible()]
            for coll in ax.collections:
                colors += [to_hex(c) for c in coll.get_facecolors()]
            bad = {c for c in colors if c not in allowed and not _neutral(c)}
            assert not bad, (name, bad)


def test_bucket_labels_never_overlap_and_sit_in_their_bucket(figures):
    fig = figures["optimal_edges"]
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.texts if t.get_text().startswith("#")]
    assert labels
    assert_disjoint(boxes(labels, renderer), "bucket labels")
    edges = [ax.get_xlim()[0], *[line.get_xdata()[0] for line in ax.lines], ax.get_xlim()[1]]
    screen = ax.transData.transform([[e, 0] for e in edges])[:, 0]
    for t in labels:
        b = int(t.get_text().split("\n")[0][1:]) - 1
        box = t.get_window_extent(renderer)
        assert screen[b] <= box.x0 and box.x1 <= screen[b + 1], t.get_text()


def edge_value_texts(ax):
    """The edge values printed above the histogram (the bucket labels start with ``#``)."""
    return [t for t in ax.texts if t.get_visible() and t.get_text() and not t.get_text().startswith("#")]


@pytest.mark.parametrize("n_buckets", [2, 6, 16])
def test_edge_values_are_printed_above_their_lines_and_never_overlap(heavy, n_buckets):
    for hist in (heavy, narrow()):
        plan = analysis.optimize_edges(hist, n_buckets, batch_size=8)
        fig = plots.plot_edges_on_histogram(hist, plan)
        FigureCanvasAgg(fig).draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        values = edge_value_texts(ax)
        inner = plan.edges[1:-1]
        shown = [int(t.get_text().replace(",", "")) for t in values]
        assert shown and set(shown) <= set(inner)
        tables = [c for a in fig.axes for c in a.get_children() if isinstance(c, Table)]
        assert shown == inner or tables, "an edge value left out: the table lists every bucket"
        own = boxes(values, renderer)
        assert_disjoint(own, "edge values")
        for box in own:
            assert box.y0 >= ax.bbox.y1  # above the axes, over no bar, line or bucket label
        title = ax.title.get_window_extent(renderer)
        assert all(box.y1 <= title.y0 for box in own)  # below the title
        for t, box in zip(values, own, strict=True):  # each centred on its own edge's line
            x = ax.transData.transform([[int(t.get_text().replace(",", "")), 0]])[0, 0]
            assert box.x0 < x < box.x1


def test_live_and_saved_edges_figures_print_the_same_edge_values(heavy):
    live = plots.EdgesOnHistogram(heavy)
    for k in (16, 3, 6):
        plan = analysis.optimize_edges(heavy, k, batch_size=8)
        live.show(plan)
        static = plots.plot_edges_on_histogram(heavy, plan)
        assert live.edge_values() == [t.get_text() for t in edge_value_texts(static.axes[0])]
        assert len(live.edge_values()) == k - 1  # all fit, live at 100 dpi too


def _crossings(fig):
    """(text, line) pairs of an axes where a drawn line passes through a text's box."""
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        texts = [t for t in ax.texts if t.get_visible() and t.get_text()]
        for t in texts:
            box = Text.get_window_extent(t, renderer)
            rect = (box.x0, box.y0, box.x1, box.y1)
            for line in ax.lines:
                if not line.get_visible() or line.get_linestyle() in ("None", "none", " ", ""):
                    continue
                xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
                pts = line.get_transform().transform(xy[np.isfinite(xy).all(axis=1)])
                if any(_segment_hits_box(tuple(a), tuple(b), rect) for a, b in zip(pts[:-1], pts[1:])):
                    yield t.get_text(), line.get_label()


def test_no_text_is_drawn_across_a_line(figures):
    for name in NO_TEXT_ON_A_LINE:
        assert not list(_crossings(figures[name])), name


def test_a_text_across_a_line_is_found():
    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], label="diagonal")
    ax.axhline(0.9, label="reference")
    ax.text(0.5, 0.5, "on the diagonal", ha="center")
    ax.text(0.6, 0.2, "below it")
    FigureCanvasAgg(fig).draw()
    assert list(_crossings(fig)) == [("on the diagonal", "diagonal")]


def test_lines_are_named_in_the_legend(figures):
    """Reference lines (a shuffle, sorted batches, the chosen K) and marked points say what
    they are in the legend, beside the axes, not in a text on the line."""
    fig = figures["efficiency_vs_buckets"]
    (legend,) = fig.legends
    names = [t.get_text() for t in legend.get_texts()]
    assert any(n.startswith("random shuffle (one bucket): ") for n in names)
    assert any(n.startswith("this report: K = 6") for n in names)
    assert not fig.axes[0].texts
    share = figures["token_share"].axes[0]
    assert not share.texts
    assert sum(t.get_text().startswith("longest ") for t in share.get_legend().get_texts()) == 3
    clip = figures["clipping"]
    assert not clip.axes[0].texts
    assert any(t.get_text().startswith("max_len = ") for t in clip.axes[0].get_legend().get_texts())


def test_narrow_buckets_get_a_table():
    hist = heavy_tail()
    plan = analysis.optimize_edges(hist, 16, batch_size=8)
    fig = plots.plot_edges_on_histogram(hist, plan)
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    full = [t for t in fig.axes[0].texts if "\n" in t.get_text()]
    assert edge_value_texts(fig.axes[0])  # the edge values still above the histogram
    assert len(full) < plan.n_buckets  # some buckets are too narrow for their label
    assert_disjoint(boxes(fig.axes[0].texts, renderer), "bucket labels")
    tables = [c for ax in fig.axes for c in ax.get_children() if isinstance(c, Table)]
    assert len(tables) == 1
    cells = tables[0].get_celld()
    assert max(r for r, _ in cells) == plan.n_buckets  # a header and a row per bucket
    assert cells[plan.n_buckets, 0].get_text().get_text() == f"#{plan.n_buckets}"
    for (row, col), cell in cells.items():  # every text inside its cell, clear of both borders
        text, frame = cell.get_text().get_window_extent(renderer), cell.get_window_extent(renderer)
        gap = 2.0 * fig.dpi / 72.0  # two points
        assert frame.x0 + gap <= text.x0 and text.x1 <= frame.x1 - gap, (row, col, text, frame)


def test_padding_per_step_compares_like_with_like(figures):
    """Every panel spans the same padded tokens, shares stay in 0..100 %, and each dashed line
    is its epoch's padding share; the shaded area is the padding of the steps drawn."""
    fig = figures["padded_per_step"]
    spans = {ax.get_xlim() for ax in fig.axes}
    assert len(spans) == 1 and spans.pop()[0] == 0
    for ax in fig.axes:
        assert ax.get_ylim() == (0.0, 1.0)
        (dashed,) = [line for line in ax.lines if line.get_linestyle() == "--"]
        assert 0 <= dashed.get_ydata()[0] <= 1 and "padding (1 − efficiency)" in dashed.get_label()
        filled = [p for p in ax.patches if p.get_fill()]
        assert len(filled) == 1
        values, edges = filled[0].get_data()[:2]
        assert np.all((values >= 0) & (values <= 1)) and np.all(np.diff(edges) > 0)


def test_padding_per_step_area_is_the_padding():
    lengths = np.random.default_rng(4).integers(1, 2_000, size=3_000)
    results = {
        s: analysis.simulate(lengths, s, rng=np.random.default_rng(0), max_tokens=8_192, edges=[0, 500, 1999])
        for s in ("random", "bucketed")
    }
    fig = plots.plot_padded_per_step(results, steps=10_000)  # the whole epochs
    for ax, res in zip(fig.axes, results.values()):
        values, edges = next(p for p in ax.patches if p.get_fill()).get_data()[:2]
        epoch = res.batches[res.batches["epoch"] == 1]
        assert edges[-1] == epoch["padded"].sum()
        assert np.sum(values * np.diff(edges)) == pytest.approx(epoch["padded"].sum() - epoch["useful"].sum())


def test_token_histogram_has_its_own_title(figures):
    a = figures["length_histogram"].axes[0].get_title()
    b = figures["token_histogram"].axes[0].get_title()
    assert a != b and "tokens" in b.lower()


def _all_text(fig):
    for ax in fig.axes:
        yield from (t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels())
        yield from (t.get_text() for t in ax.texts)
        yield ax.get_title()
        legend = ax.get_legend()
        if legend:
            yield from (t.get_text() for t in legend.get_texts())
        for table in (c for c in ax.get_children() if isinstance(c, Table)):
            yield from (cell.get_text().get_text() for cell in table.get_celld().values())
    yield fig.get_suptitle()


def test_no_negative_zero_and_no_float_counts(figures):
    for name, fig in figures.items():
        for text in _all_text(fig):
            text = text.replace("\u2212", "-")
            assert not re.search(r"(?<![\d.])-0(\.0+)?(?![\d.])", text), (name, text)
            assert not re.search(r"\d\.0(?![\d%])", text), (name, text)  # "14096.0"
            assert not re.search(r"\d\.\d{4,}", text), (name, text)
            assert "e+" not in text, (name, text)
