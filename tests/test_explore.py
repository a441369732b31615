"""The edges explorer: pure update logic, and the widget's state after control changes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from analysis import BatchRule, LengthHistogram, expected_padding, explorer, optimize_edges
from analysis.explorer import Explorer, ExplorerView, explore, explore_figure, explore_view
from analysis.plots import EdgesOnHistogram, plot_edges_on_histogram
from analysis.waste import tokens_text

HIST = LengthHistogram.from_lengths(np.random.default_rng(5).integers(10, 2_000, size=4_000))


def test_view_is_a_plan_and_where_it_came_from():
    # lengths 1, 2, 3 | 10 in batches of 2: the pair of the first bucket has E[max] = 8/3, the
    # leftover pads to the mean 2, the 10 is alone: padded 16/3 + 2 + 10 = 52/3, useful 16
    view = explore_view([1, 2, 3, 10], n_buckets=2, batch_size=2)
    assert isinstance(view, ExplorerView) and view.source == "optimal"
    assert view.edges == [0, 3, 10] and view.n_buckets == 2
    assert view.plan.rule == BatchRule(batch_size=2)
    assert view.plan.padded_tokens == pytest.approx(52 / 3, rel=1e-12)
    assert view.efficiency == pytest.approx(16 / (52 / 3), rel=1e-12)
    assert view.to_frame()["samples"].tolist() == [3, 1]
    assert view.status() == (
        "optimal, 2 buckets: efficiency 0.9231, padded tokens 17 for 16 useful (waste 1)"
    )


def test_view_with_no_rule_uses_the_default_batch_size_and_places_by_method():
    view = explore_view(HIST, n_buckets=4, method="equal_count")
    assert view.source == "equal_count" and view.n_buckets == 4
    assert view.plan.rule == BatchRule(batch_size=8)
    assert view.to_frame()["samples"].sum() == HIST.n_samples


def test_edited_edges_are_evaluated_as_typed():
    view = explore_view(HIST, max_tokens=16_384, edges="0, 500 1000,2000")  # commas or spaces
    assert view.source == "edited" and view.edges == [0, 500, 1000, 2000]
    assert view.plan.batch_sizes == [32, 16, 8]
    # one bucket of 3 samples under max_tokens 12 (4 fit): one batch padded to 3 * 3; then 10
    small = explore_view([1, 2, 3, 10], max_tokens=12, pad_to_multiple_of=1, edges="0 3 10")
    assert small.plan.batch_sizes == [4, 1] and small.plan.padded_tokens == 19
    assert explore_view([1, 2, 3, 10], batch_size=2, edges=[0, 1, 10]).edges == [0, 1, 10]


@pytest.mark.parametrize(
    "text, match",
    [
        ("0, 500, 400, 2000", "strictly increasing"),
        ("0, 500, 1000", "cover"),
        ("0, x, 2000", "integers"),
    ],
)
def test_bad_edges_raise_value_error(text, match):
    with pytest.raises(ValueError, match=match):
        explore_view(HIST, batch_size=8, edges=text)


def test_figure_draws_every_edge():
    view = explore_view(HIST, n_buckets=5, batch_size=8)
    fig = explore_figure(HIST, view)
    assert [line.get_xdata()[0] for line in fig.axes[0].lines] == view.edges[1:-1]
    assert "edges, 5 buckets" in fig.axes[0].get_title()


def test_widget_builds_and_controls_update_the_outputs():
    panel = explore(HIST, batch_size=8, n_buckets=3)
    assert isinstance(panel, Explorer) and panel.view.n_buckets == 3
    first_png, first_status = panel.image.value, panel.status.value
    assert first_png[:8] == b"\x89PNG\r\n\x1a\n" and "efficiency" in first_status

    panel.n_buckets.value = 6  # drag the slider
    assert panel.view.edges == list(optimize_edges(HIST, 6, batch_size=8).edges)
    assert panel.edges.value == panel.view.edges_text()
    assert panel.image.value != first_png and panel.status.value != first_status
    assert panel.table.value.count("<tr>") == 1 + 6  # header + one row per bucket

    panel.method.value = "equal_count"
    assert panel.view.source == "equal_count"
    assert panel.view.edges == list(optimize_edges(HIST, 6, batch_size=8, method="equal_count").edges)

    panel.edges.value = "0, 300, 900, 1999"  # type edges, press Enter
    assert panel.view.source == "edited" and panel.view.edges == [0, 300, 900, 1999]
    assert panel.error is None

    panel.edges.value = "0, 900, 300, 1999"  # a mistake: the view stays, the status says why
    assert panel.error is not None and "increasing" in panel.status.value
    assert panel.view.edges == [0, 300, 900, 1999]

    panel.rule.value = "max_tokens"  # switching the rule re-places the edges
    assert panel.rule_value.value == 8 * HIST.max
    assert panel.view.plan.batch_sizes == [8 * HIST.max // e for e in panel.view.edges[1:]]
    panel.rule_value.value = 20_000
    assert panel.view.plan.batch_sizes == [max(1, 20_000 // e) for e in panel.view.edges[1:]]


def test_widget_rejects_bad_starting_values():
    with pytest.raises(ValueError, match="method"):
        explore(HIST, method="magic")
    with pytest.raises(ValueError, match="n_buckets"):
        explore(HIST, n_buckets=0)
    with pytest.raises(ValueError, match="both"):
        explore(HIST, batch_size=8, max_tokens=100)


def test_analysis_explore_is_lazy_and_not_loaded_by_import_analysis():
    import analysis

    assert analysis.explore is explore
    assert isinstance(analysis.explore(HIST, n_buckets=2), Explorer)
    code = "import sys, analysis; print('ipywidgets' in sys.modules, 'analysis.explorer' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_display_bundle_has_the_widget_and_a_stable_text():
    panel = explore(HIST, batch_size=8, n_buckets=2)
    bundle = panel._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"] == f"Explorer({panel.view.status()})"


def test_pad_to_multiple_of_survives_every_control():
    panel = explore(HIST, batch_size=8, n_buckets=2, pad_to_multiple_of=64)
    assert panel.view.plan.rule == BatchRule(batch_size=8, pad_to_multiple_of=64)
    panel.rule.value = "max_tokens"
    assert panel.view.plan.rule == BatchRule(max_tokens=8 * HIST.max, pad_to_multiple_of=64)
    panel.edges.value = "0 500 1999"
    assert panel.view.source == "edited" and panel.view.plan.rule.pad_to_multiple_of == 64


# ------------------------------------------------------------------ interactive speed (issue 14)
def _shown(panel):
    """What the panel displays: status text, table rows' efficiencies, drawn edges, title."""
    return (
        panel.status.value,
        panel.table.value,
        panel.plot.edge_positions(),
        panel.plot.ax.get_title(),
    )


