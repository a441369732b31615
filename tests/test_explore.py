"""The edges explorer: pure update logic, and the widget's state after control changes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from analysis import BatchRule, LengthHistogram, optimize_edges
from analysis.explorer import Explorer, ExplorerView, explore, explore_figure, explore_view

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
