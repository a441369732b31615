"""The faces with and without a gradient-noise model: the frontier figure's gradient axis (drawn
from a frame built by hand from plan_quality), the summary page, the explorer's status and the
CLI, each saying the length mixing is a proxy when no model is given."""

from __future__ import annotations

import html

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from analysis import BatchRule, LengthHistogram, cli, frontier, optimize_edges, save_histogram
from analysis.answers.gradient_noise import plan_quality
from analysis.answers.recommendation import recommend
from analysis.answers.tradeoff import read_tradeoff
from analysis.explorer import explore
from analysis.narrative.frontier import MIXING_PROXY, MIXING_PROXY_CLAUSE
from analysis.narrative.noise import describe_plan_noise
from analysis.plots import plot_frontier
from analysis.plots.frontier import MIXING_AXIS_LABELS
from analysis.report._index import Source, index_html, summary_facts
from analysis.timing.noise import measure_gradient_noise
from analysis.timing.step_time import StepTimeModel

matplotlib.use("Agg")

RNG = np.random.default_rng(3)
LENGTHS = RNG.integers(1, 200, 800)
HIST = LengthHistogram.from_lengths(LENGTHS)
RULE = BatchRule(batch_size=8)
CLOCK = StepTimeModel(per_step=0.01, per_token=1e-4)


@pytest.fixture(scope="module")
def model():
    # exact per-sample gradients whose mean drifts with length: bucketing keeps less of a batch
    grads = RNG.normal(size=(LENGTHS.size, 8)) + np.outer(LENGTHS / 100, np.ones(8))
    return measure_gradient_noise(
        lambda idx: grads[idx].mean(0), LENGTHS, n_bins=8, groups_per_bin=12, rng=np.random.default_rng(0)
    )


def _gradient_frame(model) -> pd.DataFrame:
    """A frontier frame with the gradient axis, as the frontier will give it, from plan_quality."""
    rows = []
    for k in (1, 2, 4):
        plan = optimize_edges(HIST, k, RULE)
        q = plan_quality(model, HIST, RULE, edges=plan.edges)
        rows.append(("bucketed", "n_buckets", k, f"optimal edges, K={k}", plan.efficiency, q))
    for name, eff in (("random", 0.4), ("sorted", 0.99)):
        rows.append((name, None, np.nan, name, eff, plan_quality(model, HIST, RULE, strategy=name)))
    return pd.DataFrame(
        {
            "strategy": [r[0] for r in rows],
            "knob": [r[1] for r in rows],
            "knob_value": [r[2] for r in rows],
            "label": [r[3] for r in rows],
            "efficiency": [r[4] for r in rows],
            "mixing": np.linspace(0.9, 0.01, len(rows)),  # the length axis: not drawn
            "effective_batch_share": [r[5].effective_batch_share.value for r in rows],
            "effective_batch_share_se": [r[5].effective_batch_share.se for r in rows],
            "pareto": [True] * len(rows),
        }
    )


def test_the_frontier_figure_draws_the_gradient_axis_with_its_errors(model):
    frame = _gradient_frame(model)
    fig = plot_frontier(frame, mixing_axis="effective_batch_share", marks={"chosen": "optimal edges, K=4"})
    ax = fig.axes[0]
    assert ax.get_xlabel() == MIXING_AXIS_LABELS["effective_batch_share"] and ax.get_xscale() == "linear"
    assert ax.get_title() == "Padding against the effective batch: every strategy and knob"
    bucketed = frame[frame["strategy"] == "bucketed"]
    drawn = [line for line in ax.get_lines() if len(line.get_xdata()) == len(bucketed)]
    assert any(np.allclose(line.get_xdata(), bucketed["effective_batch_share"]) for line in drawn)
    assert not any(np.allclose(line.get_xdata(), bucketed["mixing"]) for line in drawn)
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 1
    (segments,) = bars[0].lines[2]
    has = frame[frame["effective_batch_share_se"] > 0]
    spans = sorted((float(s[0][0]), float(s[1][0])) for s in segments.get_segments())
    want = sorted(
        zip(
            has["effective_batch_share"] - has["effective_batch_share_se"],
            has["effective_batch_share"] + has["effective_batch_share_se"],
        )
    )
    np.testing.assert_allclose(spans, want, rtol=1e-12)
    low, high = ax.get_xlim()
    assert low < frame["effective_batch_share"].min() and high > 1.0
    # the star's caption names the share
    assert any("B_eff / B" in t.get_text() for t in ax.texts)


