"""The edges explorer: pure update logic, and the widget's state after control changes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from analysis import LengthHistogram, expected_padding, optimize_edges
from analysis.explorer import Explorer, explore, explore_figure, explore_view, parse_edges

HIST = LengthHistogram.from_lengths(np.random.default_rng(5).integers(10, 2_000, size=4_000))


def test_view_is_the_optimiser_plus_the_exact_expectation():
    view = explore_view(HIST, n_buckets=4, batch_size=8)
    plan = optimize_edges(HIST, 4, batch_size=8)
    est = expected_padding(HIST, plan.edges, batch_size=8)
    assert view.edges == list(plan.edges) and view.source == "optimal"
    assert view.efficiency == est.efficiency and view.padded_tokens == est.padded_tokens
    assert view.table["samples"].sum() == HIST.n_samples


def test_edited_edges_are_evaluated_as_typed():
    view = explore_view(HIST, max_tokens=16_384, edges="0, 500, 1000, 2000")
    est = expected_padding(HIST, [0, 500, 1000, 2000], max_tokens=16_384)
    assert view.source == "edited" and view.batch_sizes == [32, 16, 8]
    assert view.padded_tokens == est.padded_tokens


@pytest.mark.parametrize("text, match", [
    ("0, 500, 400, 2000", "strictly increasing"),
    ("0, 500, 1000", "cover"),
    ("0, x, 2000", "integers"),
])
def test_bad_edges_raise_value_error(text, match):
    with pytest.raises(ValueError, match=match):
        explore_view(HIST, batch_size=8, edges=text)


def test_parse_edges_accepts_commas_and_spaces():
    assert parse_edges(" 0,10 20 ,30 ") == [0, 10, 20, 30]


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
    assert panel.view.batch_sizes == [8 * HIST.max // e for e in panel.view.edges[1:]]
    panel.rule_value.value = 20_000
    assert panel.view.batch_sizes == [max(1, 20_000 // e) for e in panel.view.edges[1:]]


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