def _expected_display(source, est):
    """The same display computed from an independent padding estimate."""
    plural = "" if est.n_buckets == 1 else "s"
    status = (
        f"<b>{source}, {est.n_buckets} bucket{plural}: efficiency {est.efficiency:.4f}, padded tokens "
        f"{tokens_text(est.padded_tokens)} for {est.useful_tokens:,} useful "
        f"(waste {tokens_text(est.waste_tokens)})</b>"
    )
    title = f"{source} edges, {est.n_buckets} buckets: expected efficiency {est.efficiency:.1%}"
    return status, list(est.edges[1:-1]), title


def _check_display(panel, source, est):
    status, interior, title = _expected_display(source, est)
    shown_status, table, drawn, shown_title = _shown(panel)
    assert shown_status == status
    assert drawn == interior
    assert shown_title.startswith(title + "\n")
    effs = [f"{x:,.4f}" for x in est.to_frame()["efficiency"]]
    cells = [table.index(f"<td>{e}</td>") for e in effs]  # every bucket's efficiency, in order
    assert cells == sorted(cells) and table.count("<tr>") == 1 + est.n_buckets


def test_displayed_numbers_equal_the_engine_after_every_interaction():
    panel = explore(HIST, batch_size=8, n_buckets=3)
    figure = panel.plot.figure
    rule = BatchRule(batch_size=8)
    pngs = [panel.image.value]

    def step(source, plan):
        assert panel.view.plan == plan  # the whole plan: estimate, objective, exact, K requested
        _check_display(panel, source, expected_padding(HIST, plan.edges, plan.rule))
        assert panel.image.value != pngs[-1] and panel.plot.figure is figure
        pngs.append(panel.image.value)

    panel.n_buckets.value = 7
    step("optimal", optimize_edges(HIST, 7, rule))
    panel.n_buckets.value = 2
    step("optimal", optimize_edges(HIST, 2, rule))
    panel.method.value = "equal_tokens"
    step("equal_tokens", optimize_edges(HIST, 2, rule, method="equal_tokens"))
    panel.edges.value = "0, 250, 1100, 1999"  # move edges by hand: the padding model only
    edited = expected_padding(HIST, [0, 250, 1100, 1999], rule)
    assert panel.view.plan.estimate == edited
    _check_display(panel, "edited", edited)
    panel.method.value = "optimal"
    step("optimal", optimize_edges(HIST, 2, rule))
    panel.rule_value.value = 3
    step("optimal", optimize_edges(HIST, 2, batch_size=3))
    panel.rule.value = "max_tokens"
    step("optimal", optimize_edges(HIST, 2, max_tokens=8 * HIST.max))
    panel.n_buckets.value = 16
    step("optimal", optimize_edges(HIST, 16, max_tokens=8 * HIST.max))


