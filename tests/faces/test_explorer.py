"""The edges explorer: pure update logic, and the widget's state after control changes."""

from __future__ import annotations

import html
import subprocess
import sys
import threading

import numpy as np
import pytest

import analysis.explorer._plans as _plans  # the plan cache: the optimiser calls a test counts or holds
import analysis.optimize._frontier as _frontier  # the floor searches' matrices, counted
from analysis import BatchRule, LengthHistogram, evaluate_edges, explorer, optimize_edges
from analysis.explorer import Explorer, ExplorerView, explore, explore_figure, explore_view
from analysis.narrative.frontier import floor_sentence
from analysis.optimize import AUTO_CANDIDATES_ABOVE, Floor
from analysis.padding.waste import expected_padding
from analysis.plots import EdgesOnHistogram, plot_edges_on_histogram
from analysis.tables import format_bound, format_count

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
        "optimal, 2 buckets: efficiency 92.31%, padded tokens 17 for 16 useful (waste 1)"
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
    assert panel.rule_value.value == str(8 * HIST.max)
    assert panel.wait(timeout=60) and panel.view.source == "equal_count"
    assert panel.view.plan.batch_sizes == [8 * HIST.max // e for e in panel.view.edges[1:]]
    panel.rule_value.value = "20_000"
    assert panel.wait(timeout=60) and panel.view.source == "equal_count"
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
    assert panel.view.plan.rule == BatchRule(max_tokens=8 * HIST.max, pad_to_multiple_of=64)  # at once
    assert panel.wait(timeout=60) and panel.view.source == "optimal"
    assert panel.view.plan.rule == BatchRule(max_tokens=8 * HIST.max, pad_to_multiple_of=64)
    panel.edges.value = "0 500 1999"
    assert panel.view.source == "edited" and panel.view.plan.rule.pad_to_multiple_of == 64


# ------------------------------------------------------------------ interactive speed
def _shown(panel):
    """What the panel displays: status text, table rows' efficiencies, drawn edges, title."""
    return (
        panel.status.value,
        panel.table.value,
        panel.plot.edge_positions(),
        panel.plot.ax.get_title(),
    )


def _expected_display(source, est, provisional=None):
    """The same display computed from an independent padding estimate (``provisional``: the
    words for the edges shown while the optimal ones are computed)."""
    plural = "" if est.n_buckets == 1 else "s"
    numbers = (
        f"{est.n_buckets} bucket{plural}: efficiency {100 * est.efficiency:.2f}%, padded tokens "
        f"{format_count(est.padded_tokens)} for {est.useful_tokens:,} useful "
        f"(waste {format_count(est.waste_tokens)})"
    )
    if est.rule.max_tokens is not None:  # no sample beyond the budget here: max_tokens per step
        numbers += f", budget fill {100 * est.useful_tokens / (est.n_batches * est.rule.max_tokens):.2f}% in "
        numbers += f"{est.n_batches:,} steps"
    title = f"{source} edges, {est.n_buckets} buckets: expected efficiency {est.efficiency:.1%}"
    if provisional is None:
        return f"<b>{source}, {numbers}</b>", list(est.edges[1:-1]), title
    status = (
        f"<b>computing the optimal edges for {est.rule.text} in the background; shown meanwhile, "
        f"under that rule: {source} edges ({provisional}), {numbers}</b>"
    )
    return status, list(est.edges[1:-1]), f"{title} (optimal edges being computed)"


def _check_display(panel, source, est, provisional=None):
    status, interior, title = _expected_display(source, est, provisional)
    shown_status, table, drawn, shown_title = _shown(panel)
    assert shown_status == status
    assert drawn == interior
    assert shown_title.startswith(title + "\n")
    effs = [f"{100 * x:.2f}%" for x in est.to_frame()["efficiency"]]  # as every table: tables.tidy
    cells = [table.index(f"<td>{e}</td>") for e in effs]  # every bucket's efficiency, in order
    assert cells == sorted(cells) and table.count("<tr>") == 1 + est.n_buckets


def test_displayed_numbers_equal_the_engine_after_every_interaction():
    panel = explore(HIST, batch_size=8, n_buckets=3)
    figure = panel.plot.figure
    rule = BatchRule(batch_size=8)
    pngs = [panel.image.value]

    def step(source, plan):
        assert panel.wait(timeout=60)  # a new batch rule's pass runs in the background
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
    panel.rule_value.value = "3"
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

    monkeypatch.setattr(_plans, "sweep_bucket_counts", counted("sweep", _plans.sweep_bucket_counts))
    monkeypatch.setattr(_plans, "optimize_edges", counted("optimize", _plans.optimize_edges))
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
    panel.rule_value.value = "16"  # a new batch rule: one new pass
    panel.rule_value.value = "8"  # back: a lookup
    assert panel.wait(timeout=60)
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
    assert live.labels() == [t.get_text() for t in ax.texts if t.get_text().startswith("#")]
    assert len(live.labels()) == 3
    assert live.edge_values() == [f"{e:,}" for e in plan.edges[1:-1]]  # printed above the axes
    assert live.ax.get_title() == ax.get_title()
    np.testing.assert_allclose(live._bars[0].get_facecolors(), [p.get_facecolor() for p in ax.patches])
    assert live.png()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_plan_from_the_candidate_grid_says_how_far_from_the_optimum_it_may_be():
    wide = LengthHistogram.from_lengths(np.arange(1, AUTO_CANDIDATES_ABOVE + 2))  # one length above it
    panel = explore(wide, batch_size=8, n_buckets=2)
    plan = optimize_edges(wide, 2, batch_size=8)
    shown = panel.view.plan  # from the panel's sweep over K = 1..16: its own proof of the bound
    assert shown == plan and not shown.exact and 0 < shown.gap < 0.01
    bound = format_bound(100 * shown.gap)  # rounded up: the bound written still holds
    assert float(bound) >= 100 * shown.gap
    assert f"at most {bound}% above the optimum (proven bound)" in panel.status.value


@pytest.mark.parametrize("background", [False, True])
def test_switching_the_batch_rule_places_and_draws_once(monkeypatch, background):
    panel = explore(HIST, batch_size=8, n_buckets=3, background=background)
    drawn = []
    real_png = panel.plot.png
    monkeypatch.setattr(panel.plot, "png", lambda: drawn.append(1) or real_png())
    panel.rule.value = "max_tokens"  # also sets rule_value: one placement, one redraw
    assert panel.wait(timeout=60)
    # in the background, the provisional view and then the optimal plan: one redraw each
    assert len(drawn) == 1 + background and panel._plans.sweeps == 2
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


# ------------------------------------------------------------------ the optimiser in the background
#: Seconds a held pass waits for its gate at most: a safety net that ends a failing test
#: (a callback that waits for the pass) instead of hanging it.
GATE_S = 30


class HeldSweep:
    """``sweep_bucket_counts`` holding each pass until the test opens its rule's gate, and
    recording which thread ran it and which passes ended."""

    def __init__(self, real):
        self.real = real
        self._lock = threading.Lock()
        self._gates = {}
        self.threads = []
        self.finished = []
        self.all_open = False

    def gate(self, rule):
        with self._lock:
            if rule not in self._gates:
                self._gates[rule] = threading.Event()
                if self.all_open:
                    self._gates[rule].set()
            return self._gates[rule]

    def open(self, rule):
        self.gate(rule).set()

    def open_all(self):
        with self._lock:
            self.all_open = True
            for gate in self._gates.values():
                gate.set()

    def __call__(self, hist, n_buckets, methods, rule, **kwargs):
        self.threads.append(threading.current_thread())
        self.gate(rule).wait(timeout=GATE_S)
        out = self.real(hist, n_buckets, methods, rule, **kwargs)
        self.finished.append(rule)
        return out


@pytest.fixture
def held(monkeypatch):
    """Every optimiser sweep from here on waits for ``held.open(rule)``; all open at the end."""
    sweep = HeldSweep(_plans.sweep_bucket_counts)
    monkeypatch.setattr(_plans, "sweep_bucket_counts", sweep)
    yield sweep
    sweep.open_all()


def _held_panel(held, **start):
    """``explore(HIST, **start)`` with the starting rule's sweep let through (it runs here)."""
    held.open(BatchRule.resolve(start.get("batch_size"), None, start.get("pad_to_multiple_of")))
    panel = explore(HIST, **start)
    held.threads.clear()
    held.finished.clear()
    return panel


def test_a_new_batch_rule_redraws_before_its_pass_ends(held):
    panel = _held_panel(held, batch_size=8, n_buckets=4, pad_to_multiple_of=8)
    shown, png = panel.view.edges, panel.image.value
    new = BatchRule(batch_size=16, pad_to_multiple_of=8)
    panel.rule_value.value = "16"  # returns while the pass is held at its gate
    assert held.finished == [] and not panel.wait(timeout=0)  # the callback did not wait for it
    assert (
        panel.view.source == "previous"
        and panel.view.provisional == "optimal, batch_size 8, pad_to_multiple_of 8"
    )
    assert panel.view.edges == shown and panel.edges.value == panel.view.edges_text()
    assert panel.view.plan == evaluate_edges(HIST, shown, new, method="previous")
    _check_display(panel, "previous", expected_padding(HIST, shown, new), panel.view.provisional)
    assert "computing the optimal edges for batch_size 16" in panel.status.value
    assert panel.image.value != png

    held.open(new)
    assert panel.wait(timeout=GATE_S)
    assert held.finished == [new] and held.threads[0] is not threading.main_thread()
    assert panel.view.plan == optimize_edges(HIST, 4, new) and panel.view.provisional is None
    _check_display(panel, "optimal", expected_padding(HIST, panel.view.edges, new))


def test_a_new_k_while_the_pass_runs_shows_quick_edges_for_that_k(held):
    panel = _held_panel(held, batch_size=8, n_buckets=4)
    new = BatchRule(batch_size=16)
    panel.rule_value.value = "16"
    panel.n_buckets.value = 7  # the shown edges have 4 buckets: the stand-in places 7
    stand_in = optimize_edges(HIST, 7, new, method=explorer.STAND_IN_METHOD)
    assert panel.view.plan == stand_in and panel.view.provisional == "placed for the new K"
    _check_display(panel, explorer.STAND_IN_METHOD, stand_in.estimate, "placed for the new K")
    panel.rule_value.value = "8"  # seen: a lookup, final at once
    assert panel.view.provisional is None and panel.view.plan == optimize_edges(HIST, 7, batch_size=8)
    panel.rule_value.value = "16"  # its pass still held: the shown edges under 16 meanwhile
    assert panel.view.source == "previous" and panel.view.provisional == "optimal, batch_size 8"
    assert panel.view.plan.estimate == expected_padding(
        HIST, optimize_edges(HIST, 7, batch_size=8).edges, new
    )
    held.open(new)
    assert panel.wait(timeout=GATE_S)
    assert panel.view.plan == optimize_edges(HIST, 7, new) and panel._plans.sweeps == 2


def test_method_optimal_the_first_time_shows_the_rule_s_edges_meanwhile(held):
    panel = _held_panel(held, batch_size=8, n_buckets=5, method="equal_tokens")
    placed = panel.view.plan
    panel.method.value = "optimal"
    assert panel.view.provisional == "equal_tokens, batch_size 8"
    assert panel.view.plan.estimate == placed.estimate  # the same edges under the same rule
    held.open(BatchRule(batch_size=8))
    assert panel.wait(timeout=GATE_S)
    assert panel.view.plan == optimize_edges(HIST, 5, batch_size=8)


@pytest.mark.parametrize("first", ["asked for", "left behind"])
def test_quick_changes_run_one_pass_per_rule_and_end_on_the_last_choice(held, first):
    panel = _held_panel(held, batch_size=8, n_buckets=4)
    a, b = BatchRule(batch_size=16), BatchRule(batch_size=24)
    for value in (16, 24, 16):  # A, B, A again
        panel.rule_value.value = str(value)
    # the start's, A's, B's (a pass is kept per rule and floor: none here)
    assert panel._plans.sweeps == 3 and set(panel._pending) == {(a, None), (b, None)}
    one, other = (a, b) if first == "asked for" else (b, a)
    worker = panel._pending[(one, None)]
    held.open(one)
    worker.join(timeout=GATE_S)
    assert not worker.is_alive()
    if one == a:
        assert panel.view.plan == optimize_edges(HIST, 4, a)
    else:  # B's result is kept, not shown: the panel still waits for A
        assert panel.view.provisional is not None and panel.view.plan.rule == a
    held.open(other)
    assert panel.wait(timeout=GATE_S)
    assert panel.view.plan == optimize_edges(HIST, 4, a) and panel.view.provisional is None
    assert sorted(held.finished, key=lambda r: r.batch_size) == [a, b] and panel._plans.sweeps == 3
    panel.rule_value.value = "24"  # B was kept: a lookup
    assert panel.view.plan == optimize_edges(HIST, 4, b) and panel._plans.sweeps == 3


def test_edges_typed_while_the_pass_runs_stay_on_show(held):
    panel = _held_panel(held, batch_size=8, n_buckets=4)
    new = BatchRule(batch_size=16)
    panel.rule_value.value = "16"
    panel.edges.value = "0, 700, 1999"
    held.open(new)
    assert panel.wait(timeout=GATE_S)
    assert panel.view.source == "edited" and panel.view.edges == [0, 700, 1999]
    assert panel.view.plan.estimate == expected_padding(HIST, [0, 700, 1999], new)
    panel.n_buckets.value = 5  # the pass was kept: a lookup
    assert panel.view.plan == optimize_edges(HIST, 5, new)


def test_without_background_the_pass_runs_in_the_callback(held):
    panel = _held_panel(held, batch_size=8, n_buckets=4, background=False)
    new = BatchRule(batch_size=16)
    held.open(new)
    panel.rule_value.value = "16"
    assert held.threads == [threading.current_thread()] and held.finished == [new]
    assert panel.view.plan == optimize_edges(HIST, 4, new) and not panel._pending and panel.wait(timeout=0)


FAILURE = "no 4 non-empty buckets: the bucket costs are not finite"


def _fail(*args, **kwargs):
    raise ValueError(FAILURE)


def test_a_failed_sweep_places_k_by_k_in_the_background(monkeypatch):
    panel = explore(HIST, batch_size=8, n_buckets=4)
    monkeypatch.setattr(_plans, "sweep_bucket_counts", _fail)
    panel.rule_value.value = "16"
    assert panel.wait(timeout=GATE_S)
    assert panel.error is None and panel.view.plan == optimize_edges(HIST, 4, batch_size=16)
    panel.n_buckets.value = 6  # this K was not placed yet: again in the background
    assert panel.wait(timeout=GATE_S)
    assert panel.view.plan == optimize_edges(HIST, 6, batch_size=16) and panel._plans.sweeps == 2


def test_an_error_in_the_background_shows_in_the_status(monkeypatch):
    panel = explore(HIST, batch_size=8, n_buckets=4)
    monkeypatch.setattr(_plans, "sweep_bucket_counts", _fail)
    monkeypatch.setattr(_plans, "optimize_edges", _fail)  # the K-by-K placement fails too
    panel.rule_value.value = "16"
    assert panel.wait(timeout=GATE_S)
    assert panel.error == FAILURE and html.escape(FAILURE) in panel.status.value


def test_a_bug_in_the_background_ends_the_wait_and_shows_in_the_status(monkeypatch):
    panel = explore(HIST, batch_size=8, n_buckets=4)

    def broken(*args, **kwargs):
        raise RuntimeError("index out of range")

    monkeypatch.setattr(_plans, "sweep_bucket_counts", broken)
    panel.rule_value.value = "16"
    assert panel.wait(timeout=GATE_S) and not panel._pending
    assert panel.error == "the optimiser failed for batch_size 16: RuntimeError: index out of range"
    assert "RuntimeError" in panel.status.value


@pytest.mark.parametrize(
    ("typed", "cli_value"),
    [("46000000000000000000", "46000000000000000000"), ("4.6e18", "4.6e18"), ("0", "0"), ("-8", "-8")],
)
def test_the_rule_box_refuses_what_the_cli_refuses_with_the_same_message(typed, cli_value, capsys):
    """A browser's number box clamped a mistyped 4.6e19 to 2**62 (4.6e18) and went on; the
    box is text read by the CLI's own rule, and refuses it with the CLI's message."""
    from analysis import cli

    panel = explore(HIST, batch_size=8, n_buckets=3, background=False)
    shown = panel.view
    panel.rule.value = "max_tokens"
    panel.rule_value.value = typed
    assert panel.view.plan.rule.max_tokens != 46 * 10**18  # nothing placed under a refused value
    code = cli.main(["optimize", "x.csv", "--max-tokens", cli_value])
    cli_line = capsys.readouterr().err.strip()
    assert code == 2 and cli_line.startswith("padding-workbench: error: argument --max-tokens: ")
    assert panel.error == f"max_tokens: {cli_line.split('argument --max-tokens: ', 1)[1]}"
    assert html.escape(panel.error) in panel.status.value
    assert shown is not None


def test_the_rule_box_shows_the_largest_value_whole():
    from analysis.batching import MAX_RULE_VALUE
    from analysis.explorer._panel import RULE_BOX_WIDTH

    panel = explore(HIST, max_tokens=3_386_800, n_buckets=3, background=False)
    assert panel.rule_value.value == "3386800" and panel.view.plan.rule.max_tokens == 3_386_800
    assert panel.rule_value.layout.width == RULE_BOX_WIDTH
    digits = int(RULE_BOX_WIDTH.split("(")[1].split("ch")[0])
    assert digits >= len(str(MAX_RULE_VALUE)) + 1  # every digit of 2**62, and the caret
    panel.rule_value.value = f"{MAX_RULE_VALUE:,}"  # the largest value the rule takes
    assert panel.error is None and panel.view.plan.rule.max_tokens == MAX_RULE_VALUE


# ------------------------------------------------------------------ a floor
#: 390 distinct lengths: a floor search on them takes a tenth of HIST's time, and the panel's
#: plans are checked against optimize_edges on the same histogram either way.
FLOORED = LengthHistogram.from_lengths(np.random.default_rng(6).integers(10, 400, size=3_000))


def _held_floored(held, **start):
    held.open(BatchRule.resolve(start.get("batch_size"), None, None))
    panel = explore(FLOORED, **start)
    held.threads.clear()
    return panel


def test_a_floor_places_the_best_plan_meeting_it_in_the_background_once_per_k(held):
    panel = _held_floored(held, batch_size=8, n_buckets=4)
    rule, floor = BatchRule(batch_size=8), Floor("mixing", 0.3)
    assert panel.view.plan.mixing < 0.3 and panel.floor.value == "mixing"  # the optimum keeps less
    panel.floor_value.value = "30%"
    assert panel.view.provisional is not None and panel.view.floor == floor  # the callback returned
    assert html.unescape(panel.status.value).startswith(
        "<b>computing the optimal edges for batch_size 8 with mixing of at least 30.0% in the background"
    )
    assert panel.wait(timeout=GATE_S)
    want = optimize_edges(FLOORED, 4, rule, min_mixing=0.3)
    assert panel.view.plan == want and want.floor is not None and want.mixing >= 0.3
    assert panel.edges.value == ", ".join(map(str, want.edges))
    sentence = floor_sentence(want)
    assert sentence is not None and html.escape(sentence) in panel.status.value
    panel.n_buckets.value = 5  # a K the floor has not placed: its own pass
    assert panel.wait(timeout=GATE_S)
    assert panel.view.plan == optimize_edges(FLOORED, 5, rule, min_mixing=0.3)
    assert set(panel._plans._floored[(rule, floor)]) == {4, 5}
    panel.n_buckets.value = 4  # placed: a lookup, final at once
    assert panel.view.provisional is None and panel.view.plan == want
    panel.floor_value.value = ""  # no floor: the sweep's optimum, kept
    assert panel.view.plan == optimize_edges(FLOORED, 4, rule) and panel._plans.sweeps == 1  # the start's


def test_the_objective_floor_is_the_efficiency_or_under_a_budget_the_budget_fill():
    panel = explore(FLOORED, batch_size=8, n_buckets=3, background=False)
    panel.floor.value = "objective"
    panel.floor_value.value = "0.7"  # the optimum: 80.88 % efficiency, 76.17 % budget fill
    assert panel.view.plan == optimize_edges(FLOORED, 3, batch_size=8, min_efficiency=0.7)
    panel.rule.value = "max_tokens"
    budget = BatchRule(max_tokens=8 * FLOORED.max)
    assert panel.view.plan == optimize_edges(FLOORED, 3, budget, min_budget_fill=0.7)
    assert panel.view.floor == Floor("budget_fill", 0.7) and panel.error is None
    panel.floor_value.value = "0.9"  # unreachable: the optimiser's one line
    assert panel.error == "min_budget_fill = 0.9 is unreachable with 3 buckets: the best is 0.7617"


def test_a_refused_floor_is_one_line_and_a_field_rule_says_the_floor_is_not_its():
    panel = explore(FLOORED, batch_size=8, n_buckets=3, background=False)
    shown = panel.view
    panel.floor_value.value = "1.5"
    assert panel.error == "mixing floor: expected a number in (0, 1] or a percentage, got '1.5'"
    assert panel.view is shown  # nothing placed
    panel.floor_value.value = "20%"
    panel.method.value = "greedy"  # floors place the optimal edges only
    assert panel.view.plan == optimize_edges(FLOORED, 3, batch_size=8, method="greedy")
    line = "the floor (mixing of at least 20.0%) places the optimal edges only: these are greedy edges"
    assert html.escape(line) in panel.status.value
    with pytest.raises(ValueError, match="^floor: the panel floors mixing or budget_fill under max_tokens"):
        explore(FLOORED, max_tokens=20_000, floor=Floor("efficiency", 0.9))


def test_a_starting_floor_places_synchronously_and_shows_its_value():
    panel = explore(FLOORED, batch_size=8, n_buckets=2, floor=Floor("efficiency", 0.65))
    assert panel.floor.value == "objective" and panel.floor_value.value == "0.65"
    assert panel.view.plan == optimize_edges(FLOORED, 2, batch_size=8, min_efficiency=0.65)


def test_a_floor_makes_the_matrices_of_a_rule_once_for_every_k(monkeypatch):
    made = []
    real = _frontier._make_lagrangian
    monkeypatch.setattr(_frontier, "_make_lagrangian", lambda *a: made.append(a[1].rule) or real(*a))
    panel = explore(FLOORED, batch_size=8, n_buckets=3, background=False, floor=Floor("mixing", 0.3))
    for k in (4, 5):
        panel.n_buckets.value = k
    panel.rule_value.value = "16"
    assert made == [BatchRule(batch_size=8), BatchRule(batch_size=16)]
    assert panel.view.plan == optimize_edges(FLOORED, 5, batch_size=16, min_mixing=0.3)
    assert len(panel._plans._matrices) == 2
