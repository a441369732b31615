"""The report with a gradient-noise model (issue 33 item 4): notebooks that define
``noise_path`` get the model's file, the summary page and recommendation.json read the
trade-off on the gradient axis (the same sentence), recommendation.json records the edges placed
for time to quality beside the plan's, and a model inside the output folder is refused."""

from __future__ import annotations

import html
import json

import numpy as np
import pandas as pd
import pytest

from analysis import BatchRule, LengthHistogram, StepTimeModel, optimize_edges, save_histogram
from analysis.loaders import load_step_times, save_gradient_noise
from analysis.report import run_report
from analysis.timing.noise import measure_gradient_noise
from tests.integration.test_report import _tiny_notebook

RNG = np.random.default_rng(21)
LENGTHS = RNG.integers(20, 600, size=500)


@pytest.fixture
def setup(tmp_path):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    body = "from analysis.loaders import load_gradient_noise\nprint(load_gradient_noise(noise_path).n_bins)"
    _tiny_notebook(nbs / "02_noise.ipynb", params="noise_path = None", body=body)
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "in.csv")
    grads = RNG.normal(size=(LENGTHS.size, 6)) + np.outer(LENGTHS / 300, RNG.normal(size=6))
    model = measure_gradient_noise(
        lambda idx: grads[idx].mean(0), LENGTHS, n_bins=6, groups_per_bin=8, folds=3, rng=RNG
    )
    noise = save_gradient_noise(model, tmp_path / "noise.npz")
    shapes = pd.DataFrame(
        [(b, n) for b in (2, 4, 8) for n in (64, 256, 1024)] * 2, columns=["batch_size", "length"]
    )
    shapes["seconds"] = 0.01 + 1e-6 * shapes["batch_size"] * shapes["length"] * np.r_[[1.0] * 9, [1.01] * 9]
    times = tmp_path / "times.csv"
    shapes.to_csv(times, index=False)
    return nbs, src, noise, times, model


def test_the_report_reads_the_trade_off_on_the_gradient_axis(setup, tmp_path):
    nbs, src, noise, times, model = setup
    out = tmp_path / "out"
    result = run_report(
        src, out, n_buckets=3, notebooks_dir=nbs, quiet=True, noise=noise, step_times=times, seed=4
    )
    rec = json.loads((out / "recommendation.json").read_text())
    (run,) = rec["notebooks"]
    assert run["parameters"]["noise_path"] == str(noise.resolve())
    executed = json.loads((out / "02_noise.ipynb").read_text())
    assert executed["cells"][-1]["outputs"][0]["text"] == [f"{model.n_bins}\n"]
    trade = rec["tradeoff"]
    assert trade["mixing_axis"] == "effective_batch_share" and "of the effective batch" in trade["sentence"]
    assert "Mixing is a proxy" not in trade["sentence"]
    page = html.unescape((out / "index.html").read_text())
    assert trade["sentence"] in page and "(a proxy: the gradient noise below measures" in page
    # the edges placed for time to quality at the plan's K, beside the plan's own
    clock = StepTimeModel.fit(load_step_times(times))
    placed = optimize_edges(
        LengthHistogram.from_lengths(LENGTHS), 3, BatchRule(8), noise=model, step_time=clock
    )
    record = rec["gradient_noise"]["time_to_quality"]
    assert record["given"]["edges"] == rec["plan"]["edges"] == result.recommendation["plan"]["edges"]
    assert record["placed"]["edges"] == placed.edges
    assert record["placed"]["predicted_time_ratio"] <= record["given"]["predicted_time_ratio"]
    ratio = record["given"]["time_ratio"]["value"] / record["placed"]["time_ratio"]["value"]
    assert record["buys"] == pytest.approx(ratio)


def test_a_noise_model_inside_the_output_folder_is_refused(setup, tmp_path):
    nbs, src, noise, _, _ = setup
    out = tmp_path / "out"
    out.mkdir()
    inside = out / "noise.npz"
    inside.write_bytes(noise.read_bytes())
    with pytest.raises(ValueError, match="an input inside the output folder"):
        run_report(src, out, n_buckets=3, notebooks_dir=nbs, quiet=True, noise=inside)