def test_every_k_from_the_one_sweep_is_the_optimize_edges_plan():
    panel = explore(HIST, batch_size=5, n_buckets=1, pad_to_multiple_of=8)
    rule = BatchRule(batch_size=5, pad_to_multiple_of=8)
    for k in range(1, 17):
        panel.n_buckets.value = k
        assert panel.view.plan == optimize_edges(HIST, k, rule), k


def test_the_optimiser_runs_once_per_method_and_batch_rule(monkeypatch):
    calls = {"sweep": 0, "optimize": 0}

    def counted(name, real):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(explorer, "sweep_bucket_counts", counted("sweep", explorer.sweep_bucket_counts))
    monkeypatch.setattr(explorer, "optimize_edges", counted("optimize", explorer.optimize_edges))
    panel = explore(HIST, batch_size=8, n_buckets=4)
    assert calls == {"sweep": 1, "optimize": 0}
    for k in [*range(1, 17), *range(16, 0, -1)]:  # drag the slider all the way and back
        panel.n_buckets.value = k
    panel.edges.value = "0, 700, 1999"  # an edited edge needs no optimiser
    assert calls == {"sweep": 1, "optimize": 0}
    panel.method.value = "equal_count"  # a field rule: placed per K, once each
    panel.n_buckets.value = 3
    panel.n_buckets.value = 1
    panel.n_buckets.value = 3
    assert calls == {"sweep": 1, "optimize": 2}
    panel.method.value = "optimal"  # seen before: a lookup
    assert calls == {"sweep": 1, "optimize": 2}
    panel.rule_value.value = 16  # a new batch rule: one new pass
    panel.rule_value.value = 8  # back: a lookup
    assert calls == {"sweep": 2, "optimize": 2}
    assert panel.view.plan == optimize_edges(HIST, 3, batch_size=8)


def test_live_figure_draws_what_the_static_figure_draws():
    live = EdgesOnHistogram(HIST)
    wide = optimize_edges(HIST, 12, batch_size=8)
    live.show(wide)  # then fewer buckets: the extra lines and labels must go
    plan = optimize_edges(HIST, 3, batch_size=8)
    live.show(plan)
    static = plot_edges_on_histogram(HIST, plan)
    ax = static.axes[0]
    assert live.edge_positions() == [line.get_xdata()[0] for line in ax.lines] == plan.edges[1:-1]
    assert live.labels() == [t.get_text() for t in ax.texts] and len(live.labels()) == 3
    assert live.ax.get_title() == ax.get_title()
    np.testing.assert_allclose(live._bars.get_facecolors(), [p.get_facecolor() for p in ax.patches])
    assert live.png()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_plan_from_the_candidate_grid_says_how_far_from_the_optimum_it_may_be():
    wide = LengthHistogram.from_lengths(np.arange(1, 25_001))  # above AUTO_CANDIDATES_ABOVE lengths
    panel = explore(wide, batch_size=8, n_buckets=2)
    plan = optimize_edges(wide, 2, batch_size=8)
    shown = panel.view.plan  # from the panel's sweep over K = 1..16: its own proof of the bound
    assert shown == plan and not shown.exact and 0 < shown.gap < 0.01
    assert f"at most {shown.gap:.2%} above the optimum (proven bound)" in panel.status.value


def test_switching_the_batch_rule_places_and_draws_once(monkeypatch):
    panel = explore(HIST, batch_size=8, n_buckets=3)
    drawn = []
    real_png = panel.plot.png
    monkeypatch.setattr(panel.plot, "png", lambda: drawn.append(1) or real_png())
    panel.rule.value = "max_tokens"  # also sets rule_value: one placement, one redraw
    assert len(drawn) == 1 and panel._plans.sweeps == 2
    assert panel.view.plan == optimize_edges(HIST, 3, max_tokens=8 * HIST.max)


def test_live_figure_renders_the_pixels_of_a_full_draw():
    live = EdgesOnHistogram(HIST)
    for plan in (
        optimize_edges(HIST, 6, batch_size=8),
        optimize_edges(HIST, 2, batch_size=64, method="geometric"),  # below 50 %: a new colour scale
        optimize_edges(HIST, 12, batch_size=8),
    ):
        live.show(plan)
        fast = live.render().astype(int)  # the kept background and the changing artists
        live.figure.canvas.draw()
        full = np.asarray(live.figure.canvas.buffer_rgba()).astype(int)
        assert np.abs(fast - full).max() <= 1  # antialiasing of the spine over the bars, at most
