"""Token budgets: the steps objective against exhaustive search, degenerate plans named (the
warnings of every face), sentences that never divide by zero, and the CLI's commands agreeing
on samples longer than the budget."""

from __future__ import annotations

import importlib
import itertools
import json
import math

import numpy as np
import pytest

from analysis import LengthHistogram, StepTimeModel, evaluate_edges, optimize_edges, sweep_bucket_counts
from analysis.answers.recommendation import recommend
from analysis.cli import main
from analysis.narrative import describe_recommendation, describe_warning, plan_warnings
from analysis.optimize import PlanWarning, recommend_n_buckets, sweep_measure
from analysis.optimize import _problem as problem
from analysis.optimize._reference import reference_dp

kernel = importlib.import_module("analysis.optimize._kernel")


# ------------------------------------------------------------- the objective, independently
def steps_tokens(lengths, counts, edges, max_tokens, pad=1) -> int:
    """max_tokens per step, ceil(n / B) steps per bucket (B = max(1, max_tokens // the upper edge
    padded to a multiple of pad)), plus what each sample padded beyond the budget passes it by
    (it is alone in its batch)."""
    total = 0
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        n = sum(c for v, c in zip(lengths, counts, strict=True) if lo < v <= hi)
        if n:
            total += -(-n // max(1, max_tokens // (-(-hi // pad) * pad))) * max_tokens
    return total + sum(
        c * max(0, -(-v // pad) * pad - max_tokens) for v, c in zip(lengths, counts, strict=True)
    )


def edge_sets(lengths, k):
    inner = [v for v in lengths[:-1]]
    for cut in itertools.combinations(inner, k - 1):
        yield [0, *cut, lengths[-1]]


@pytest.mark.parametrize("seed", range(30))
def test_the_plan_minimises_the_steps_tokens_exactly_and_ties_go_to_less_padding(seed):
    """Exhaustive search over every edge set (K = 1..4): the plan's steps' tokens are the least
    of any edges (exact integers), ``step_tokens`` and ``budget_fill`` say them, and among the
    edge sets of that many steps none pads less (the padding objective of ``evaluate_edges``)."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 9))
    lengths = sorted(rng.choice(np.arange(1, 60), m, replace=False).tolist())
    counts = rng.integers(1, 14, m).tolist()
    max_tokens = int(rng.integers(max(2, lengths[-1] // 2), 4 * lengths[-1] + 2))
    pad = [1, 4][seed % 3 == 0]
    hist = LengthHistogram.from_counts(lengths, counts)
    rule = {"max_tokens": max_tokens, "pad_to_multiple_of": pad}
    for k in range(1, m + 1 if m <= 4 else 5):
        cost = {tuple(e): steps_tokens(lengths, counts, e, max_tokens, pad) for e in edge_sets(lengths, k)}
        best = min(cost.values())
        plan = optimize_edges(hist, k, **rule)
        assert plan.objective_kind == "steps"
        assert plan.step_tokens == steps_tokens(lengths, counts, plan.edges, max_tokens, pad) == best
        assert plan.budget_fill == hist.total_tokens / best and 0 < plan.budget_fill <= 1
        assert 0 <= plan.objective - best < max_tokens / 4  # the tie-break stays under a quarter step
        padding = {e: evaluate_edges(hist, list(e), objective="padding", **rule).objective for e in cost}
        least = min(padding[e] for e, c in cost.items() if c == best)
        assert padding[tuple(plan.edges)] <= least * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_the_pruned_dp_and_the_candidate_grid_reach_the_steps_optimum(seed):
    """On 700 distinct lengths (the pruned token-budget DP) the plan's objective is the plain
    DP's over the dense matrix of bucket costs, and a 64-candidate grid proves the same optimum
    or bounds its distance."""
    rng = np.random.default_rng(50 + seed)
    lengths = np.sort(rng.choice(np.arange(1, 9_000), 700, replace=False))
    counts = np.where(rng.random(700) < 0.3, 1, rng.integers(1, 300, 700))
    hist = LengthHistogram.from_counts(lengths, counts)
    max_tokens = int(lengths[-1] * [1, 3, 20][seed])
    prob = problem.build_problem(hist, optimize_edges(hist, 1, max_tokens=max_tokens).rule, 1, None, "steps")
    points = np.r_[0, prob.ends]
    best, _ = reference_dp(kernel.cost_matrix(prob, points), 5)
    for k in range(1, 6):
        plan = optimize_edges(hist, k, max_tokens=max_tokens, candidates=None)
        assert plan.objective == pytest.approx(best[k, -1], rel=1e-12)
        grid = optimize_edges(hist, k, max_tokens=max_tokens, candidates=64)
        assert grid.objective <= plan.objective * (1 + grid.gap) + 1e-9 * plan.objective
        assert grid.objective >= plan.objective * (1 - 1e-12)


def test_steps_never_grow_with_k_and_the_default_depends_on_the_rule():
    rng = np.random.default_rng(7)
    hist = LengthHistogram.from_lengths(rng.lognormal(6, 0.9, 4_000).astype(int) + 1)
    sweep = sweep_bucket_counts(hist, range(1, 11), ["optimal"], max_tokens=int(hist.max) * 2)
    assert (sweep["objective_kind"] == "steps").all() and sweep_measure(sweep) == "budget_fill"
    assert (np.diff(sweep["objective"]) <= 0).all() and (np.diff(sweep["budget_fill"]) >= 0).all()
    by_size = sweep_bucket_counts(hist, [1, 2], ["optimal"], batch_size=4)
    assert (by_size["objective_kind"] == "padding").all() and by_size["budget_fill"].isna().all()
    assert sweep_measure(by_size) == "efficiency"
    plan = optimize_edges(hist, 3, batch_size=4)
    assert plan.budget_fill is None and plan.step_tokens is None and plan.warnings == ()
    with pytest.raises(ValueError, match="needs a token budget"):
        optimize_edges(hist, 3, batch_size=4, objective="steps")
    with pytest.raises(ValueError, match="unknown objective"):
        optimize_edges(hist, 3, max_tokens=4_096, objective="seconds")
    with pytest.raises(ValueError, match=r"^objective='time' needs step_time"):
        optimize_edges(hist, 3, max_tokens=4_096, objective="time")


def test_with_a_step_time_model_the_time_objective_is_unchanged():
    hist = LengthHistogram.from_counts([10, 20, 200, 400], [30, 30, 20, 20])
    model = StepTimeModel(per_step=0.5, per_token=1e-3, attention=1e-5)
    plan = optimize_edges(hist, 2, max_tokens=1_600, step_time=model)
    assert plan.objective_kind == "time"
    prob = problem.build_problem(hist, plan.rule, 1, model)  # the time problem as it was built before
    assert prob.per_batch == 0.5 and prob.objective == "time"
    given = evaluate_edges(hist, plan.edges, plan.rule, step_time=model)
    assert given.objective == plan.objective
    named = optimize_edges(hist, 2, max_tokens=1_600, step_time=model, objective="time")
    assert named.edges == plan.edges and named.objective == plan.objective
    for wrong in ("steps", "padding"):  # a name is what it minimises: never turned into time
        with pytest.raises(ValueError, match="give one"):
            optimize_edges(hist, 2, max_tokens=1_600, step_time=model, objective=wrong)
        with pytest.raises(ValueError, match="give one"):
            problem.build_problem(hist, plan.rule, 1, model, wrong)


# ------------------------------------------------------------------ degenerate plans, named
def _moss_like() -> LengthHistogram:
    """A floor of short samples and two longer than half of 8,192 (the shape of MOSS)."""
    rng = np.random.default_rng(3)
    return LengthHistogram.from_lengths(np.r_[rng.integers(365, 3_300, 1_118), 4_316, 4_353])


def test_padding_alone_isolates_long_samples_and_the_warnings_name_the_buckets():
    hist = _moss_like()
    bare = optimize_edges(hist, 6, max_tokens=8_192, objective="padding")
    plan = optimize_edges(hist, 6, max_tokens=8_192)
    assert bare.batch_sizes.count(1) >= 1 and plan.n_batches < bare.n_batches
    assert plan.budget_fill > bare.budget_fill
    ones = [i for i, b in enumerate(plan.batch_sizes) if b == 1]
    lo, hi = plan.edges[ones[0]], plan.edges[ones[-1] + 1]
    lines = plan_warnings(plan)
    assert lines[0].startswith(f"batch size 1 in {len(ones)} of 6 buckets ({lo:,}, {hi:,}]")
    assert "(upper edge above max_tokens / 2 = 4,096)" in lines[0]
    assert lines[1].startswith(
        "2 samples are longer than half of max_tokens 8,192 (4,096 tokens; the longest has 4,353)"
    )
    assert len(lines) == 2 and all("\n" not in w for w in lines)
    # the engine keeps facts, the words are the narrative's: one fact per line, read back whole
    assert [w.kind for w in plan.warnings] == ["batch_size_one", "longer_than_half_budget"]
    assert plan.warnings[1].samples == 2 and plan.warnings[1].longest == 4_353
    assert [PlanWarning.from_dict(w) for w in plan.to_dict()["warnings"]] == list(plan.warnings)
    json.dumps(plan.to_dict(), allow_nan=False)


def test_a_sample_longer_than_the_budget_is_named():
    hist = LengthHistogram.from_lengths([5, 6, 7, 30, 31])
    plan = optimize_edges(hist, 2, max_tokens=20)
    assert describe_warning(plan.warnings[-1]) == (
        "2 samples are longer than max_tokens 20 (20 tokens; the longest has 31), in bucket (6, 31]: "
        "each is a batch over the budget (clip them with max_len or raise max_tokens)"
    )
    assert plan.edges == [0, 6, 31]  # 4 steps either way at 7; less padding at 6
    assert plan.step_tokens == 4 * 20 + (10 + 11) and plan.budget_fill == 79 / 101


def test_when_every_sample_fills_a_step_alone_one_bucket_is_suggested_and_said_why():
    """Every sample longer than half the budget: every K takes the same steps, a shuffle wastes
    no padding; the gain rule suggests one bucket, the sentence says why, no 0/0, no '1 buckets'."""
    hist = LengthHistogram.from_lengths(np.arange(40, 61).repeat(3))
    rec = recommend(hist, 6, max_tokens=64)
    assert rec.n_buckets_suggested == 1
    fills = rec.sweep["budget_fill"].to_numpy()
    assert np.all(fills == fills[0])
    text = describe_recommendation(rec)
    assert "1 buckets" not in text and "recover" not in text
    assert "the buckets save no step, since every sample is longer than half the budget" in text
    assert (
        "suggests 1 bucket (" in text
        and ": no K up to 16 beats one bucket by 1.0 point of budget fill" in text
    )


def test_the_gain_rule_reads_the_budget_fill_and_takes_k1_only_when_it_is_best():
    hist = _moss_like()
    rec = recommend(hist, "auto", max_tokens=8_192)
    optimal = rec.sweep.set_index("n_buckets")
    k = rec.n_buckets_suggested
    assert k > 1 and optimal.loc[k + 1, "budget_fill"] - optimal.loc[k, "budget_fill"] < 0.01
    assert all(optimal.loc[j + 1, "budget_fill"] - optimal.loc[j, "budget_fill"] >= 0.01 for j in range(1, k))
    text = describe_recommendation(rec)
    assert text.startswith(
        f"With {k} optimal buckets (max_tokens 8,192) an epoch takes {rec.plan.n_batches:,} steps"
    )
    assert "of budget fill) suggests the same" in text
    flat = optimal.reset_index().assign(budget_fill=[0.5, 0.501, 0.6] + [0.6] * (len(optimal) - 3))
    assert recommend_n_buckets(flat) == 3  # K = 2 gains little, but K = 3 beats one bucket


def test_the_k_sweep_figure_survives_every_k_equal():
    from analysis.plots import plot_efficiency_vs_buckets

    hist = LengthHistogram.from_lengths(np.arange(40, 61).repeat(3))
    rec = recommend(hist, 6, max_tokens=64, methods=("optimal", "geometric"))
    fig = plot_efficiency_vs_buckets(
        rec.sweep, random_efficiency=1.0, sorted_efficiency=1.0, chosen=6, recommended=1
    )
    ax = fig.axes[0]
    assert ax.get_ylabel().startswith("budget fill")
    low, high = ax.get_ylim()
    fill = float(rec.sweep["budget_fill"].iloc[0])
    assert high == 1.0 and low < fill  # the flat line inside the axes, not on an edge
    labels = fig.legends[0].get_texts()
    assert any(t.get_text().startswith("random or sorted (one batch size)") for t in labels)


# ---------------------------------------------------------------------------------- faces
@pytest.fixture
def long_file(tmp_path):
    path = tmp_path / "lengths.npy"
    np.save(path, np.r_[np.arange(10, 200), 700, 900, 950])
    return path


@pytest.mark.parametrize("command", ["optimize", "compare", "report"])
def test_optimize_compare_and_report_refuse_a_sample_longer_than_the_budget_alike(
    command, long_file, capsys, tmp_path
):
    out = tmp_path / "rep"
    extra = ["--out", str(out)] if command == "report" else []
    assert main([command, str(long_file), "--max-tokens", "800", "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert err == (
        "padding-workbench: error: 2 samples are longer than max_tokens = 800 (the longest has 950 "
        "tokens): raise max_tokens or clip the lengths at max_len (--max-tokens, --max-len)\n"
    )
    assert not out.exists()


@pytest.mark.parametrize("command", ["optimize", "compare"])
def test_clipped_at_max_len_they_accept_it_and_show_the_warnings(command, long_file, capsys):
    argv = [command, str(long_file), "--max-tokens", "800", "--max-len", "800", "--buckets", "3", "--quiet"]
    assert main([*argv, "--json"]) == 0
    value = json.loads(capsys.readouterr().out)
    warnings = [PlanWarning.from_dict(w) for w in value["warnings"]]
    assert [w.kind for w in warnings] == ["batch_size_one", "longer_than_half_budget"]
    assert warnings[1].samples == 3 and warnings[1].budget == 800
    if command == "optimize":
        assert value["objective_kind"] == "steps" and 0 < value["budget_fill"] <= 1
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.count("  warning: ") == 2 and "warning: batch size 1 in 1 of 3 buckets" in text
    assert "3 samples are longer than half of max_tokens 800 (400 tokens" in text.replace("\n    ", " ")


def test_the_summary_page_and_the_explorer_show_the_warnings():
    from analysis.explorer import explore, explore_view
    from analysis.report._index import Source, index_html, summary_facts

    hist = _moss_like()
    rec = recommend(hist, 6, max_tokens=8_192)
    page = index_html(summary_facts(Source("x", ()), rec, hist, seed=0), [])
    assert page.count("warning: ") == 2 and "<dt>budget fill</dt>" in page
    assert "fewer padded tokens" not in page and "step ratio" in page
    assert rec.to_dict()["plan"]["warnings"] == [w.to_dict() for w in rec.plan.warnings]
    assert rec.to_dict()["optimal_budget_fill_by_n_buckets"]["6"] == pytest.approx(rec.plan.budget_fill)
    view = explore_view(hist, n_buckets=6, max_tokens=8_192)
    assert view.warnings == plan_warnings(rec.plan) and "budget fill" in view.status()
    panel = explore(hist, n_buckets=6, max_tokens=8_192, background=False)
    assert panel.status.value.count("warning: ") == 2
    assert math.isclose(panel.view.plan.budget_fill, rec.plan.budget_fill)


def test_the_distribution_sentence_says_how_full_a_shuffles_steps_are():
    from analysis import BatchRule
    from analysis.answers.distribution import distribution_facts
    from analysis.narrative import describe_distribution

    hist = LengthHistogram.from_lengths([40, 50, 60])
    text = describe_distribution(distribution_facts(hist, BatchRule(max_tokens=100)))
    assert text.endswith(
        "Both take one batch size, 1 (the longest sample must fit the budget): "
        "their steps are 50.0% real tokens."
    )


@pytest.mark.parametrize("k", [1, 2])
def test_batches_of_one_over_tens_of_millions_of_samples_cost_their_weights(k):
    """Found by the property test: every sample over a budget of one token is a batch of one,
    whose cost the bounds take as the sum of its samples' weights to 1e-8; the DP's own cost
    of such a bucket read ``C(a, 1) / C(b, 1)`` from two ``log x!`` near 1e9 (1e-7 off), fell
    below that bound and pruned the only plan.  The DP's objective is now the independent
    evaluation's (``make_plan``), to rounding."""
    hist = LengthHistogram.from_counts([1, 2, 3], [1, 39_967_031, 39_967_032])
    plan = optimize_edges(hist, k, max_tokens=1)
    want = min(
        evaluate_edges(hist, [0, *inner, 3], max_tokens=1).objective
        for inner in itertools.combinations([1, 2], k - 1)
    )
    assert plan.objective == pytest.approx(want, rel=1e-12)
