"""analysis.frontier (every strategy and knob on the efficiency-mixing plane), its CLI subcommand
and the floors of optimize / recommend, against the exact functions they stand on."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import nbformat
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

import analysis.cli as cli
from analysis import (
    BatchRule,
    LengthHistogram,
    StepTimeModel,
    evaluate_edges,
    frontier,
    load_lengths,
    optimize_edges,
    recommend,
    save_histogram,
)
from analysis.answers.frontier import FLOOR_CHECKS, FRONTIER_COLUMNS, Frontier
from analysis.answers.tradeoff import read_tradeoff
from analysis.batching import DEFAULT_SEED
from analysis.narrative.frontier import PARETO_CHECKED, frontier_sentence, named_points, pareto_check_sentence
from analysis.optimize import Floor, floor_plans
from analysis.padding.mixing import random_mixing, sorted_mixing
from analysis.paths import NOTEBOOKS_DIR
from analysis.plots import plot_frontier
from analysis.tables import format_percent
from analysis.timing.epoch import expected_epoch_time

LENGTHS = np.concatenate(
    [np.random.default_rng(7).integers(5, 200, size=2_000), np.random.default_rng(8).integers(300, 2000, 400)]
)


@pytest.fixture(scope="module")
def hist():
    return LengthHistogram.from_lengths(LENGTHS)


#: The shared frontier's largest K: 4 (its Pareto check costs 0.6 s of CPU where K = 6 cost 7 s,
#: a fifth of the fast unit core; the real-shaped files below are checked at K = 6).
RESULT_K = 4


@pytest.fixture(scope="module")
def result(hist):
    return frontier(
        hist, batch_size=4, rng=np.random.default_rng(0), max_buckets=RESULT_K, n_lambdas=3, epochs=2
    )


def test_frame_holds_every_strategy_and_knob(result, hist):
    f = result.frame
    assert list(f.columns[: len(FRONTIER_COLUMNS)]) == list(FRONTIER_COLUMNS)
    assert set(f["strategy"]) == {"sorted", "random", "bucketed", "length_grouped", "token_budget", "packing"}
    assert sorted(f.loc[f["strategy"] == "length_grouped", "knob_value"]) == [1, 4, 16]
    assert sorted(f.loc[f["strategy"] == "token_budget", "knob_value"]) == [0.05, 0.1, 0.3]
    row = f.set_index("label")
    assert row.loc["sorted", "mixing"] == sorted_mixing(hist, rule=BatchRule(batch_size=4))
    assert row.loc["random", "mixing"] == random_mixing(hist, rule=BatchRule(batch_size=4))
    for k in range(1, RESULT_K + 1):
        plan = optimize_edges(hist, k, batch_size=4)
        assert row.loc[f"optimal edges, K={k}", "efficiency"] == pytest.approx(plan.efficiency, rel=1e-12)
        assert row.loc[f"optimal edges, K={k}", "mixing"] == pytest.approx(plan.mixing, rel=1e-12)
    simulated = f[~f["exact"]]
    fixed = simulated["strategy"] == "packing"  # the same bins every epoch: exact, SE 0
    assert (simulated.loc[fixed, "mixing_se"] == 0).all() and (simulated.loc[~fixed, "mixing_se"] > 0).all()
    assert simulated["lag1_autocorr"].notna().all()
    assert (f["efficiency"] <= 1).all() and (f["mixing"].between(0, 1)).all()


def test_pareto_set_is_the_undominated_points(result):
    f = result.frame
    e, g = f["efficiency"].to_numpy(), f["mixing"].to_numpy()
    for i in range(len(f)):
        beaten = ((e >= e[i]) & (g >= g[i]) & ((e > e[i]) | (g > g[i]))).any()
        assert bool(f["pareto"].iloc[i]) == (not beaten), f["label"].iloc[i]
    p = result.pareto
    assert p["efficiency"].is_monotonic_decreasing and p["mixing"].is_monotonic_increasing


def test_best_point_and_its_errors(result):
    row = result.best(min_efficiency=0.8)
    assert row["efficiency"] >= 0.8
    others = result.pareto[result.pareto["efficiency"] >= 0.8]
    assert row["mixing"] == others["mixing"].max()
    assert result.best(Floor("efficiency", 0.8)).equals(row)
    with pytest.raises(ValueError, match=r"^min_mixing = 1 is unreachable: the most is 1\.0000$|^min_mixing"):
        result.best(min_mixing=1.0 + 1e-9)
    with pytest.raises(ValueError, match="give a floor"):
        result.best()
    with pytest.raises(ValueError, match="min_budget_fill needs a token budget"):
        result.best(min_budget_fill=0.5)


def test_tokens_per_s_with_a_step_time_model(hist):
    model = StepTimeModel(per_step=1e-3, per_token=1e-6, attention=1e-10)
    res = frontier(
        hist, batch_size=4, rng=np.random.default_rng(0), max_buckets=3, n_lambdas=1, step_time=model
    )
    assert res.axis == "tokens_per_s" and res.frame["tokens_per_s"].notna().all()
    row = res.frame.set_index("label").loc["random"]
    assert row["tokens_per_s"] == pytest.approx(
        hist.total_tokens / expected_epoch_time(hist, model, "random", rule=BatchRule(batch_size=4))
    )
    json.dumps(res.to_dict(), allow_nan=False)


def test_recommend_with_a_floor(hist):
    rec = recommend(hist, 4, batch_size=4, min_mixing=0.2)
    assert rec.floor is not None and rec.floor.measure == "mixing" and rec.plan.mixing >= 0.2
    assert rec.to_dict()["plan"]["floor"]["floor"] == "min_mixing"
    assert recommend(hist, 4, batch_size=4, floor=Floor("mixing", 0.2)).plan == rec.plan
    assert recommend(hist, 4, batch_size=4).floor is None


def test_cli_frontier_and_floors(tmp_path, capsys, monkeypatch, hist):
    monkeypatch.setenv("COLUMNS", "120")
    path = save_histogram(hist, tmp_path / "lengths.csv")
    args = ["frontier", path, "--batch-size", "4", "--max-buckets", "4", "--lambdas", "2"]
    assert cli.main([str(a) for a in [*args, "--json"]]) == 0
    value = json.loads(capsys.readouterr().out)
    assert value["axis"] == "efficiency" and any(r["pareto"] for r in value["rows"])
    assert cli.main([str(a) for a in args]) == 0
    out = capsys.readouterr().out
    assert "Pareto set" in out and "mixing" in out
    assert (
        cli.main(["optimize", str(path), "--buckets", "3", "--batch-size", "4", "--min-efficiency", "70%"])
        == 0
    )
    out = capsys.readouterr().out
    assert "frontier edges for 3 buckets" in out and "--min-efficiency 70%" in out
    code = cli.main(
        ["optimize", str(path), "--buckets", "2", "--batch-size", "4", "--min-efficiency", "0.9999"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "unreachable with 2 buckets: the best is" in err
    code = cli.main(["optimize", str(path), "--min-efficiency", "0.5", "--min-mixing", "0.5"])
    assert code == 2 and "not allowed with argument" in capsys.readouterr().err
    budget = ["--buckets", "3", "--max-tokens", "4000"]
    assert cli.main(["optimize", str(path), *budget, "--min-budget-fill", "50%"]) == 0
    out = capsys.readouterr().out
    assert "--min-budget-fill 50%: mixing" in out and "budget fill" in out
    code = cli.main(["optimize", str(path), *budget, "--min-efficiency", "50%"])
    assert code == 2 and "give min_budget_fill" in capsys.readouterr().err
    compare = ["compare", str(path), "--buckets", "3", "--batch-size", "4", "--epochs", "1"]
    assert cli.main([*compare, "--min-mixing", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "frontier edges for 3 buckets" in out and "--min-mixing 20%: efficiency" in out
    assert cli.main([*compare, "--min-mixing", "0.2", "--json"]) == 0
    floor = json.loads(capsys.readouterr().out)["floor"]
    assert floor["measure"] == "mixing" and floor["exact"] is True and floor["bound"] > 0


def _frontier_of(rows: list[dict]) -> Frontier:
    """A Frontier on a frame of the given rows (every other column NaN)."""
    frame = pd.DataFrame([{**dict.fromkeys(FRONTIER_COLUMNS, np.nan), **r} for r in rows])
    return Frontier(frame, BatchRule(batch_size=4), "efficiency", ())


def _bucketed(kind: str, k: int, efficiency: float, mixing: float) -> dict:
    return dict(
        strategy="bucketed",
        knob="n_buckets",
        label=f"{kind}, K={k}",
        n_buckets=k,
        efficiency=efficiency,
        mixing=mixing,
        pareto=True,
    )


def test_the_short_table_merges_only_rows_that_print_alike():
    """Rows merge when their efficiency and mixing print alike (97.00% and 1.00%: 0.970001 and
    0.970049 do), never when the last printed digit differs (0.970051 prints 97.01%), and the
    merged row says its K range; other strategies never merge."""
    res = _frontier_of(
        [
            _bucketed("frontier edges", 9, 0.970051, 0.0100),  # 97.01%: differs in the last digit
            _bucketed("optimal edges", 8, 0.970049, 0.0100),
            _bucketed("floor edges", 7, 0.970030, 0.0100),
            _bucketed("floor edges", 6, 0.970001, 0.0100),
            _bucketed("floor edges", 5, 0.960000, 0.010049),  # mixing 1.00%: merges with K = 4
            _bucketed("floor edges", 4, 0.960000, 0.010001),
            _bucketed("floor edges", 3, 0.950000, 0.010051),  # mixing 1.01%: stands alone
            dict(strategy="random", knob="", label="random", efficiency=0.95, mixing=0.010051, pareto=True),
        ]
    )
    table = res.table()
    assert table["label"].tolist() == [
        "frontier edges, K=9",
        "bucketed, K=6–8",
        "floor edges, K=4–5",
        "floor edges, K=3",
        "random",
    ]
    assert table["efficiency"].tolist() == [0.970051, 0.970049, 0.96, 0.95, 0.95]  # the first of each run
    assert len(res.table(short=False)) == len(res.frame)


def test_the_short_table_has_one_row_per_k_its_most_efficient(result):
    """Of each K's Pareto rows the table keeps the most efficient; every other strategy's
    Pareto row stays; the frame keeps every row."""
    table = result.table()
    pareto = result.pareto
    placed = pareto[(pareto["strategy"] == "bucketed") & (pareto["knob"] == "n_buckets")]
    shown = table[(table["strategy"] == "bucketed") & (table["knob"] == "n_buckets")]
    assert shown["n_buckets"].is_unique
    ks = []
    for _, row in shown.iterrows():
        ks.extend(int(k) for k in re.findall(r"\d+", row["label"].partition("K=")[2].replace("–", " ")))
        assert row["efficiency"] == placed.loc[placed["n_buckets"] == row["n_buckets"], "efficiency"].max()
    assert set(placed["n_buckets"].astype(int)) >= set(ks)
    others = pareto[pareto["knob"] != "n_buckets"]["label"].tolist()
    assert [x for x in table["label"] if x in others] == others
    assert table["efficiency"].is_monotonic_decreasing
    assert len(result.frame) > len(table)


def test_the_cli_prints_the_short_table_and_every_row_with_all(tmp_path, capsys, monkeypatch, hist):
    monkeypatch.setenv("COLUMNS", "400")
    path = save_histogram(hist, tmp_path / "lengths.csv")
    args = [
        "frontier",
        str(path),
        "--batch-size",
        "4",
        "--max-buckets",
        "12",
        "--lambdas",
        "2",
        "--epochs",
        "1",
    ]
    res = frontier(
        hist,
        batch_size=4,
        rng=np.random.default_rng(DEFAULT_SEED),
        max_buckets=12,
        n_lambdas=2,
        epochs=1,
        floor_checks=FLOOR_CHECKS,
    )
    # frontier is a pure function of its arguments: the CLI's two runs, given these same ones,
    # get ``res`` itself instead of computing it twice more (10 s of CPU each); with any other
    # argument they compute their own, and the count below fails
    asked = {
        "max_buckets": 12,
        "n_lambdas": 2,
        "epochs": 1,
        "noise": None,
        "step_time": None,
        "floor_checks": FLOOR_CHECKS,
    }
    seeded = np.random.default_rng(DEFAULT_SEED).bit_generator.state
    hits = []

    def same_frontier(h, rule, *, rng, **kwargs):
        if (h, rule, rng.bit_generator.state, kwargs) == (hist, BatchRule(batch_size=4), seeded, asked):
            hits.append(rule)
            return res
        return frontier(h, rule, rng=rng, **kwargs)

    monkeypatch.setattr("analysis.cli._frontier.frontier", same_frontier)
    assert cli.main(args) == 0
    short = capsys.readouterr().out
    assert cli.main([*args, "--all"]) == 0
    every = capsys.readouterr().out
    assert len(hits) == 2  # both runs asked for this frontier

    def labels(out: str) -> list[str]:
        lines = out.split("\nlabel ", 1)[1].split("\n(mixing")[0].splitlines()[1:]
        return [line.rsplit("%", 1)[0].split("  ")[0].strip() for line in lines if line.strip()]

    assert "one row per K" in short and "Every point" in every
    assert labels(short) == res.table()["label"].tolist()
    assert labels(every) == res.frame["label"].tolist()


def test_a_pareto_set_of_one_point_is_drawn_and_named():
    """Where one point beats every other (packing under a tight budget, arena_hard at 4,096
    tokens), a staircase of one point would draw nothing under its legend entry: the point is
    ringed by a square and the legend names it; two points draw the staircase (its vertices)."""
    rows = [
        dict(_bucketed("optimal edges", 2, 0.80, 0.01), pareto=False),
        dict(_bucketed("optimal edges", 3, 0.85, 0.005), pareto=False),
        dict(strategy="packing", knob="", label="packing", efficiency=0.99, mixing=0.3, pareto=True),
    ]
    ax = plot_frontier(_frontier_of(rows).frame).axes[0]
    squares = [c for c in ax.collections if c.get_offsets().tolist() == [[0.3, 0.99]]]
    assert len(squares) == 1 and squares[0].get_facecolor().size == 0  # an open square, at the point
    legend = [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else []
    legend += [t.get_text() for t in ax.figure.legends[0].get_texts()] if ax.figure.legends else []
    assert "Pareto frontier: packing alone (it beats every other point)" in legend
    rows[1]["pareto"] = True  # two points: the staircase, from the first point to the second
    ax = plot_frontier(_frontier_of(rows).frame).axes[0]
    drawn = [
        (line.get_drawstyle(), line.get_xydata().tolist())
        for line in ax.lines
        if line.get_linestyle() == "--"
    ]
    assert drawn == [("steps-post", [[0.005, 0.85], [0.3, 0.99]])]


def test_the_cli_and_notebook_02_print_the_same_columns_the_axis_among_them():
    """Under a token budget the Pareto set is on the budget fill: the printed table has it
    beside the padding efficiency; with a batch size only the efficiency."""
    rows = [dict(strategy="packing", knob="", label="packing", efficiency=0.99, mixing=0.3, pareto=True)]
    res = _frontier_of(rows)
    assert res.shown_columns()[:4] == ["label", "efficiency", "mixing", "mixing_se"]
    budget = Frontier(res.frame, BatchRule(max_tokens=64), "budget_fill", ())
    assert budget.shown_columns()[:4] == ["label", "efficiency", "budget_fill", "mixing"]
    nb = nbformat.read(NOTEBOOKS_DIR / "02_strategies.ipynb", as_version=4)
    assert any("trade.table()[trade.shown_columns()]" in c.source for c in nb.cells if c.cell_type == "code")


def test_the_figure_marks_points_and_refuses_unknown_ones(result):

    fig = plot_frontier(
        result.frame, marks={"chosen": "optimal edges, K=3", "HF Trainer": "length_grouped G=1"}
    )
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_ylim()[1] == 1.0
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("chosen: optimal edges, K=3") for t in texts)
    assert any(t.startswith("HF Trainer: length_grouped G=1") for t in texts)
    with pytest.raises(ValueError, match="no row labelled 'nope'"):
        plot_frontier(result.frame, marks={"chosen": "nope"})


def test_bad_input_is_one_error_while_the_optimal_dp_runs_beside(hist):
    """The optimal edges' DP runs on a second thread: an error of the main thread's work (a bad
    subsample size) still comes out as its one ValueError, and bad given edges fail first."""
    with pytest.raises(ValueError, match="simulate_samples"):
        frontier(hist, batch_size=4, rng=np.random.default_rng(0), max_buckets=4, simulate_samples=0)
    with pytest.raises(ValueError, match="edges"):
        frontier(hist, batch_size=4, rng=np.random.default_rng(0), edge_sets={"case": [0, 5, 3]})
    for bad in (-1, 2.0, True):
        with pytest.raises(ValueError, match=r"^floor_checks must be an integer >= 0, got"):
            frontier(hist, batch_size=4, rng=np.random.default_rng(0), floor_checks=bad)


def test_under_a_token_budget_the_plane_is_the_steps_budget_fill(hist):
    """Under a token budget the edges are placed for steps, so the plane's axis is the budget
    fill (useful tokens over ``max_tokens`` a step): sorted batches' from their one batch size,
    the bucketed plans' the optimiser's, every share in (0, 1], the Pareto set on it."""
    budget = 4_000
    res = frontier(
        hist, max_tokens=budget, rng=np.random.default_rng(0), max_buckets=4, n_lambdas=2, epochs=1
    )
    assert res.axis == "budget_fill"
    f = res.frame.set_index("label")
    size = budget // hist.max  # sorted batches: as many of the longest as fit
    steps = -(-hist.n_samples // size)
    assert f.loc["sorted", "budget_fill"] == hist.total_tokens / (steps * budget)
    assert (
        f.loc["optimal edges, K=3", "budget_fill"] == optimize_edges(hist, 3, max_tokens=budget).budget_fill
    )
    assert (f["budget_fill"] > 0).all() and (f["budget_fill"] <= 1).all()
    packing = f.loc["packing"]
    assert packing["budget_fill"] <= packing["efficiency"]  # a row's tail is padding too
    fig = plot_frontier(res.frame, axis=res.axis)
    assert fig.axes[0].get_ylabel().startswith("budget fill")
    plt.close(fig)
    trainer = f.loc["length_grouped G=1"]
    text = frontier_sentence(read_tradeoff(res))
    x = format_percent(trainer["budget_fill"], "prose")
    assert text.startswith(f"At {x} budget fill or more") or f"already reaches {x} budget fill" in text


def _real_shaped(seed: int) -> LengthHistogram:
    """Lengths shaped like chat data (2,000 of a lognormal body, a long tail of 100), or like a
    tokenizer padded to multiples of 128 (4,000 of the body, few distinct lengths).  The chat
    file's 878 distinct lengths keep the floor searches of every kind (hull, labels and bounded,
    on seed 0) at a third of the CPU of twice the samples (1,216 distinct lengths, 40 s)."""
    rng = np.random.default_rng(seed)
    if seed % 2:
        body = rng.lognormal(5.5, 0.9, 4_000)
        return LengthHistogram.from_lengths(np.ceil(np.clip(body, 1, 6_000) / 128).astype(int) * 128)
    body = rng.lognormal(5.5, 0.9, 2_000)
    tail = rng.integers(2_000, 8_000, 100)
    return LengthHistogram.from_lengths(np.clip(np.r_[body, tail], 1, 8_192).astype(int))


def _beaten(x: float, y: float, pareto: pd.DataFrame, axis: str) -> pd.Series:
    """The Pareto points that ``(x, y)`` beats: as good on both, better on one by more than a
    relative 1e-9 (float ties of the searches)."""
    a, g = pareto[axis], pareto["mixing"]
    return (x >= a) & (y >= g) & ((x > a * (1 + 1e-9)) | (y > g * (1 + 1e-9)))


@pytest.mark.parametrize(
    ("seed", "rule"), [(8, BatchRule(batch_size=4)), (3, BatchRule(max_tokens=200))], ids=str
)
def test_no_plan_of_any_k_beats_a_pareto_point(seed, rule):
    """Exhaustive: every plan of every K <= max_buckets on 10 distinct lengths (every choice of
    edges), under both rules, against the Pareto set (simulated strategies included).  Checked
    at the largest K only, a floor-edges point of K = 4 stood beaten by a plan of K = 2 (seed 8)
    or K = 3 (seed 3)."""
    rng = np.random.default_rng(seed)
    values = np.sort(rng.choice(np.arange(1, 80), 10, replace=False))
    hist = LengthHistogram.from_lengths(rng.choice(values, 200, p=rng.dirichlet(np.ones(10))))
    res = frontier(
        hist,
        rule,
        rng=np.random.default_rng(0),
        max_buckets=4,
        n_lambdas=2,
        epochs=1,
        floor_checks=FLOOR_CHECKS,
    )
    assert res.unchecked == 0
    pareto = res.pareto
    inner = hist.lengths[:-1].tolist()
    for k in range(1, 5):
        for cut in itertools.combinations(inner, k - 1):
            plan = evaluate_edges(hist, [0, *cut, int(hist.max)], rule)
            x = plan.budget_fill if res.axis == "budget_fill" else plan.efficiency
            beaten = _beaten(x, plan.mixing, pareto, res.axis)
            assert not beaten.any(), (
                plan.edges,
                x,
                plan.mixing,
                pareto[beaten][["label", res.axis, "mixing"]],
            )


@pytest.mark.parametrize("source", ["bundled", "chat", "multiples"])
def test_no_floor_plan_beats_a_pareto_point(source):
    """Every Pareto point is checked against the floor search at its efficiency and its mixing
    at every K <= max_buckets: none of those plans beats it on both."""
    if source == "bundled":
        hist = load_lengths(Path(__file__).resolve().parents[2] / "data" / "case_lengths.csv")
        k = 4
    else:
        hist, k = _real_shaped(0 if source == "chat" else 1), 6
    res = frontier(
        hist,
        batch_size=8,
        rng=np.random.default_rng(0),
        max_buckets=k,
        n_lambdas=2,
        epochs=1,
        simulate_samples=4_000,
        floor_checks=FLOOR_CHECKS,
    )
    assert res.unchecked == 0
    pareto = res.pareto
    asks = [(j, Floor("efficiency", float(e))) for e in pareto["efficiency"] for j in range(1, k + 1)]
    asks += [(j, Floor("mixing", float(g))) for g in pareto["mixing"] if 0 < g <= 1 for j in range(1, k + 1)]
    for plan in floor_plans(hist, BatchRule(batch_size=8), asks):
        if plan is None:
            continue
        beaten = _beaten(plan.efficiency, plan.mixing, pareto, "efficiency")
        assert not beaten.any(), (
            plan.floor,
            plan.efficiency,
            plan.mixing,
            pareto[beaten][["label", "efficiency", "mixing"]],
        )


def test_five_lengths_spanning_sixty_bits_get_frontier_rows():
    """With as many buckets as distinct lengths the K-bucket plan is unique; the sweep's
    lambdas come from the largest K with a trade-off, so the plane has frontier rows."""
    hist = LengthHistogram.from_lengths([1, 2**20, 2**30, 3 * 2**30, 2**63 - 1])
    res = frontier(hist, batch_size=2, rng=np.random.default_rng(0), simulate_strategies=False)
    f = res.frame
    assert (f["label"].str.startswith("frontier edges")).any()
    assert len(res.lambdas) == 4 and res.lambdas[0] < res.lambdas[-1]
    assert (f["efficiency"].between(0, 1)).all() and (f["mixing"].between(0, 1)).all()
    text = frontier_sentence(read_tradeoff(res, min_efficiency=0.6))
    best = f[(f["strategy"] == "bucketed") & (f["efficiency"] >= 0.6)]["mixing"].max()
    assert f"keeps {format_percent(best, 'prose')} of the mixing" in text


def test_batches_of_one_say_there_is_no_mixing_to_measure():
    """Batch size 1 pads nothing and mixes nothing: the Trainer's mixing is undefined (NaN),
    and the sentence says so instead of printing a dash with an error bar."""
    hist = LengthHistogram.from_lengths([1, 2**20, 2**30, 3 * 2**30, 2**62])
    res = frontier(hist, batch_size=1, rng=np.random.default_rng(0), max_buckets=5, n_lambdas=2)
    trainer = res.frame[res.frame["strategy"] == "length_grouped"]
    exact = res.frame[res.frame["strategy"].isin(["bucketed", "sorted", "random"])]
    assert trainer["mixing"].isna().all() and (exact["efficiency"] == 1.0).all()
    text = frontier_sentence(read_tradeoff(res, hist))
    assert "no mixing to measure" in text and "–" not in text and "± 0%" not in text
    # the figure draws what it can, without a mark where the Trainer's point has no mixing
    label = str(trainer["label"].iloc[0])
    fig = plot_frontier(res.frame, axis=res.axis, marks={"HF Trainer": label})
    assert not any("HF Trainer" in t.get_text() for t in fig.axes[0].texts)
    plt.close(fig)


@pytest.mark.parametrize(
    ("seed", "rule"), [(1, BatchRule(batch_size=4)), (1, BatchRule(max_tokens=200))], ids=str
)
def test_the_points_left_unproven_hold_every_beaten_one(seed, rule):
    """With no floor search (``floor_checks=0``, the default) the Lagrangian bounds alone leave
    pairs open: every Pareto point that an exhaustive search finds beaten (here the K = 3
    optimum under batch size 4; a K = 4 frontier plan and the K = 2 optimum under the budget)
    is among ``unproven``, and the sentence names the points; with the faces' checks, none is
    left."""
    rng = np.random.default_rng(seed)
    values = np.sort(rng.choice(np.arange(1, 80), 10, replace=False))
    hist = LengthHistogram.from_lengths(rng.choice(values, 200, p=rng.dirichlet(np.ones(10))))
    kw = dict(rng=np.random.default_rng(0), max_buckets=4, n_lambdas=2, simulate_strategies=False)
    res = frontier(hist, rule, **kw)
    assert res.floor_checks == 0
    pareto = res.pareto
    beaten: set[str] = set()
    for k in range(1, 5):
        for cut in itertools.combinations(hist.lengths[:-1].tolist(), k - 1):
            plan = evaluate_edges(hist, [0, *cut, int(hist.max)], rule)
            x = plan.budget_fill if res.axis == "budget_fill" else plan.efficiency
            beaten |= set(pareto.loc[_beaten(x, plan.mixing, pareto, res.axis), "label"])
    assert beaten and beaten <= set(res.unproven) <= set(pareto["label"])
    assert res.unchecked > 0 and named_points(res.unproven) in pareto_check_sentence(res)
    checked = frontier(hist, rule, floor_checks=FLOOR_CHECKS, **kw)
    assert checked.unchecked == 0 and checked.unproven == ()
    assert pareto_check_sentence(checked) == PARETO_CHECKED


@pytest.fixture(scope="module")
def two_humps():
    """A frontier of a two-humped histogram under batch size 64, K up to 10."""
    rng = np.random.default_rng(0)
    lengths = np.concatenate([rng.lognormal(3.5, 0.4, 8_000), rng.lognormal(5.4, 0.6, 12_000)])
    hist = LengthHistogram.from_lengths(lengths.astype(int) + 1)
    return frontier(hist, batch_size=64, rng=np.random.default_rng(0), max_buckets=10, n_lambdas=2, epochs=1)


def _marked(result, k: int):
    """The frontier figure of ``result`` with K = ``k``'s optimal plan and the HF Trainer
    marked, drawn, its axes and the text boxes of its labels on screen (leader lines left out)."""
    frame = result.frame
    trainer = frame.loc[frame["strategy"] == "length_grouped", "label"].iloc[0]
    fig = plot_frontier(frame, marks={"this plan": f"optimal edges, K={k}", "HF Trainer": trainer})
    ax = fig.axes[0]
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    return fig, ax, [Text.get_window_extent(t, renderer) for t in ax.texts]


@pytest.mark.parametrize("k", [8, 9, 10])
def test_the_marks_labels_cover_no_drawn_point(two_humps, k):
    """A mark's label sits where no point is drawn (here the chosen plan's label once covered
    two to four of the K-sweep's markers beside it): no label's text box holds the centre of a
    marker of any curve, ring or staircase."""
    fig, ax, texts = _marked(two_humps, k)
    assert len(texts) == 2
    points = [p for c in ax.collections for p in c.get_offset_transform().transform(c.get_offsets())]
    points += [p for line in ax.lines for p in line.get_transform().transform(line.get_xydata())]
    assert len(points) > 3 * k
    assert [tuple(p) for box in texts for p in points if box.contains(*p)] == []
    plt.close(fig)


def _drawn_segments(ax) -> list[tuple[np.ndarray, np.ndarray]]:
    """The segments on screen of every line of ``ax`` as matplotlib draws it (its steps
    included), but its markers alone."""
    from matplotlib.cbook import STEP_LOOKUP_MAP

    out = []
    for line in ax.lines:
        if line.get_linestyle() in ("None", "", " "):
            continue
        x, y = STEP_LOOKUP_MAP[line.get_drawstyle()](*np.asarray(line.get_xydata(), float).T)
        screen = line.get_transform().transform(np.column_stack([x, y]))
        out += list(zip(screen[:-1], screen[1:], strict=True))
    return out


def _crosses(a: np.ndarray, b: np.ndarray, box) -> bool:
    """Whether the segment ``a``-``b`` passes through ``box`` (sampled every 0.1 px)."""
    n = int(np.hypot(*(b - a)) * 10) + 2
    return any(box.contains(*p) for p in a + np.linspace(0.0, 1.0, n)[:, None] * (b - a))


@pytest.mark.parametrize("k", [2, 6, 8, 9, 10])
def test_the_marks_labels_cross_no_drawn_line(two_humps, k):
    """A mark's label sits clear of the lines drawn too, where there is room (on alpaca's
    data at batch size 1,000 the Pareto staircase ran under the HF Trainer's label): no
    label's text box is crossed by a strategy's curve or the staircase (its leader line may
    cross them)."""
    fig, ax, texts = _marked(two_humps, k)
    segments = _drawn_segments(ax)
    assert len(texts) == 2 and len(segments) > 10
    assert [(i, tuple(a)) for i, box in enumerate(texts) for a, b in segments if _crosses(a, b, box)] == []
    plt.close(fig)
