"""The CLI with a gradient-noise model (issue 33 item 4): ``frontier --noise`` prints the
gradient axis, ``optimize --noise --step-times`` places the edges for time to quality and says
the plan's PlanGradient figures, ``--min-effective-batch`` floors; each bad combination is one
line.  Every number is checked against the API on the same files."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from analysis import BatchRule, LengthHistogram, StepTimeModel, cli, optimize_edges, save_histogram
from analysis.answers.frontier import frontier
from analysis.answers.tradeoff import read_tradeoff
from analysis.loaders import load_step_times, save_gradient_noise
from analysis.narrative.frontier import frontier_sentence
from analysis.narrative.noise import describe_plan_gradient
from analysis.tables import format_percent
from analysis.timing.noise import measure_gradient_noise

RNG = np.random.default_rng(5)
LENGTHS = RNG.integers(2, 300, 900)
HIST = LengthHistogram.from_lengths(LENGTHS)
RULE = BatchRule(batch_size=8)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The lengths, a noise model whose mean gradient turns with length, and step times."""
    tmp = tmp_path_factory.mktemp("noise_cli")
    grads = RNG.normal(size=(LENGTHS.size, 6)) + np.outer(LENGTHS / 150, RNG.normal(size=6))
    model = measure_gradient_noise(
        lambda idx: grads[idx].mean(0), LENGTHS, n_bins=8, groups_per_bin=8, folds=3, rng=RNG
    )
    rows = [
        (b, t, (0.004 + 2e-5 * b * t + 3e-8 * b * t * t) * (1 + e))
        for b in (2, 4, 8)
        for t in (8, 64, 150, 300)
        for e in (-0.01, 0.01)  # two timings a shape
    ]
    times = tmp / "times.csv"
    times.write_text("batch_size,length,seconds\n" + "".join(f"{b},{t},{s!r}\n" for b, t, s in rows))
    clock = StepTimeModel.fit(load_step_times(times))
    return {
        "lengths": str(save_histogram(HIST, tmp / "lengths.csv")),
        "noise": str(save_gradient_noise(model, tmp / "noise.npz")),
        "times": str(times),
        "model": model,
        "clock": clock,
    }


def _run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_optimize_places_the_edges_for_time_to_quality(capsys, monkeypatch, files):
    monkeypatch.setenv("COLUMNS", "200")
    base = [
        "optimize",
        files["lengths"],
        "--buckets",
        3,
        "--noise",
        files["noise"],
        "--step-times",
        files["times"],
    ]
    plan = optimize_edges(HIST, 3, RULE, noise=files["model"], step_time=files["clock"])
    code, out, _ = _run(capsys, *base, "--json")
    assert code == 0
    got = json.loads(out)
    assert got["edges"] == plan.edges and plan.gradient is not None
    g = got["gradient"]
    assert g["predicted_time_ratio"] == pytest.approx(plan.gradient.predicted_time_ratio)
    assert g["time_ratio"]["value"] == pytest.approx(plan.gradient.time_ratio.value)
    assert g["effective_batch_share"] == pytest.approx(1 / (1 + 7 * plan.gradient.between_share))
    code, out, _ = _run(capsys, *base)
    assert code == 0
    text = " ".join(out.split())
    assert describe_plan_gradient(plan.gradient, 3, 8) in text
    assert f"keeps {format_percent(g['effective_batch_share'], 'prose')} of its samples' worth" in text
    assert f"({plan.gradient.predicted_time_ratio:.4f} in the design-effect form)" in text
    assert "proven:" in text and "the gradient noise below is what it stands for" in text


def test_min_effective_batch_floors_the_design_effect_share(capsys, files):
    code, out, _ = _run(
        capsys, "optimize", files["lengths"], "--buckets", 4, "--noise", files["noise"],
        "--min-effective-batch", "0.9", "--json",
    )  # fmt: skip
    assert code == 0
    got = json.loads(out)
    plan = optimize_edges(HIST, 4, RULE, noise=files["model"], min_effective_batch=0.9)
    assert got["edges"] == plan.edges and got["floor"]["measure"] == "effective_batch"
    assert got["gradient"]["effective_batch_share"] >= 0.9
    assert got["gradient"]["time_ratio"] is None  # no step times: no time to quality


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ([], "needs --step-times"),
        (["--max-tokens", 2048], "give --batch-size, not --max-tokens"),
        (["--min-mixing", 0.1], "give --min-effective-batch, not --min-mixing"),
        (["--method", "geometric"], "--method optimal only"),
        (["--min-efficiency", 0.8, "--step-times", "TIMES"], "--min-efficiency cannot floor"),
        (["--min-effective-batch", 0.9, "--no-noise"], "give --noise"),
    ],
)
def test_bad_combinations_are_one_line(capsys, files, extra, needle):
    argv = ["optimize", files["lengths"], "--noise", files["noise"], *extra]
    if "--no-noise" in extra:
        argv = [a for a in argv if a not in ("--noise", files["noise"], "--no-noise")]
    argv = [files["times"] if a == "TIMES" else a for a in argv]
    code, out, err = _run(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and needle in lines[0], err


def test_frontier_prints_the_gradient_axis(capsys, monkeypatch, files):
    monkeypatch.setenv("COLUMNS", "250")
    argv = ["frontier", files["lengths"], "--max-buckets", 4, "--lambdas", 1, "--epochs", 1, "--seed", 3]
    argv += ["--noise", files["noise"], "--step-times", files["times"]]
    code, out, _ = _run(capsys, *argv, "--json")
    assert code == 0
    got = json.loads(out)
    res = frontier(
        HIST, RULE, rng=np.random.default_rng(3), max_buckets=4, n_lambdas=1, epochs=1,
        noise=files["model"], step_time=files["clock"],
    )  # fmt: skip
    assert got["mixing_axis"] == res.mixing_axis == "effective_batch_share"
    shares = [r["effective_batch_share"] for r in got["rows"]]
    np.testing.assert_allclose(shares, res.frame["effective_batch_share"].to_numpy(float))
    assert all(r["quality_time"] is not None and math.isfinite(r["quality_time"]) for r in got["rows"])
    code, out, _ = _run(capsys, *argv)
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("label"))
    for column in ("tokens_per_s", "effective_batch_share", "effective_batch_share_se", "quality_time"):
        assert column in header
    trade = read_tradeoff(res, HIST, noise=files["model"], step_time=files["clock"])
    assert " ".join(frontier_sentence(trade, trade.mixing_axis).split()) in " ".join(out.split())
    assert "on both tokens/s and effective batch" in out and "Mixing is a proxy" not in out


def test_frontier_without_a_model_keeps_its_columns(capsys, monkeypatch, files):
    monkeypatch.setenv("COLUMNS", "250")
    argv = ["frontier", files["lengths"], "--max-buckets", 3, "--lambdas", 1, "--epochs", 1]
    code, out, _ = _run(capsys, *argv)
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("label")).split()
    assert header == [
        "label",
        "efficiency",
        "mixing",
        "mixing_se",
        "lag1_autocorr",
        "composition_repeat",
        "exact",
    ]
    assert "Mixing is a proxy" in " ".join(out.split())