def test_the_length_axis_is_labelled_a_proxy():
    frame = pd.DataFrame(
        {
            "strategy": ["random", "sorted"],
            "knob": [None, None],
            "knob_value": [np.nan, np.nan],
            "label": ["random", "sorted"],
            "efficiency": [0.4, 0.99],
            "mixing": [1.0, 0.0],
            "pareto": [True, True],
        }
    )
    ax = plot_frontier(frame).axes[0]
    assert ax.get_xlabel() == MIXING_AXIS_LABELS["mixing"] and "proxy" in ax.get_xlabel()
    with pytest.raises(ValueError, match="effective_batch_share"):
        plot_frontier(frame, mixing_axis="effective_batch_share")  # no such column


@pytest.fixture(scope="module")
def trade():
    """A small trade-off (the page's default runs the whole frontier: seconds)."""
    res = frontier(
        HIST, RULE, rng=np.random.default_rng(0), max_buckets=4, n_lambdas=1, simulate_strategies=False
    )
    return read_tradeoff(res, min_efficiency=0.8)


def _page(trade, noise=None, clock=None) -> str:
    rec = recommend(HIST, 4, RULE)
    facts = summary_facts(Source("x.csv", ()), rec, HIST, seed=0, model=clock, noise=noise, trade=trade)
    return html.unescape(index_html(facts, []))


def test_the_summary_page_states_the_plan_in_gradient_noise(model, trade):
    page = _page(trade, model, CLOCK)
    q = plan_quality(model, HIST, RULE, edges=recommend(HIST, 4, RULE).plan.edges, step_time=CLOCK)
    answer = page.split('class="answer">')[1].split("</p>")[0]
    assert describe_plan_noise(q, errors=False) in answer.replace("<b>", "").replace("</b>", "")
    assert "sooner" in answer or "a shuffle's time" in answer
    fact = page.split("<dt>gradient noise</dt>")[1].split("</dd>")[0]
    assert describe_plan_noise(q) in fact and f"{model.backward_passes:,} backward passes" in fact
    without_clock = _page(trade, model)
    assert "sooner" not in without_clock and "a shuffle's steps to reach the same loss" in without_clock


def test_the_summary_page_without_a_model_calls_the_length_mixing_a_proxy(trade):
    page = _page(trade)
    assert MIXING_PROXY in page and "<dt>gradient noise</dt>" not in page and "B_eff" not in page


def test_the_explorer_shows_b_eff_for_the_edges_on_show(model):
    panel = explore(HIST, batch_size=8, n_buckets=2, noise=model, background=False)
    for k in (2, 4):
        panel.n_buckets.value = k
        q = plan_quality(model, HIST, RULE, edges=panel.view.edges)
        assert panel.view.quality is not None
        assert panel.view.quality.effective_batch == q.effective_batch
        assert html.escape(describe_plan_noise(q)) in panel.status.value
    panel.edges.value = "0, 50, 199"  # typed edges are priced too
    q = plan_quality(model, HIST, RULE, edges=[0, 50, 199])
    assert html.escape(describe_plan_noise(q)) in panel.status.value
    plain = explore(HIST, batch_size=8, n_buckets=2, background=False)
    assert plain.view.quality is None and "B_eff" not in plain.status.value


@pytest.fixture()
def lengths_file(tmp_path):
    return save_histogram(HIST, tmp_path / "lengths.csv")


def test_the_cli_calls_the_length_mixing_a_proxy(capsys, monkeypatch, lengths_file):
    monkeypatch.setenv("COLUMNS", "120")
    assert cli.main(["optimize", str(lengths_file), "--buckets", "3"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert MIXING_PROXY_CLAUSE in out
    args = ["frontier", str(lengths_file), "--max-buckets", "3", "--lambdas", "1", "--epochs", "1"]
    assert cli.main(args) == 0
    assert MIXING_PROXY in " ".join(capsys.readouterr().out.split())
    assert cli.main(["compare", str(lengths_file), "--buckets", "3", "--epochs", "1", "--wide"]) == 0
    assert MIXING_PROXY in " ".join(capsys.readouterr().out.split())


def test_the_explorer_floors_the_effective_batch_with_a_model(model):
    panel = explore(HIST, batch_size=8, n_buckets=3, noise=model, background=False)
    assert panel.floor.value == "effective_batch"  # the gradient axis, not the length proxy
    shown = panel.view.quality
    assert shown is not None
    floor = (shown.effective_batch_share.value + 1) / 2  # more of the batch than the optimum keeps
    panel.floor_value.value = repr(floor)
    want = optimize_edges(HIST, 3, RULE, noise=model, min_effective_batch=floor)
    assert panel.error is None and panel.view.plan == want
    # the floor holds on the design-effect share it floors (every batch counted as full)
    assert want.gradient is not None and want.gradient.effective_batch_share >= floor
    assert panel.view.quality == plan_quality(model, HIST, RULE, edges=want.edges)  # priced as ever
